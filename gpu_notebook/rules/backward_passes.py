"""Several backward passes a step over one graph: ``a.backward(retain_graph=True); b.backward()``.

Two losses on a shared trunk, each with its own backward, the first keeping the graph for the
second: the trunk's backward runs once per loss. Summing the losses and calling backward once
accumulates the same gradients (the sum's gradient is the sum of the gradients; only the order
of the float additions differs) and runs the trunk's backward once, without keeping the graph.
Found on the cell: consecutive ``.backward()`` statements in a step loop, every one but the last
with ``retain_graph=True`` and no other argument (a plain backward of a scalar loss), nothing
between them (no optimizer step, clipping or gradient read that would see the partial sum).

Bound: the backward phase's share times ``(n - 1) / n`` for ``n`` passes, Amdahl: the most the
single pass removes is every pass but one whole, when the heads are nothing beside the trunk (a
shared MLP trunk with two linear heads: 1.45x-1.60x by thread time, its bound by this 1.6x). No
low end: what the heads take is not in the trace as theirs. Levels: TraceML's (suggest 5%,
warn 10%, critical 20%) on the removable share.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.analysis.level_range import Level
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import is_backward, keyword_of, literal_of, method_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import found, gain_bound, level_of, share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement


@dataclass(frozen=True)
class RetainedBackwards(Said):
    line: int  # the first backward of the group
    text: str
    passes: int  # backward calls in the group
    losses: tuple[str, ...]  # their receivers, as written
    backward: float | None  # the backward phase's share of the step
    bound: float | None


def backward_groups(tree: CellTree) -> list[tuple[ast.Call, ...]]:
    """Runs of consecutive ``<loss>.backward(retain_graph=True)`` statements ending in a plain
    ``<loss>.backward()`` in the cell's step loops: what the rule reports and the fix joins."""
    groups: list[tuple[ast.Call, ...]] = []
    for loop in (loop for loop in tree.loops if id(loop) in tree.step_loops):
        for node in ast.walk(loop):
            for body in _bodies(node):
                groups.extend(_runs(body))
    seen: set[int] = set()
    unique = []
    for group in groups:
        if id(group[0]) not in seen:
            seen.add(id(group[0]))
            unique.append(group)
    return sorted(unique, key=lambda g: (g[0].lineno, g[0].col_offset))


def _bodies(node: ast.AST) -> list[list[ast.stmt]]:
    return [
        body
        for field in ("body", "orelse", "finalbody")
        if isinstance(body := getattr(node, field, None), list)
        and all(isinstance(s, ast.stmt) for s in body)
    ]


def _runs(body: list[ast.stmt]) -> list[tuple[ast.Call, ...]]:
    runs: list[tuple[ast.Call, ...]] = []
    current: list[ast.Call] = []
    for stmt in [*body, None]:
        call = _backward_statement(stmt)
        if call is not None and current and _retains(current[-1]):
            current.append(call)
            continue
        if len(current) >= 2 and _plain(current[-1], last=True):
            runs.append(tuple(current))
        current = [call] if call is not None and _retains(call) else []
    return runs


def _backward_statement(stmt: ast.stmt | None) -> ast.Call | None:
    """``<loss>.backward(...)`` as a statement of its own, the method form only."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    if not is_backward(call) or method_of(call) != "backward":
        return None
    return call


def _retains(call: ast.Call) -> bool:
    """``.backward(retain_graph=True)`` and nothing else."""
    kw = keyword_of(call, "retain_graph")
    return (
        not call.args
        and len(call.keywords) == 1
        and kw is not None
        and literal_of(kw.value) is True
    )


def _plain(call: ast.Call, *, last: bool) -> bool:
    """The group's last pass: ``.backward()``, or one that keeps the graph itself."""
    return (not call.args and not call.keywords) or (last and _retains(call))


def retained_backwards(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step runs backward once per loss over a graph they share."""
    if facts.tree is None:
        return None
    tree = facts.tree
    groups = [g for g in backward_groups(tree) if tree.in_cell(g[0])]  # not yet through calls
    if not groups:
        return None
    group = groups[0]
    n = len(group)
    backward = share(analysis, "backward")
    removable = backward * (n - 1) / n if backward is not None else None
    bound = gain_bound(removable, analysis)
    severity: Level | Severity | None = (
        level_of(analysis, removable) if removable is not None else "low"
    )
    if severity is None:
        return None
    first = facts.tree.source_line(group[0], "backward")
    losses = tuple(ast.unparse(c.func.value) for c in group if isinstance(c.func, ast.Attribute))
    said = RetainedBackwards(first.line, first.text, n, losses, backward, bound)
    return found("backward.retained", severity, said, phase_share=removable, bound=bound,
                 line=first.line, fix=FIX)  # fmt: skip


def one_backward(module: cst.Module) -> CodemodResult:
    """``a.backward(retain_graph=True)`` + ``b.backward()`` -> ``(a + b).backward()``: the
    groups the rule found (``backward_groups`` over the cell's facts), joined where they stand:
    the first call becomes the joined one, the later statements go."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        nodes_of,
        removed,
        replace_nodes,
        tree_of,
    )

    facts_tree = facts_of(module).tree
    parents = tree_of(module).parent
    edits: dict[cst.CSTNode, Replacement] = {}
    joined_groups = 0
    for group in backward_groups(facts_tree) if facts_tree is not None else []:
        calls = nodes_of(module, list(group))
        if len(calls) != len(group) or not all(
            isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) for c in calls
        ):
            continue
        lines = [parents.get(parents.get(c)) for c in calls[1:]]  # Call -> Expr -> the line
        statements = [line for line in lines if isinstance(line, cst.SimpleStatementLine)]
        if len(statements) != len(lines):
            continue
        losses = [module.code_for_node(c.func.value) for c in calls]
        terms = " + ".join(x if x.isidentifier() else f"({x})" for x in losses)
        keep = "retain_graph=True" if calls[-1].args else ""
        joined = cst.parse_expression(f"({terms}).backward({keep})")
        edits[calls[0]] = functools.partial(_joined, joined)
        for line in statements:
            edits[line] = removed
        joined_groups += 1
    if not edits:
        return Declined(
            "no .backward(retain_graph=True) followed by another .backward() in the step loop"
        )
    return Edited(replace_nodes(module, edits), f"{joined_groups} group(s) of backward passes")


def _joined(joined: cst.BaseExpression, _node: cst.CSTNode) -> cst.CSTNode:
    return joined


FIX = Fix(
    "one_backward",
    "One backward pass over the summed losses",
    (
        "Each loss's backward walks the graph they share again (retain_graph=True keeps it).",
        "(a + b).backward() accumulates the same gradients with one pass over the shared part.",
    ),
    "https://pytorch.org/docs/stable/notes/autograd.html",
    one_backward,
)
RULES = (retained_backwards,)
