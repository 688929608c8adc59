"""Codemods for memory that grows step after step: tensors kept with their autograd graphs.

``history.append(loss)`` in a training loop keeps every step's loss *and the graph behind it*
(the saved activations until backward frees them, and the graph's nodes after): memory grows by
the same amount each step. ``loss.detach()`` keeps the value on the device without the graph
(no host sync, unlike ``.item()``, which would wait for the GPU on every step).
"""

from __future__ import annotations

import libcst as cst

from gpu_notebook.cell.blocks import kept_graph_calls
from gpu_notebook.cell.names import dotted
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    facts_of,
    nodes_of,
    replace_nodes,
    training_loops,
)


def detach_kept_tensors(module: cst.Module, *, names: str = "") -> CodemodResult:
    """Store ``NAME.detach()`` where the loop stores a tensor that carries its graph: the calls
    the memory rule found (``cell/blocks.kept_graph_calls``), edited where they stand.

    ``names``: comma-separated names to treat as such tensors (default: the names the loop
    calls ``.backward()`` on, and the outputs of the model).
    """
    if not training_loops(module):
        return Declined("no training loop (a for loop that calls .backward()) in this cell")
    wanted = frozenset(n.strip() for n in names.split(",") if n.strip())
    facts = facts_of(module)
    assert facts.tree is not None  # it has a training loop: it parsed
    found = kept_graph_calls(facts.tree.tree, facts.model_names, wanted)
    edits: dict[cst.CSTNode, Replacement] = {}
    stored: list[str] = []
    for call in nodes_of(module, found):
        arg = call.args[-1]
        stored.append(dotted(arg.value) or "")
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
