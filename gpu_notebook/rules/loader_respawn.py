"""The fix of ``input.remade_loader`` (rules/input_pipeline.py): a DataLoader with workers built
anew every epoch, moved above the epoch loop with ``persistent_workers=True``.

``for epoch in ...: loader = DataLoader(ds, ..., num_workers=2)`` makes a new loader, and so new
worker processes, each epoch; ``persistent_workers=True`` keeps a loader's workers across its
iterators only when the same loader is iterated again, so the assignment has to move too. Moved
where no argument reads a name the loop binds (``DataLoader(parts[epoch])`` stays, and the
finding says where to act). Unseen round 9's workers_respawn (25 epochs of 20 steps, wall-time
stalls 84% of the run at load 15): the patch measured 2.27x (1.07x-4.21x), verified.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import LoaderCall
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement


@dataclass(frozen=True)
class _Built:
    call: LoaderCall
    statement: ast.Assign
    loop: ast.For | ast.AsyncFor | ast.While
    movable: bool


def rebuilt_loaders(tree: CellTree, loaders: tuple[LoaderCall, ...]) -> list[_Built]:
    """``name = DataLoader(...)`` statements directly in the body of a loop around a step loop,
    persistent_workers not on: what the rule reports and the fix moves."""
    out = []
    steps = [loop for loop in tree.loops if id(loop) in tree.step_loops]
    for call in loaders:
        if call.node is None or call.persistent_workers is True:
            continue
        statement = tree.statement_of(call.node)
        loop = tree.enclosing_loop(call.node)
        if not isinstance(statement, ast.Assign) or statement.value is not call.node:
            continue
        if loop is None or id(loop) in tree.step_loops or statement not in loop.body:
            continue
        if not any(tree.inside(step, loop) for step in steps):
            continue
        bound = {
            n.id
            for part in (getattr(loop, "target", None), *loop.body)
            if part is not None
            for n in ast.walk(part)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        read = {n.id for n in ast.walk(call.node) if isinstance(n, ast.Name)}
        out.append(_Built(call, statement, loop, not read & bound))
    return out


def persistent_loader(module: cst.Module) -> CodemodResult:
    """The loader built in the epoch loop moves above it, with persistent_workers=True: one
    loader, its workers started once and kept across epochs."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        nodes_of,
        removed,
        replace_nodes,
        set_keyword,
        tree_of,
    )

    facts = facts_of(module)
    tree = facts.tree
    movable = [b for b in rebuilt_loaders(tree, facts.loaders) if b.movable] if tree else []
    parents = tree_of(module).parent
    edits: dict[cst.CSTNode, Replacement] = {}
    moved: dict[cst.CSTNode, list[cst.BaseStatement]] = {}
    for b in movable:
        call, loop = nodes_of(module, [b.call.node, b.loop])
        line = parents.get(parents.get(call))  # Call -> Assign -> the line
        if not isinstance(call, cst.Call) or not isinstance(line, cst.SimpleStatementLine):
            continue
        if not isinstance(loop, (cst.For, cst.While)):
            continue
        kept = set_keyword(call, "persistent_workers", cst.Name("True"))
        hoisted = line.deep_replace(call, kept)
        assert isinstance(hoisted, cst.SimpleStatementLine)
        moved.setdefault(loop, []).append(hoisted)
        edits[line] = removed
    for loop, lines in moved.items():
        edits[loop] = _preceded_by(lines)
    if not moved:
        return Declined("no DataLoader built in the epoch loop from names the loop does not bind")
    return Edited(replace_nodes(module, edits), "built once, persistent_workers=True")


def _preceded_by(lines: list[cst.BaseStatement]) -> Replacement:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import put_before

    def apply(loop: cst.BaseStatement) -> cst.FlattenSentinel[cst.BaseStatement]:
        out: list[cst.BaseStatement] = [loop]
        for line in reversed(lines):
            out = [*put_before(line, out[0]), *out[1:]]
        return cst.FlattenSentinel(out)

    return apply


FIX = Fix(
    "persistent_loader",
    "Build the DataLoader once, with persistent workers",
    (
        "A DataLoader made inside the epoch loop starts its worker processes again every epoch.",
        "Made once above the loop with persistent_workers=True, its workers start once and stay.",
    ),
    "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
    persistent_loader,
)
# No check of its own: input.remade_loader finds the loader and the run's stalls, and passes
# this fix where ``rebuilt_loaders`` says the loader can move. A family module (``RULES``) so
# rules.RULE_FIXES finds the fix.
RULES = ()
