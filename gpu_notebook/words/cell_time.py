"""Words of the cell-time rule (rules/cell_time.py): the cell's time outside its training steps."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_seconds, fmt_share
from gpu_notebook.records import CellTime, SpanLine
from gpu_notebook.rules.cell_time import OUTSIDE_SHARE, OutsideSteps
from gpu_notebook.words.common import Words, worder, words

_SOURCE = (
    f"gpu_notebook's own level (rules/cell_time.py): the steps under {fmt_share(1 - OUTSIDE_SHARE)} "
    "of the cell's wall time; the spans from the step clock's first step start and last step "
    "end, the lines from the 20 Hz edge sampler's samples outside the steps"
)
_NO_PATCH = "No patch: "


def _line(stat: SpanLine) -> str:
    text = stat.text if len(stat.text) <= 60 else stat.text[:59] + "\u2026"
    return f"line {stat.line} `{text}`"


def _span_evidence(where: str, span_s: float, lines: tuple[SpanLine, ...], samples: int,
                   ct: CellTime) -> str:  # fmt: skip
    if not samples:
        return (
            f"{where} ({fmt_seconds(span_s)}): no stack sample caught it (line sampling off, "
            "or shorter than the edge sampler's 50 ms)"
        )
    named = ", ".join(f"{_line(s)} {fmt_share(s.share)}" for s in lines) or "no cell line"
    return f"{where} ({fmt_seconds(span_s)}), {samples} stack sample(s): {named}"


@worder(OutsideSteps)
def outside_steps(s: OutsideSteps) -> Words:
    ct = s.cell
    evidence = [
        f"the cell's wall time {fmt_seconds(ct.wall_s)}: before the first step "
        f"{fmt_seconds(ct.before_s)} ({fmt_share(ct.share(ct.before_s))}), the {ct.steps} "
        f"step(s) {fmt_seconds(ct.steps_s)} ({fmt_share(ct.share(ct.steps_s))}), after the last "
        f"{fmt_seconds(ct.after_s)} ({fmt_share(ct.share(ct.after_s))})",
    ]
    for where, span_s, lines, samples in (
        ("before the first step", ct.before_s, ct.before_lines, ct.before_samples),
        ("after the last step", ct.after_s, ct.after_lines, ct.after_samples),
    ):
        if span_s > 0 and (samples or ct.share(span_s) >= 0.1):
            evidence.append(_span_evidence(where, span_s, lines, samples, ct))
    evidence.append(
        f"the other findings speak of the steps: {fmt_share(ct.share(ct.steps_s))} of the cell"
    )
    where = "before the first step" if s.span == "before" else "after the last step"
    title = f"Most of the cell's time is {where}, outside the training steps"
    return words(title, evidence, _fix(s, where), _SOURCE)


def _fix(s: OutsideSteps, where: str) -> str:
    ct, line, block_s = s.cell, s.line, s.block_s
    if line is None or block_s is None:
        return (
            _NO_PATCH + f"no stack sample named the lines {where}; measure with line sampling "
            "on (the default) to see them."
        )
    took = f"took about {fmt_seconds(block_s)} ({fmt_share(ct.share(block_s))} of the cell)"
    if s.kind == "validation" and s.span == "before":
        return (
            f"The evaluation before training ({_line(line)}) {took}: if its number before "
            f"training is not needed, run it after training or every N epochs (the cell would "
            f"take about {fmt_seconds(max(0.0, ct.wall_s - block_s))}). {_NO_PATCH}where an "
            "evaluation runs changes what it measures."
        )
    if s.kind == "validation":
        return (
            f"The evaluation after training ({_line(line)}) {took}: it runs once, after the "
            f"steps, where it belongs. {_NO_PATCH}nothing measured says what to move."
        )
    if s.kind == "save":
        return (
            f"The checkpoint save ({_line(line)}) {took}: written once, {where}. {_NO_PATCH}"
            "nothing measured says what to change."
        )
    if s.kind == "imports":
        return (
            f"Imports ({_line(line)}) {took}: paid once per process (a notebook pays them in the "
            f"first cell that imports, not again). {_NO_PATCH}nothing of the cell's to change."
        )
    return (
        f"{_line(line)} {took} {where}. {_NO_PATCH}nothing measured says what it does or what "
        "would be safe to change; measure the loop in a cell of its own to read its steps alone."
    )
