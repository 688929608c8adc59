"""Codemods for memory that grows step after step: tensors kept with their autograd graphs.

``history.append(loss)`` in a training loop keeps every step's loss *and the graph behind it*
(the saved activations until backward frees them, and the graph's nodes after): memory grows by
the same amount each step. ``loss.detach()`` keeps the value on the device without the graph
(no host sync, unlike ``.item()``, which would wait for the GPU on every step).
"""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.names import dotted, method_of
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    loss_names,
    replace_nodes,
    training_loops,
    walk,
)

# Methods that store their argument in a container that outlives the step.
KEEPING_METHODS = frozenset({"append", "extend", "add", "insert", "put", "appendleft"})


def kept_graphs(loop: cst.CSTNode, names: set[str]) -> list[cst.Call]:
    """``x.append(NAME)`` calls in ``loop`` whose stored argument is one of ``names`` as is."""
    found = []
    for node in walk(loop):
        if (
            not isinstance(node, cst.Call)
            or method_of(node) not in KEEPING_METHODS
            or not node.args
        ):
            continue
        if dotted(node.args[-1].value) in names:
            found.append(node)
    return found


def detach_kept_tensors(module: cst.Module, *, names: str = "") -> CodemodResult:
    """Store ``NAME.detach()`` where the loop stores a tensor that carries its graph.

    ``names``: comma-separated names to treat as such tensors (default: the names the loop
    calls ``.backward()`` on).
    """
    loops = training_loops(module)
    if not loops:
        return Declined("no training loop (a for loop that calls .backward()) in this cell")
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    edits: dict[cst.CSTNode, Replacement] = {}
    stored: list[str] = []
    for loop in loops:
        for call in kept_graphs(loop.body, wanted or loss_names(loop.body)):
            arg = call.args[-1]
            name = dotted(arg.value) or ""
            stored.append(name)
            detached = cst.Call(func=cst.Attribute(value=arg.value, attr=cst.Name("detach")))
            edits[arg] = _with_value(detached)
    if not edits:
        return Declined(
            "the loop does not store a tensor with its graph (e.g. history.append(loss))"
        )
    return Edited(
        replace_nodes(module, edits), ", ".join(f"{n}.detach()" for n in sorted(set(stored)))
    )


def _with_value(value: cst.BaseExpression) -> Replacement:
    def edit(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.Arg)
        return node.with_changes(value=value)

    return edit
