"""A thread of this program on a core beside the loop: the loop's wait is its own, not the machine's.

Trigger: ``Analysis.side_threads`` (analysis/own_threads_spin.py): a Python thread of the process,
not the loop's, not the libraries' machinery, on a core at a quarter of the loop thread's rate
or more over the steps. Such a thread holds a core and the GIL the loop waits for between its
operators: transformers' ``TrainerMemoryTracker.peak_monitor_func`` (``TrainingArguments(...,
skip_memory_metrics=False)``: ``while True`` over the RSS with no sleep for all of ``train()``,
2.31x of train()'s wall time by hand, benchmarks/README unseen round 22), a user's
``threading.Thread`` that polls in ``while running:`` with no sleep, a busy-wait heartbeat.
Bound: ``SideThreads.bound`` (each step its own time on a core and the other processes' part of
its wait). Fix: for the memory tracker, ``skip_memory_metrics=True`` on the cell's
``TrainingArguments(...)`` (the default; a patch); for a thread of the user's, a sleep or a
blocking wait in its loop, at the line it was found at (advice, no patch: what the thread waits
for is the user's).
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
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity, SideThread, SideThreads
from gpu_notebook.rules.common import found

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

TRACKER = "TrainerMemoryTracker.peak_monitor_func"  # transformers/trainer_utils.py
KEYWORD = "skip_memory_metrics"


@dataclass(frozen=True)
class SpinningThread(Said):
    thread: SideThread  # the busiest
    side: SideThreads
    # The cell's line the thread stood at (its own function is the cell's), or the line of the
    # cell's ``skip_memory_metrics=False`` (the memory tracker); None: neither in the cell.
    line: int | None
    text: str  # that line's text ("" where None)
    tracker: bool  # transformers' memory tracker


def tracker_keywords(tree: CellTree) -> list[ast.Call]:
    """The cell's ``TrainingArguments(...)`` calls (any ``...TrainingArguments``) that pass
    ``skip_memory_metrics=False``: what the rule names and the fix edits (the same nodes)."""
    out = []
    for call in tree.calls():
        given = keyword_of(call, KEYWORD)
        if (
            given is not None
            and (last(dotted(call.func) or "")).endswith("TrainingArguments")
            and literal_of(given.value) is False
            and tree.in_cell(call)
        ):
            out.append(call)
    return out


def spinning_thread(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    side = analysis.side_threads
    if side is None or not side.threads:
        return None
    thread = side.threads[0]
    tracker = thread.function.endswith(TRACKER) or (
        thread.function.endswith("peak_monitor_func") and "transformers" in thread.file
    )
    tree = facts.tree
    line: int | None = None
    text = ""
    fix: Fix | None = None
    if tree is not None and tracker:
        calls = tracker_keywords(tree)
        if calls:
            given = keyword_of(calls[0], KEYWORD)
            line, text, fix = tree.line_of(given), tree.text_of(given), FIX
    elif tree is not None:
        node = _own_line(tree, thread.function, thread.line - run.first_line + 1)
        if node is not None:
            line, text = tree.line_of(node), tree.text_of(node)
    bound = side.bound
    severity: Severity = (
        "high" if bound is not None and bound >= 1.5
        else "medium" if bound is not None and bound >= 1.2
        else "low"
    )  # fmt: skip
    said = SpinningThread(thread, side, line, text, tracker)
    return found("host.spinning_thread", severity, said, bound=bound, line=line, fix=fix)


def _own_line(tree: CellTree, function: str, line: int) -> ast.stmt | None:
    """The statement at ``line`` of the cell's text (the thread's compiled line less the lines
    before the cell's first, ``Run.first_line``: the ``%%gpucheck`` line) in the cell's own
    ``def`` of ``function``; None: the function is not the cell's."""
    name = function.rsplit(".", 1)[-1]
    for node in ast.walk(tree.tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == name
            and node.lineno <= line <= (node.end_lineno or node.lineno)
            and tree.in_cell(node)
        ):
            inner = [
                s for s in ast.walk(node)
                if isinstance(s, ast.stmt) and s is not node and s.lineno == line
            ]  # fmt: skip
            return inner[0] if inner else None
    return None


def memory_metrics_off(module: cst.Module) -> CodemodResult:
    """``TrainingArguments(..., skip_memory_metrics=False)`` -> ``skip_memory_metrics=True`` (the
    default: no memory tracker thread), the calls the rule found, edited where they stand."""
    from gpu_notebook.fixes.cst_tools import Declined, Edited, facts_of, nodes_of, replace_nodes

    tree = facts_of(module).tree
    edits: dict[cst.CSTNode, Replacement] = {
        node: _skipped for node in nodes_of(module, tracker_keywords(tree) if tree else [])
    }
    if not edits:
        return Declined("no TrainingArguments(..., skip_memory_metrics=False) to turn off")
    return Edited(replace_nodes(module, edits), f"{len(edits)} TrainingArguments call(s) edited")


def _skipped(updated: cst.Call) -> cst.Call:
    """The call with ``skip_memory_metrics=True``, its other arguments as they were."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    return set_keyword(updated, KEYWORD, cst.Name("True"))


FIX = Fix(
    "memory_metrics_off",
    "Skip the Trainer's memory metrics",
    (
        "skip_memory_metrics=False runs a thread that reads the process's memory in a loop "
        "with no sleep for all of train(), beside the training loop.",
        "skip_memory_metrics=True (the default) trains without it; read the peak once after "
        "training if it is needed (resource.getrusage(...).ru_maxrss).",
    ),
    "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments.skip_memory_metrics",
    memory_metrics_off,
)
RULES = (spinning_thread,)
