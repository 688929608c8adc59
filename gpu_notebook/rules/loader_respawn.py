"""A DataLoader with worker processes built anew every epoch: each epoch starts its workers again.

The rule, its level, its message record and its fix, in one place (as ``rules/host_tensors.py``):
its wording in ``words/loader_respawn.py``.

``for epoch in ...: loader = DataLoader(ds, ..., num_workers=2)`` makes a new loader, and so new
worker processes, each epoch; ``persistent_workers=True`` keeps a loader's workers across its
iterators only when the same loader is iterated again. The first batch of each epoch waits for
the workers to start and fill their queues: the run stalls every epoch, in the data wait
(unseen round 9: 25 epochs of 20 steps, "stalls every 20 steps: 63% of the run's time", and the
input rule said the workers barely ran on a busy machine).

Found: a ``DataLoader(...)`` assigned in a loop that holds the step loop, with workers (a
literal, or the count its iterator ran with) and persistent_workers not on; measured: stalls
over the run whose extra time is mostly data wait (``run_shape``'s stall pattern). Bound: Amdahl
over the stalls' share, by wall time where it is larger than by own time (the workers start once,
not every epoch; their start waits for cores on a busy machine); level by that share with the
stall rule's lines. Fix: the assignment moves above the epoch loop with persistent_workers=True,
where no argument reads a name the loop binds.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import LoaderCall, SourceFacts
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said, StallPattern
from gpu_notebook.rules.common import found, gain_bound, severity_of

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

STALL_SHARE = 0.02  # rules/run_shape.py's line for stalls worth a word
MOSTLY = 0.5  # of the stalls' extra time in the data wait


@dataclass(frozen=True)
class RespawnedWorkers(Said):
    line: int  # the DataLoader call
    text: str
    epoch_line: int  # the loop that builds it again
    workers: int
    stalls: StallPattern
    bound: float | None
    movable: bool  # no argument reads a name the epoch loop binds


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


def respawned_workers(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The loop's loader starts its workers again every epoch, and the run stalls in its data wait."""
    if facts.tree is None:
        return None
    built = rebuilt_loaders(facts.tree, facts.loaders)
    if not built:
        return None
    first = built[0]
    workers = first.call.num_workers
    if workers is None:
        workers = run.steps.loader_num_workers
    if not workers:
        return None
    shape = analysis.shape
    if shape is None:
        return None
    # The stalls by wall time and by own time (each step less its wait for a core): the
    # workers' start is itself slowed by the machine's load (the processes wait for cores while
    # the loop sleeps on their queue), and a run measured by wall time gains what the wall
    # stalls took (own time 42%: "up to 1.74x", measured 2.27x at load 15; wall time 84%).
    read = [
        p
        for p in (shape.stalls, shape.own.stalls if shape.own is not None else None)
        if p is not None
        and p.share >= STALL_SHARE
        and p.phase == "data"
        and (p.phase_share or 0.0) >= MOSTLY
    ]
    if not read:
        return None
    stalls = max(read, key=lambda p: p.share)
    bound = gain_bound(stalls.share, analysis)
    severity = severity_of(stalls.share, low=STALL_SHARE) or "low"
    line = facts.tree.source_line(first.statement, "loader")
    said = RespawnedWorkers(line.line, line.text, facts.tree.line_of(first.loop), workers, stalls,
                            bound, first.movable)  # fmt: skip
    return found("input.respawned_workers", severity, said, phase_share=stalls.share, bound=bound,
                 line=line.line, fix=FIX if first.movable else None)  # fmt: skip


def persistent_loader(module: cst.Module) -> CodemodResult:
    """The loader built in the epoch loop moves above it, with persistent_workers=True: one
    loader, its workers started once and kept across epochs."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        nodes_of,
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
        edits[line] = _removed
    for loop, lines in moved.items():
        edits[loop] = _preceded_by(lines)
    if not moved:
        return Declined("no DataLoader built in the epoch loop from names the loop does not bind")
    return Edited(replace_nodes(module, edits), "built once, persistent_workers=True")


def _removed(_node: cst.CSTNode) -> cst.RemovalSentinel:
    import libcst as cst

    return cst.RemovalSentinel.REMOVE


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
RULES = (respawned_workers,)
