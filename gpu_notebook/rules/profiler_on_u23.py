"""A framework's tracing profiler left on for the training run.

Lightning's ``Trainer(profiler="advanced")`` runs ``cProfile`` around each action of every step
(the batch, ``training_step``, ``backward``, ``optimizer_step``, each callback hook): every Python
call of the model's forward and the optimizer's loop is traced, and at the end of the fit the
stats of every action are sorted and printed. ``profiler="pytorch"`` (``PyTorchProfiler``)
records every operator of every step and exports them. Both are for a profiling session, not a
training run (Lightning's docs: "Profiling helps you find bottlenecks"; each one's overhead is
its own). ``profiler="simple"`` only times each action with a clock: not flagged. Unseen round
23 (lightning_profiler_advanced: a residual MLP of 12 small blocks): left on after a profiling
session; no finding named it.

Flagged where a call of the cell passes ``profiler="advanced"``/``"pytorch"`` (any case) or an
``AdvancedProfiler(...)``/``PyTorchProfiler(...)`` object (made in the call, or bound to a name
the call passes). Its cost is spread over every Python call of the step (and every operator for
the PyTorch one), not measured apart: no bound; severity medium, as for anomaly detection. Patch
``profiler_off``: ``profiler=None`` (Lightning's default).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted, keyword_of, literal_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import last
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

_TRACING = {"advanced": "cProfile", "pytorch": "torch.profiler"}
_CLASSES = {"AdvancedProfiler": "cProfile", "PyTorchProfiler": "torch.profiler"}


@dataclass(frozen=True)
class ProfilerOn(Said):
    """A call of the cell turns a framework's tracing profiler on for the fit (``line``)."""

    line: int
    text: str  # the keyword as written: ``profiler="advanced"``
    tracer: str  # what it runs on every step: "cProfile" or "torch.profiler"


def _tracer(value: ast.expr, made: dict[str, str]) -> str | None:
    """What the ``profiler=`` value runs, where it traces: a literal name, a profiler object
    made in place, or a name bound to one."""
    given = literal_of(value)
    if isinstance(given, str):
        return _TRACING.get(given.lower())
    if isinstance(value, ast.Call):
        return _CLASSES.get(last(dotted(value.func) or ""))
    if isinstance(value, ast.Name):
        return made.get(value.id)
    return None


def profiler_keywords(tree: CellTree) -> list[tuple[ast.Call, str]]:
    """The cell's calls that pass a tracing profiler: (the call, what it traces with)."""
    made: dict[str, str] = {}
    for node in ast.walk(tree.tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
        ):
            kind = _CLASSES.get(last(dotted(node.value.func) or ""))
            if kind is not None:
                made[node.targets[0].id] = kind
    out = []
    for call in tree.calls():
        given = keyword_of(call, "profiler")
        tracer = _tracer(given.value, made) if given is not None else None
        if tracer is not None and tree.in_cell(call):
            out.append((call, tracer))
    return out


def profiler_on(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The fit runs under a framework's tracing profiler."""
    tree = facts.tree
    hits = profiler_keywords(tree) if tree is not None else []
    if tree is None or not hits:
        return None
    call, tracer = hits[0]
    given = keyword_of(call, "profiler")
    said = ProfilerOn(tree.line_of(given.value), f"profiler={ast.unparse(given.value)}", tracer)
    return found("debug.profiler_on", "medium", said, line=said.line, fix=FIX)


def profiler_off(module: cst.Module) -> CodemodResult:
    """``profiler=...`` -> ``profiler=None`` on the calls the rule found."""
    from gpu_notebook.fixes.cst_tools import Declined, Edited, facts_of, nodes_of, replace_nodes

    tree = facts_of(module).tree
    calls = [call for call, _ in profiler_keywords(tree)] if tree is not None else []
    edits: dict[cst.CSTNode, Replacement] = {node: _off for node in nodes_of(module, calls)}
    if not edits:
        return Declined('no profiler="advanced"/"pytorch" to turn off')
    return Edited(replace_nodes(module, edits), f"{len(edits)} profiler(s) off")


def _off(updated: cst.Call) -> cst.Call:
    """The call with ``profiler=None``, its other arguments as they were."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    return set_keyword(updated, "profiler", cst.Name("None"))


FIX = Fix(
    "profiler_off",
    "Turn the framework's profiler off for the training run",
    (
        "A tracing profiler records every Python call (cProfile) or every operator of each step.",
        "profiler=None (the default) trains without that work; profile a short run apart.",
    ),
    "https://lightning.ai/docs/pytorch/stable/tuning/profiler_basic.html",
    profiler_off,
)
RULES = (profiler_on,)
