"""Where the cell's wall time went: before its first training step, in the steps, after the last.

The spans are the step clock's (its first step's start and its last step's end, against the
capture's wall time); the lines that took the spans outside the steps are the edge sampler's
(``Run.edge_stacks``, labelled by where the clock stood as each sample was taken: records.EDGE_*).
Samples held under an anchor the run's final one superseded (steps counted at each DataLoader
read of an evaluation, before the optimizer's steps began) are the time before the first step.
The steps themselves are other findings' business: nothing here reads inside them.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu_notebook.capture.stacks import IPYTHON_ERROR_DISPLAY
from gpu_notebook.records import (
    EDGE_AFTER,
    EDGE_BEFORE,
    EDGE_STEPS,
    CellTime,
    RawStacks,
    Run,
    SpanLine,
)

# A line holding less of a span's samples than this is not worth naming.
MIN_LINE_SHARE = 0.10
MAX_LINES = 3


def cell_time(run: Run) -> CellTime | None:
    """The cell's wall time split at its first step's start and its last step's end (None: no
    step counted, or no wall time)."""
    steps = run.steps
    if not steps.steps or steps.step_count == 0 or run.wall_s <= 0:
        return None
    first_s = max(0.0, steps.steps[0].start_s)
    last = steps.steps[-1]
    last_end_s = (
        steps.last_end_s if steps.last_end_s is not None else last.start_s + last.duration_s
    )
    last_end_s = min(max(last_end_s, first_s), run.wall_s)
    before_labels, after_labels = _labels(run.edge_stacks, steps.anchor)
    before_lines, before_n, _ = _span_lines(run, before_labels)
    after_lines, after_n, after_error = _span_lines(run, after_labels)
    after_s = run.wall_s - last_end_s
    return CellTime(
        wall_s=run.wall_s,
        before_s=first_s,
        steps_s=last_end_s - first_s,
        after_s=after_s,
        steps=steps.step_count,
        before_lines=before_lines,
        after_lines=after_lines,
        before_samples=before_n,
        after_samples=after_n,
        after_error_s=after_s * after_error,
    )


def _labels(raw: RawStacks | None, anchor: str) -> tuple[frozenset[str], frozenset[str]]:
    """The edge labels of the time before the first step and after the last, for ``anchor``."""
    if raw is None:
        return frozenset(), frozenset()
    seen = {s.phase for s in raw.stacks if s.phase is not None}
    before = {EDGE_BEFORE} | {
        label for label in seen if label.startswith(EDGE_STEPS) and label != EDGE_STEPS + anchor
    }
    return frozenset(before), frozenset({EDGE_AFTER + anchor})


def _span_lines(run: Run, labels: frozenset[str]) -> tuple[tuple[SpanLine, ...], int, float]:
    """The cell lines most sampled under ``labels`` (inclusive), the span's samples, and the
    share of its sampled time IPython spent showing the cell's exception."""
    raw = run.edge_stacks
    if raw is None or not labels:
        return (), 0, 0.0
    # A span of IPython's traceback alone has no root of the cell's: the steps' sampler has.
    window = run.stacks.root_filename if run.stacks is not None else None
    cell = raw.cell_filename or raw.root_filename or window
    stacks = [s for s in raw.stacks if s.phase in labels]
    total_us = sum(s.time_us for s in stacks)
    samples = sum(s.count for s in stacks)
    if total_us <= 0:
        return (), samples, 0.0
    # After a failure IPython formats the traceback inside the cell's run (run_code calls
    # showtraceback): seconds on a busy machine for a long one, which plain pays too.
    error_us = sum(
        s.time_us
        for s in stacks
        if s.rooted and s.frames and _shows_error(raw.functions[s.frames[0][0]].function)
    )
    error = error_us / total_us
    if cell is None:
        return (), samples, error
    time_us: dict[int, int] = {}
    count: dict[int, int] = {}
    depth: dict[int, int] = {}  # outermost place of the line in a stack: the call line first
    for stack in stacks:
        seen: set[int] = set()
        for i, line in enumerate(_cell_lines(raw, stack.frames, cell)):
            depth[line] = min(depth.get(line, i), i)
            seen.add(line)
        for line in seen:  # once a sample: a recursive line is still one sample
            time_us[line] = time_us.get(line, 0) + stack.time_us
            count[line] = count.get(line, 0) + stack.count
    source = run.cell_source.splitlines()
    ranked = sorted(time_us, key=lambda ln: (-time_us[ln], depth[ln], ln))
    lines = []
    for line in ranked[:MAX_LINES]:
        share = time_us[line] / total_us
        if share < MIN_LINE_SHARE:
            break
        index = line - run.first_line
        text = source[index].strip() if 0 <= index < len(source) else ""
        lines.append(SpanLine(line=line, text=text, share=share, samples=count[line]))
    return tuple(lines), samples, error


def _shows_error(function: str) -> bool:
    """IPython's own display of the cell's exception, called by ``run_code`` (its root)."""
    return function.rsplit(".", 1)[-1] in IPYTHON_ERROR_DISPLAY


def _cell_lines(raw: RawStacks, frames: Iterable[tuple[int, int]], cell: str) -> Iterable[int]:
    """The lines of the frames of the cell's own file, outermost first."""
    return (line for f, line in frames if raw.functions[f].filename == cell)
