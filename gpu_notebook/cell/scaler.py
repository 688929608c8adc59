"""A GradScaler in the cell: where it is made, how the cell uses it, and the precision its
autocast runs in (the rule ``precision.scaler_unneeded`` and the ``drop_grad_scaler`` fix read
the same facts).

bfloat16 has float32's exponent range: its gradients do not underflow, so a scaler is only for
float16 (torch.amp docs). float16 is read where the cell names it (``torch.float16``,
``torch.half``, ``.half()``) or where an autocast takes its default dtype on CUDA
(``torch.cuda.amp.autocast()``, ``torch.autocast("cuda")``); an autocast whose dtype or device
is not a literal leaves it unknown.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpu_notebook.cell.names import dotted, keyword_of, literal_of, method_of, receiver_of
from gpu_notebook.cell.words import last

if TYPE_CHECKING:
    from gpu_notebook.cell.tree import CellTree

Precision = Literal["float16", "unknown", "bfloat16", "float32"]
UseKind = Literal["scale-backward", "step", "update", "unscale", "other"]


@dataclass(frozen=True)
class ScalerUse:
    kind: UseKind
    line: int
    node: ast.AST  # the .backward() call, the step call, or the update/unscale_ statement


def precision(tree: CellTree) -> Precision:
    """The reduced precision the cell's autocast runs in: float32 where it has none."""
    for node in ast.walk(tree.tree):
        if isinstance(node, ast.Attribute) and node.attr in ("float16", "half"):
            return "float16"  # torch.float16, torch.half, model.half()
    seen: set[Precision] = set()
    for call in tree.calls():
        if last(dotted(call.func) or "") == "autocast":
            seen.add(_autocast_dtype(call))
    order: tuple[Precision, ...] = ("float16", "unknown", "bfloat16")
    return next((kind for kind in order if kind in seen), "float32")


def _autocast_dtype(call: ast.Call) -> Precision:
    dtype = keyword_of(call, "dtype")
    if dtype is not None:
        named: dict[str, Precision] = {
            "bfloat16": "bfloat16",
            "float16": "float16",
            "half": "float16",
        }
        return named.get(last(dotted(dtype.value) or ""), "unknown")
    path = dotted(call.func) or ""
    if ".cuda." in f".{path}.":
        return "float16"  # torch.cuda.amp.autocast(): float16 by default
    if ".cpu." in f".{path}.":
        return "bfloat16"
    device = keyword_of(call, "device_type")
    node = device.value if device is not None else call.args[0] if call.args else None
    value = literal_of(node) if node is not None else None
    return "bfloat16" if value == "cpu" else "float16" if value == "cuda" else "unknown"


def cpu_float16_autocasts(tree: CellTree) -> list[ast.Call]:
    """The cell's autocasts that run a CPU's ops in float16: ``torch.autocast("cpu",
    dtype=torch.float16)``, ``torch.autocast(device_type="cpu", dtype=torch.half)``,
    ``torch.cpu.amp.autocast(dtype=torch.float16)`` (a GPU recipe moved onto a CPU, where
    float16 has no fast kernels for most ops: unseen round 18's GRU ran 4.8x slower than in
    float32). An autocast whose device or dtype is not a literal is not one of them."""
    out = []
    for call in tree.calls():
        path = dotted(call.func) or ""
        if last(path) != "autocast":
            continue
        dtype = keyword_of(call, "dtype")
        if dtype is None or last(dotted(dtype.value) or "") not in ("float16", "half"):
            continue
        device = keyword_of(call, "device_type")
        node = device.value if device is not None else call.args[0] if call.args else None
        on_cpu = ".cpu." in f".{path}." or (node is not None and literal_of(node) == "cpu")
        if on_cpu:
            out.append(call)
    return out


def float64_casts(tree: CellTree) -> list[ast.Call]:
    """The cell's calls that make or cast to float64: ``model.double()``, ``x.to(torch.float64)``,
    ``torch.tensor(..., dtype=torch.double)`` (where trained float64 parameters come from when
    the default dtype is float32: unseen round 19's numpy data and ``model.double()`` to match
    its dtype). ``torch.from_numpy`` of a float64 array is not seen: its dtype is the array's."""
    out = []
    for call in tree.calls():
        if not tree.in_cell(call):
            continue
        if method_of(call) == "double" and not call.args:
            out.append(call)
            continue
        dtype = keyword_of(call, "dtype")
        given = dtype.value if dtype is not None else None
        if given is None and method_of(call) == "to" and call.args:
            given = call.args[0]
        if given is not None and last(dotted(given) or "") in ("float64", "double"):
            out.append(call)
    return out


def scalers_made(tree: CellTree) -> list[tuple[str | None, ast.Call]]:
    """The cell's ``GradScaler(...)`` calls, each with the plain name it is assigned to (None:
    another place: an attribute, an argument)."""
    out: list[tuple[str | None, ast.Call]] = []
    for call in tree.calls():
        if last(dotted(call.func) or "") != "GradScaler":
            continue
        holder = tree.parent.get(call)
        name = None
        if isinstance(holder, ast.Assign) and len(holder.targets) == 1:
            target = holder.targets[0]
            name = target.id if isinstance(target, ast.Name) else None
        out.append((name, call))
    return out


def scaler_off(call: ast.Call) -> bool:
    """``GradScaler(enabled=False)``: it does nothing."""
    enabled = keyword_of(call, "enabled")
    return enabled is not None and literal_of(enabled.value) is False


def scaler_uses(tree: CellTree, name: str) -> list[ScalerUse]:
    """Every read of ``name``: the scaler's own calls where the fix knows their meaning, the rest
    ``other`` (``scaler.state_dict()``, a helper handed the scaler, a second binding)."""
    out: list[ScalerUse] = []
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.Name) or node.id != name:
            continue
        if isinstance(node.ctx, ast.Store):
            holder = tree.parent.get(node)
            value = holder.value if isinstance(holder, ast.Assign) else None
            if not (isinstance(value, ast.Call) and last(dotted(value.func) or "") == "GradScaler"):
                out.append(ScalerUse("other", tree.line_of(node), node))
            continue
        out.append(_use(tree, node))
    return out


def _use(tree: CellTree, name: ast.Name) -> ScalerUse:
    attr = tree.parent.get(name)
    call = tree.parent.get(attr) if isinstance(attr, ast.Attribute) else None
    if not isinstance(call, ast.Call) or call.func is not attr:
        return ScalerUse("other", tree.line_of(name), name)
    method, outer = method_of(call), tree.parent.get(call)
    if method == "scale" and len(call.args) == 1 and not call.keywords:
        backward = tree.parent.get(outer) if isinstance(outer, ast.Attribute) else None
        if (
            isinstance(backward, ast.Call)
            and method_of(backward) == "backward"
            and receiver_of(backward) is call
        ):
            return ScalerUse("scale-backward", tree.line_of(call), backward)
    statement = isinstance(outer, ast.Expr)
    if method == "step" and statement and len(call.args) == 1 and not call.keywords:
        return ScalerUse("step", tree.line_of(call), call)
    if isinstance(outer, ast.Expr) and method == "update" and not (call.args or call.keywords):
        return ScalerUse("update", tree.line_of(call), outer)
    if isinstance(outer, ast.Expr) and method == "unscale_":
        return ScalerUse("unscale", tree.line_of(call), outer)
    return ScalerUse("other", tree.line_of(call), call)
