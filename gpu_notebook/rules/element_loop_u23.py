"""A Python loop over a batch's elements, each a tensor operation, in code the step runs.

A metric counted one sample at a time (``for i in range(len(y)): correct += int(preds[i] ==
y[i])``), a pair mask built element by element (``for i in range(n): for j in range(n): if
y[i] == y[j]: mask[i, j] = 1``), a per-sample weight looked up in a loop: each ``y[i]`` is a
tensor indexing, each ``==`` a tensor operation, each ``int()``/``if`` a read of its value, so the
step pays a few microseconds of Python and dispatch per element (n per step, n^2 for a pair
loop) where one operation over the batch (``(preds == y).sum()``, ``y[:, None] == y[None,
:]``) pays them once. Unseen round 23: supcon_python_mask (a 64x64 mask by a double loop in the
loss a step function calls, 67% of the sampled step on its line) and lightning_metric_pyloop
(an accuracy counted per sample in ``training_step``): neither named by a finding (the loop body
rule reads only the statements before the model or after the update).

Flagged where a ``for`` over ``range(...)`` subscripts a name by its loop variable (``y[i]``,
``mask[i, j]``) and that name is not one of the function's own lists, dicts or strings (bound to
a literal, a comprehension, ``list()``/``dict()``, ``.tolist()``, ``.split()``), and the body
works on single elements (reads one's value: ``int()``, ``.item()``, an ``if`` on it; or writes
one: ``mask[i, j] = 1``; a loop over time steps feeding ``x[t]`` to a cell does neither), in
code the
step runs every step: a step loop (not under its ``if step % N``), a function it runs through
its calls, or a framework's per-step method; and where the loop's lines can reach the lowest
level of the sampled step (a cheap loop over a few elements is not worth the change). The
range: the loop's lines' sampled share (Wilson's interval, 95%), less what one batched
operation still costs (``KEPT``). No patch: the batched form depends on what the loop computes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.restacked_bank import _share_high
from gpu_notebook.rules.syncs import lines_share

# The share of the loop's time one batched operation still takes: (least, most).
KEPT = (0.0, 0.10)
_CONTAINERS = frozenset({"list", "dict", "tuple", "str", "set", "sorted", "enumerate", "zip"})
_TO_PYTHON = frozenset({"tolist", "split", "keys", "values", "items", "splitlines"})


@dataclass(frozen=True)
class ElementLoop(Said):
    """The step loops over ``names``' elements in Python on ``line`` (``lines``: the loop's
    first and last line)."""

    line: int
    text: str
    names: tuple[str, ...]
    lines: tuple[int, int]
    share: float | None
    low: float | None
    bound: float | None


def _python_value(value: ast.expr) -> bool:
    """A value that is a Python container or string, not a tensor."""
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.Tuple, ast.ListComp, ast.DictComp,
                          ast.SetComp, ast.JoinedStr)):  # fmt: skip
        return True
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (str, bytes))
    if isinstance(value, ast.Call):
        name = dotted(value.func) or ""
        if name in _CONTAINERS:
            return True
        return isinstance(value.func, ast.Attribute) and value.func.attr in _TO_PYTHON
    return False


def _python_names(scope: ast.AST) -> set[str]:
    """Names ``scope`` binds to a Python container or string anywhere."""
    out: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and _python_value(node.value):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def _indexed(loop: ast.For, var: str, python: set[str]) -> list[str]:
    """The names the loop's body subscripts by ``var`` (``y[i]``, ``m[i, j]``, ``x[i][0]``)."""
    out: list[str] = []
    for node in ast.walk(loop):
        if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
            continue
        uses = any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(node.slice))
        if uses and node.value.id not in python and node.value.id not in out:
            out.append(node.value.id)
    return out


def _uses(node: ast.AST, var: str) -> bool:
    """A subscript by ``var`` under ``node``."""
    return any(
        isinstance(n, ast.Subscript)
        and any(isinstance(m, ast.Name) and m.id == var for m in ast.walk(n.slice))
        for n in ast.walk(node)
    )


def _scalar_work(loop: ast.For, var: str) -> bool:
    """The body works on single elements: it reads one's value (``int(y[i] == p[i])``,
    ``y[i].item()``, ``if y[i] == y[j]:``) or writes one (``mask[i, j] = 1.0``). A loop over
    time steps that feeds slices to a cell (``h = cell(x[t], h)``) does neither."""
    for node in ast.walk(loop):
        if (
            isinstance(node, ast.Call)
            and (
                dotted(node.func) in ("int", "float", "bool")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "item")
            )
            and _uses(node, var)
        ):
            return True
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and _uses(node.test, var):
            return True
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AugAssign) else [])
        )
        if any(isinstance(t, ast.Subscript) and _uses(t, var) for t in targets):
            return True
    return False


def _range_var(loop: ast.AST) -> str | None:
    if (
        isinstance(loop, ast.For)
        and isinstance(loop.target, ast.Name)
        and isinstance(loop.iter, ast.Call)
        and dotted(loop.iter.func) == "range"
    ):
        return loop.target.id
    return None


def _root(tree: CellTree, fn: Function, framework: set[int]) -> bool:
    """A function the step runs every step: a step function, a framework's per-step method, or
    one the step loop calls (cell.step_calls)."""
    if id(fn) in framework or not fn.body:
        return id(fn) in framework
    return tree.step_loop_of(fn.body[0]) is not None or tree.run_by_step(fn.body[0]) is not None


def _per_step_functions(tree: CellTree, framework: set[int]) -> set[int]:
    """The functions run every step: the roots and, through their calls by name (not under an
    ``if``), the cell's functions they call (a loss a step function calls), transitively."""
    fns = [n for n in ast.walk(tree.tree) if isinstance(n, Function)]
    by_name: dict[str, Function] = {}
    for fn in fns:
        by_name.setdefault(fn.name, fn)
    todo = [fn for fn in fns if _root(tree, fn, framework)]
    reached = {id(fn) for fn in todo}
    while todo:
        fn = todo.pop()
        for call in ast.walk(fn):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            callee = by_name.get(call.func.id)
            if callee is not None and id(callee) not in reached and not tree.gated(call, fn):
                reached.add(id(callee))
                todo.append(callee)
    return reached


def _per_step(tree: CellTree, node: ast.AST, functions: set[int]) -> bool:
    loop = tree.step_loop_of(node)
    if loop is not None and tree.inside(node, loop):
        return not tree.gated(node, loop)
    holder = tree.nearest(node, Function)
    return isinstance(holder, Function) and id(holder) in functions


def element_loops(tree: CellTree) -> list[tuple[ast.For, tuple[str, ...]]]:
    """The step's outermost Python loops over tensor elements: (the loop, the names indexed)."""
    framework = {id(fn) for fn in per_step_methods(tree)}
    functions = _per_step_functions(tree, framework)
    out: list[tuple[ast.For, tuple[str, ...]]] = []
    taken: list[ast.For] = []
    for node in ast.walk(tree.tree):
        var = _range_var(node)
        if var is None or not isinstance(node, ast.For) or not tree.in_cell(node):
            continue
        if id(node) in tree.step_loops or any(tree.inside(node, t) for t in taken):
            continue
        scope = tree.nearest(node, Function) or tree.tree
        names = _indexed(node, var, _python_names(scope))
        if names and _scalar_work(node, var) and _per_step(tree, node, functions):
            out.append((node, tuple(names)))
            taken.append(node)
    out.sort(key=lambda hit: tree.line_of(hit[0]))
    return out


def element_loop(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step runs a Python loop over a batch's elements, a tensor operation each."""
    tree = facts.tree
    hits = element_loops(tree) if tree is not None else []
    samples = analysis.stacks.samples if analysis.stacks is not None else 0
    if tree is None or not hits or not samples:
        return None
    best: tuple[float, ast.For, tuple[str, ...]] | None = None
    for loop, names in hits:
        first, last_line = (
            tree.line_of(loop),
            tree.line_of(loop) + ((loop.end_lineno or loop.lineno) - loop.lineno),
        )
        lines = tuple(SourceLine(n, "", "element_loop") for n in range(first, last_line + 1))
        share = lines_share(analysis, lines)
        if share is not None and (best is None or share > best[0]):
            best = (share, loop, names)
    # A loop over a few elements costs little: said only where it can reach the lowest level.
    if best is None or severity_of(_share_high(best[0], samples)) is None:
        return None
    share, loop, names = best
    line = tree.line_of(loop)
    end = line + (loop.end_lineno or loop.lineno) - loop.lineno
    low, bound = gain_range(
        sampled_share_low(share, samples) * (1 - KEPT[1]),
        _share_high(share, samples) * (1 - KEPT[0]),
        analysis,
    )
    said = ElementLoop(line, tree.text_of(loop), names, (line, end), share, low, bound)
    severity = severity_of(share, low=0.0) or "low"
    return found("host.element_loop", severity, said, phase_share=share, bound=bound, low=low,
                 line=line)  # fmt: skip


RULES = (element_loop,)
