"""The cell's wall time went mostly outside its training steps: before the first (set-up, imports,
a dataset built, an evaluation before training) or after the last (a checkpoint save, a final
evaluation).

Every other finding speaks of the steps; when they are a minority of the cell (under half of its
wall time, ``OUTSIDE_SHARE``: our level), the user asking why the cell is slow is told where the
rest went: the step clock's spans (``analysis.cell_time``) and the lines the edge sampler caught
in them. A validation pass inside the loop lies inside the steps' span: no double count with
the validation rules.

Advice only where it is measured: an evaluation before training (a sampled line of the span
that calls it) holds its share of the span's samples times the span's time; it could run after
training or every N epochs. No patch in any case: moving an evaluation changes what it
measures, and set-up, imports or a save are the cell's own to keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_notebook.cell.blocks import WORK_KINDS
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, CellTime, Finding, Run, Said, Severity, SpanLine
from gpu_notebook.rules.common import Rule, found

OUTSIDE_SHARE = 0.5  # of the cell's wall time outside the steps: they are a minority
# A block this share of the cell's wall time makes the finding medium: the cell's time is its.
BLOCK_SHARE = 0.5
# What a line does, by its text: the blocks' kinds, and an import (paid once per process).
BlockKind = Literal["validation", "save", "logging", "imports"]


@dataclass(frozen=True)
class OutsideSteps(Said):
    cell: CellTime
    span: Literal["before", "after"]  # the larger span outside the steps
    line: SpanLine | None  # the span's first line that says what it does (or its top line)
    kind: BlockKind | None  # what that line does (None: nothing its text names)
    block_s: float | None  # about its time: its share of the span's samples times the span


def outside_steps(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Most of the cell's wall time lies before its first step or after its last."""
    ct = analysis.cell_time
    # IPython showing a failed cell's traceback is not the cell's code: nothing to say of it.
    after_s = max(0.0, ct.after_s - ct.after_error_s) if ct is not None else 0.0
    if ct is None or ct.wall_s <= 0 or ct.share(ct.before_s + after_s) < OUTSIDE_SHARE:
        return None
    span: Literal["before", "after"] = "before" if ct.before_s >= after_s else "after"
    lines, span_s = (
        (ct.before_lines, ct.before_s) if span == "before" else (ct.after_lines, ct.after_s)
    )
    line, kind = _named_block(lines)
    block_s = line.share * span_s if line is not None else None
    evaluation = kind == "validation" and span == "before"
    big = evaluation and ct.share(block_s or 0.0) >= BLOCK_SHARE
    severity: Severity = "medium" if big else "low"
    said = OutsideSteps(ct, span, line, kind, block_s)
    return found("cell.outside_steps", severity, said, line=line.line if line else None)


def _named_block(lines: tuple[SpanLine, ...]) -> tuple[SpanLine | None, BlockKind | None]:
    """The span's evaluation, the one block with advice to give, where a line of it calls one;
    else the first of its lines (most sampled first) whose text says what it does, with its
    kind; else its top line, no kind."""
    kinds = [(stat, line_kind(stat.text)) for stat in lines]
    for stat, kind in kinds:
        if kind == "validation":
            return stat, kind
    for stat, kind in kinds:
        if kind is not None:
            return stat, kind
    return (lines[0] if lines else None), None


def line_kind(text: str) -> BlockKind | None:
    """What one line of the cell does, by its text (None: nothing it names)."""
    if text.startswith(("import ", "from ")):
        return "imports"
    for kind, pattern in WORK_KINDS:
        if pattern.search(text):
            return _KINDS.get(kind.split()[-1])  # "a checkpoint save": save
    return None


_KINDS: dict[str, BlockKind] = {"validation": "validation", "save": "save", "logging": "logging"}


RULES: tuple[Rule, ...] = (outside_steps,)
