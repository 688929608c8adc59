"""Words of what the rules add to any finding (rules/__init__.py): stalled steps left out, the
profiler's slowdown, low confidence, a fix on a run too short to size it, a fix too small to
measure, one whose range is uncertain and one nothing bounds."""

from __future__ import annotations

from gpu_notebook.analysis.steady import STALL_FACTOR
from gpu_notebook.formatting import fmt_gain
from gpu_notebook.records import Said
from gpu_notebook.rules import (
    LowConfidence,
    Margin,
    ProfilingFactor,
    RuleFailed,
    SmallGain,
    StallsLeftOut,
    TooShortToSize,
    UnboundedGain,
    UncertainGain,
)
from gpu_notebook.words.common import Words, worder, words


def note_lines(note: Said) -> list[str]:
    """The evidence lines of a note (none for a fix's prefix)."""
    if isinstance(note, StallsLeftOut):
        lines = [
            f"{note.stalls} of {note.steps} profiled steps took over {STALL_FACTOR:.0f}x the median and were "
            "left out to decide this finding (the report's phase table counts them)"
        ]
        if note.full_bound is not None:
            lines.append(
                f"with them counted the bound is larger, {note.full_bound:.2f}x: that is the bound given"
            )
        return lines
    if isinstance(note, ProfilingFactor):
        return [
            f"profiled steps took {note.factor:.2f}x as long as unprofiled ones: the shares (and the "
            "bound) are those of profiled steps, where this work may weigh less"
        ]
    if isinstance(note, Margin):
        low = None if note.low is None else note.low / (1 + note.margin)
        capped = note.high < note.bound * (1 + note.margin) - 1e-9
        if low is None and note.high <= note.bound + 1e-9:
            return []  # nothing widened: no low end, and the bound is the most it can give
        said = fmt_gain(note.high, low)
        at_most = f"only up to the {note.high:.2f}x the change can give at most"
        sides = (
            "on each side"
            if not capped
            else at_most
            if low is None
            else f"below, and above {at_most}"
        )
        return [
            f"as a measurement may read it: {said}, the {fmt_gain(note.bound, note.low)} above "
            f"widened by {note.margin:.0%} {sides}, what two runs of this code differ by here "
            f"(the spread of this run's fifths' typical steps (trimmed means), at least {note.run_to_run:.0%})"
        ]
    if isinstance(note, TooShortToSize):
        return [
            f"the run has {note.steps} step(s), {_warmup_part(note)}: a per-step gain needs "
            f"{note.needed} steps past the warm-up to be sized, so the figures above, read on "
            "its first steps (one-time costs in them: first calls, a framework's set-up, a "
            "loader's first batches), bound nothing"
        ]
    if isinstance(note, LowConfidence):
        return [
            f"low confidence: shares from only {note.steps} profiled step(s); rerun with more steps "
            "(%%gpucheck -s 10) before acting on it"
            if note.steps is not None
            else f"verdict confidence is {note.confidence}: treat the shares as indicative"
        ]
    return []


def _slower(low: float | None) -> str:
    """A range whose low end is under 1x: a measurement may read the step slower, by that much
    (issue 26: a workers fix read 0.81x under load where its card said it "may change nothing
    measurable")."""
    if low is None or low >= 1.0 or low <= 0.0:
        return ""
    return f"the step may get slower (down to {low:.2f}x: {1.0 / low - 1.0:.0%} longer), "


def _warmup_part(note: TooShortToSize) -> str:
    if note.steps <= note.warmup:
        return f"all within the profiler's warm-up of {note.warmup}"
    return f"{note.warmup} of them the profiler's warm-up"


def fix_prefix(notes: tuple[Said, ...]) -> str:
    """What goes before the fix: a fix the run is too short to size says so first; a range too
    small to measure, or one that runs from within the run-to-run margin to well above it
    (uncertain: measure it), says so; a low end under 1x says the step may get slower, and by
    how much."""
    short = next((n for n in notes if isinstance(n, TooShortToSize)), None)
    if short is not None:
        return (
            f"Not sized: the run has {short.steps} step(s), too few to size a per-step gain "
            f"(the profiler's warm-up of {short.warmup} and {short.needed} more); run more "
            "steps to size and measure it. "
        )
    small = next((n for n in notes if isinstance(n, SmallGain)), None)
    if small is not None:
        measured = (
            ""
            if small.measured_low is None
            else f", as little as {small.measured_low:.2f}x within the 90% interval of the share it rests on"
        )
        said = fmt_gain(small.bound, small.low)
        read = fmt_gain(small.read_high, small.read_low) if small.read_high is not None else said
        widened = f"; {read} as two runs of this script may read it here" if read != said else ""
        slower = _slower(small.read_low if small.read_low is not None else small.low)
        tail = f", or {slower.removesuffix(', ')}" if slower else ""
        return (
            f"Small: may have no measurable effect ({said}{measured}; "
            f"two runs of the same script differ by {small.run_to_run:.0%}{widened}){tail}. "
        )
    wide = next((n for n in notes if isinstance(n, UncertainGain)), None)
    if wide is not None and wide.bound is not None and wide.low is None:
        return (
            f"Uncertain: {fmt_gain(wide.bound)}, within what two runs of the same script differ "
            f"by here ({wide.run_to_run:.0%}): it may change nothing measurable; measure it "
            "before relying on it (`gpucheck run --try-fixes`, or run the patched cell). "
        )
    if wide is not None and wide.bound is not None:
        return (
            f"Uncertain: {fmt_gain(wide.bound, wide.low)} (two runs of the same script differ by "
            f"{wide.run_to_run:.0%}): {_slower(wide.low)}it may change nothing measurable, or give up to "
            f"{wide.bound:.2f}x; measure it before relying on it (`gpucheck run --try-fixes`, or "
            "run the patched cell). "
        )
    if any(isinstance(n, UnboundedGain) for n in notes):
        return (
            "Unmeasured: nothing this run measured bounds what it gains; measure it before "
            "relying on it (`gpucheck run --try-fixes`, or run the patched cell). "
        )
    return ""


@worder(RuleFailed)
def rule_failed(s: RuleFailed) -> Words:
    return words(
        "One of gpu_notebook's checks failed on this run (a bug of ours, not of your code)",
        [
            f"the check `{s.rule}` raised {s.error}",
            "the other findings and your cell's outcome stand",
        ],
        "Nothing to change in the cell. Please report it with this line and the gpu_notebook "
        "version.",
        "gpu_notebook",
    )
