"""The drop_grad_scaler codemod: a GradScaler where nothing is float16, removed.

``scaler.scale(loss).backward()`` -> ``loss.backward()``, ``scaler.step(opt)`` -> ``opt.step()``,
``scaler.update()`` and ``scaler.unscale_(opt)`` gone, and the ``scaler = GradScaler(...)`` line
with them: only where the cell's facts show every use of the scaler is one of those, in this
cell. Anything else (the scaler made in an earlier cell, saved in a checkpoint, handed to a
helper, float16 named in the cell) declines, saying where to act.
"""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.parse import FactNode
from gpu_notebook.cell.scaler import precision, scaler_uses, scalers_made
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    facts_of,
    nodes_of,
    removed,
    replace_nodes,
)
from gpu_notebook.fixes.records import Fix


def drop_grad_scaler(module: cst.Module) -> CodemodResult:
    tree = facts_of(module).tree
    if tree is None:
        return Declined("the cell does not parse")
    kind = precision(tree)
    if kind in ("float16", "unknown"):
        return Declined(
            "the cell names float16 or an autocast whose dtype is not bfloat16: float16 "
            "gradients can underflow, keep the scaler"
            if kind == "float16"
            else "the autocast's dtype or device is not a literal: keep the scaler unless it is "
            "bfloat16"
        )
    made = scalers_made(tree)
    if not made:
        return Declined(
            "this cell makes no GradScaler: remove it where it is made, and replace "
            "scaler.scale(loss).backward() / scaler.step(opt) / scaler.update() where the loop is"
        )
    edits: dict[FactNode, Replacement] = {}  # the facts' nodes, resolved below
    for name, call in made:
        line = tree.line_of(call)
        if name is None:
            return Declined(
                f"the GradScaler of line {line} is not assigned to a name: remove it by hand"
            )
        uses = scaler_uses(tree, name)
        other = next((u for u in uses if u.kind == "other"), None)
        if other is not None:
            return Declined(
                f"{name} is used on line {other.line} beyond scale/step/update "
                "(saved, handed on or rebound): remove the scaler there by hand first"
            )
        holder = tree.parent.get(call)
        assert holder is not None  # scalers_made named it: ``name = GradScaler(...)``
        edits[holder] = removed
        for use in uses:
            edits[use.node] = removed if use.kind in ("update", "unscale") else (
                _unscaled_backward if use.kind == "scale-backward" else _optimizer_step
            )  # fmt: skip
    keys = list(edits)
    nodes = nodes_of(module, keys)
    if len(nodes) != len(keys):
        return Declined("the scaler's calls could not be located in the cell's text")
    patched = replace_nodes(module, dict(zip(nodes, edits.values(), strict=True)))
    return Edited(patched, ", ".join(n for n, _ in made if n is not None))


DROP_GRAD_SCALER = Fix(
    "drop_grad_scaler",
    "Drop the GradScaler",
    (
        "bfloat16 and float32 gradients do not underflow: loss scaling is for float16 only.",
        "Without the scaler each step skips its inf/nan check, unscale and (on a GPU) sync.",
    ),
    "https://pytorch.org/docs/stable/amp.html#gradient-scaling",
    drop_grad_scaler,
)


def _unscaled_backward(updated: cst.Call) -> cst.Call:
    """``scaler.scale(loss).backward(...)`` -> ``loss.backward(...)``."""
    func = updated.func
    assert isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)
    return updated.with_changes(func=func.with_changes(value=func.value.args[0].value))


def _optimizer_step(updated: cst.Call) -> cst.Call:
    """``scaler.step(opt)`` -> ``opt.step()``."""
    func = updated.func
    assert isinstance(func, cst.Attribute)
    return updated.with_changes(func=func.with_changes(value=updated.args[0].value), args=[])
