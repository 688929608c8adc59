"""Autograd's anomaly detection left on while the loop trains: a debugging API on every step.

Level: PyTorch performance tuning guide, "Disable debugging APIs": anomaly detection
(``torch.autograd.detect_anomaly``, ``torch.autograd.set_detect_anomaly(True)``) records a
traceback with every forward operation and checks every backward output for NaN; it is for
finding a bad gradient, never for a training run. Flagged when it is on for the step loop: set
by a statement of the cell, or a ``with`` inside the loop or around it; or read on (torch's
flag, in the timed steps' backward calls: ``StepClockRecord.anomaly_backwards``) where no line of
the cell sets it, as an earlier cell's switch or helper does: then no fix, the card says where
it was set. A framework's keyword that turns it on for the steps it runs (Lightning's
``Trainer(detect_anomaly=True)``, a trainer function of the user's taking ``detect_anomaly=True``)
is the line to act on, where the clock read it on in the steps (or, with no backward read, it is
a Trainer the cell makes): the fix passes ``False``. Its cost is spread over
the model's own operators and not measured apart, so the finding gives no bound; severity
medium (the guide lists it among the flags to turn off, with no level).
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


@dataclass(frozen=True)
class AnomalyOn(Said):
    line: int  # the first call that turns it on for the training steps
    text: str
    keyword: bool = False  # turned on by a call's ``detect_anomaly=True`` (Lightning's Trainer)


@dataclass(frozen=True)
class AnomalyOnOutside(Said):
    """On while the loop ran, and no line of this cell turns it on: set by an earlier cell
    (a global switch, or a helper's ``with``), read live in the timed steps' backward calls."""

    backwards_on: int  # backward calls of the timed steps that found it on
    backwards_read: int  # ... of those read
    caller: str | None  # the function that called the first of them (None: the cell's top level)
    # A switch of this cell's own that the source does not put on the steps (around a call of
    # a function that loops, say): its line, the place to act (None: the cell has none).
    cell_line: int | None = None


_GUIDE_URL = (
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#disable-debugging-apis"
)


def _turns_on(call: ast.Call) -> bool:
    """``detect_anomaly(...)``, or ``set_detect_anomaly`` with ``True`` (positional or mode=)."""
    name = last(dotted(call.func) or "")
    if name == "detect_anomaly":
        return True
    if name != "set_detect_anomaly":
        return False
    mode = keyword_of(call, "mode")
    node = mode.value if mode is not None else call.args[0] if call.args else None
    return node is not None and literal_of(node) is True


def anomaly_calls(tree: CellTree) -> list[ast.Call]:
    """The calls that turn anomaly detection on for a step loop: what the rule reports and the
    fix edits (the same nodes)."""
    if not tree.step_loops:
        return []
    return [call for call in tree.calls() if _turns_on(call) and _reaches_a_step(tree, call)]


def _keyword_on(call: ast.Call) -> bool:
    """A call that takes ``detect_anomaly=True``: Lightning's ``Trainer`` runs its fit inside
    ``set_detect_anomaly(True)``; a user's trainer function passes it on the same way."""
    given = keyword_of(call, "detect_anomaly")
    return given is not None and literal_of(given.value) is True


def anomaly_keywords(tree: CellTree) -> list[ast.Call]:
    """The cell's calls that take ``detect_anomaly=True``: what the rule reports (where the run
    confirms it) and the fix edits."""
    return [call for call in tree.calls() if _keyword_on(call) and tree.in_cell(call)]


def _reaches_a_step(tree: CellTree, call: ast.Call) -> bool:
    """A statement of its own (a global switch), or a ``with`` inside a step loop or around one."""
    holder = tree.parent.get(call)
    if isinstance(holder, ast.Expr):
        return True
    block = tree.parent.get(holder) if isinstance(holder, ast.withitem) else None
    return block is not None and (
        tree.step_loop_of(call) is not None
        or any(id(lp) in tree.step_loops and tree.inside(lp, block) for lp in tree.loops)
    )


def anomaly_detection(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop runs with autograd's anomaly detection on."""
    hits = (
        [
            facts.tree.source_line(c, "anomaly")
            for c in anomaly_calls(facts.tree)
            if facts.tree.in_cell(c)
        ]
        if facts.tree is not None
        else []
    )
    if not hits:
        return _by_keyword(run, facts) or _on_outside(run, facts)
    said = AnomalyOn(hits[0].line, hits[0].text)
    return found("debug.anomaly_detection", "medium", said, line=said.line, fix=FIX)


def _on_in_steps(run: Run) -> bool:
    """The clock found it on in at least half of the timed steps' backward calls."""
    on, read = run.steps.anomaly_backwards or 0, run.steps.anomaly_backward_reads
    return bool(on) and 2 * on >= read


def _by_keyword(run: Run, facts: SourceFacts) -> Finding | None:
    """A call of the cell passes ``detect_anomaly=True`` and the steps ran with it on (or, where
    no backward was read, the call is a Trainer the cell makes): that keyword is the switch."""
    tree = facts.tree
    calls = anomaly_keywords(tree) if tree is not None else []
    read = run.steps.anomaly_backward_reads
    calls = [
        c for c in calls
        if _on_in_steps(run) or (not read and last(dotted(c.func) or "") == "Trainer")
    ]  # fmt: skip
    if tree is None or not calls:
        return None
    given = keyword_of(calls[0], "detect_anomaly")
    assert given is not None
    said = AnomalyOn(
        tree.line_of(given), f"{dotted(calls[0].func) or '...'}(..., detect_anomaly=True)", True
    )
    return found("debug.anomaly_detection", "medium", said, line=said.line, fix=FIX)


def _on_outside(run: Run, facts: SourceFacts) -> Finding | None:
    """Found on in the loop's backward calls with no switch of this cell's on its steps: no line
    here to edit, so no fix; the words say where it was set. On in at least half of the backward
    calls read: a one-off debugging backward beside the loop is not the loop's."""
    clock = run.steps
    if not _on_in_steps(run):
        return None
    on, read = clock.anomaly_backwards or 0, clock.anomaly_backward_reads
    tree = facts.tree
    own = [c for c in tree.calls() if _turns_on(c) and tree.in_cell(c)] if tree is not None else []
    said = AnomalyOnOutside(
        on, read, clock.anomaly_caller, tree.line_of(own[0]) if tree and own else None
    )
    return found("debug.anomaly_detection", "medium", said)


def anomaly_off(module: cst.Module) -> CodemodResult:
    """``detect_anomaly()`` / ``set_detect_anomaly(True)`` -> ``set_detect_anomaly(False)``, as a
    statement or in its ``with`` (set_detect_anomaly is a context manager too): the calls the
    rule found, edited where they stand."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import Declined, Edited, facts_of, nodes_of, replace_nodes

    tree = facts_of(module).tree  # the facts the rule read (the same text, scanned once)
    edits: dict[cst.CSTNode, Replacement] = {}
    for node in nodes_of(module, anomaly_calls(tree) if tree is not None else []):
        # A bare ``detect_anomaly`` name: ``set_detect_anomaly`` may not be imported there.
        if isinstance(node, cst.Call) and (
            isinstance(node.func, cst.Attribute)
            or (isinstance(node.func, cst.Name) and node.func.value == "set_detect_anomaly")
        ):
            edits[node] = _switched_off
    for node in nodes_of(module, anomaly_keywords(tree) if tree is not None else []):
        edits[node] = _keyword_off
    if not edits:
        return Declined(
            "no torch.autograd.set_detect_anomaly(True), detect_anomaly() or "
            "detect_anomaly=True to turn off"
        )
    return Edited(replace_nodes(module, edits), f"{len(edits)} call(s) turned off")


def _switched_off(updated: cst.Call) -> cst.Call:
    """The call as ``set_detect_anomaly(False)``, under the same module path."""
    import libcst as cst

    func = updated.func
    if isinstance(func, cst.Attribute):
        func = func.with_changes(attr=cst.Name("set_detect_anomaly"))
    return updated.with_changes(func=func, args=[cst.Arg(cst.Name("False"))])


def _keyword_off(updated: cst.Call) -> cst.Call:
    """The call with ``detect_anomaly=False``, its other arguments as they were."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    return set_keyword(updated, "detect_anomaly", cst.Name("False"))


FIX = Fix(
    "anomaly_off",
    "Turn autograd's anomaly detection off",
    (
        "Anomaly detection records a traceback per operation and checks every gradient for NaN.",
        "set_detect_anomaly(False) (or detect_anomaly=False) trains without that debugging work.",
    ),
    _GUIDE_URL,
    anomaly_off,
)
TIE = 100  # where its findings tie: the verdict table's order (rules._families)
RULES = (anomaly_detection,)
