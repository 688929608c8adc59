"""The worded parts of a finding, and the table from each message's record to its wording."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from gpu_notebook.cell.facts import Origin, SourceLine
from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import PhaseBreakdown, Said
from gpu_notebook.rules.common import RESIDUAL_PHASES


class Words(NamedTuple):
    """A finding's text: its title, evidence lines, the fix in one line, where its levels come from."""

    title: str
    evidence: tuple[str, ...]
    fix: str
    source: str


S = TypeVar("S", bound=Said)

# Each message's record class -> the function that words it (filled by ``@worder``).
WORDERS: dict[type[Said], Callable[[Any], Words]] = {}


def worder(said: type[S]) -> Callable[[Callable[[S], Words]], Callable[[S], Words]]:
    """Register the decorated function as the wording of ``said``'s records."""

    def register(word: Callable[[S], Words]) -> Callable[[S], Words]:
        WORDERS[said] = word
        return word

    return register


def words(title: str, evidence: Iterable[str], fix: str, source: str) -> Words:
    return Words(title, tuple(evidence), fix, source)


def copy_evidence(copy: float | None, lean: float | None = None, span: float | None = None) -> str:
    """The evidence line of the host's copy share (the copy rules, host-made tensors), with
    the copies' time over an unprofiled step where that reads more (``lean``) and the run's
    forward span that holds them where that reads more still (``span``)."""
    if copy is None:
        return "host copy time: not measured"
    said = f"the host spends {fmt_share(copy)} of the step in copies"
    if lean is not None and fmt_share(lean) != fmt_share(copy):
        said += f" ({fmt_share(lean)} of an unprofiled step: the profiler slows the rest)"
    if span is not None and fmt_share(span) != fmt_share(max(copy, lean or 0.0)):
        said += (
            f"; at most {fmt_share(span)} of the run's unprofiled steps: the span before the "
            "backward that holds them (and the model's forward), as the step clock timed it"
        )
    return said


def phase_source(phases: PhaseBreakdown | None) -> str:
    """Where the phase split came from: its steps and its clock."""
    if phases is None:
        return "no phase split"
    what = "torch.profiler trace" if phases.source == "trace" else "step-clock hooks"
    return f"{len(phases.steps)} step(s), {what}"


def residual_evidence(phases: PhaseBreakdown | None, residual: float | None) -> str:
    """The evidence line of the host time outside the model and the optimizer."""
    if residual is None:
        return "host time outside the model and optimizer: not measured (no phase split)"
    measured = phases.measured if phases is not None else ()
    names = [p for p in RESIDUAL_PHASES if p in measured]
    return (
        f"host time outside data loading, the model and the optimizer ({' + '.join(names)}): "
        f"{fmt_share(residual)} of the step"
    )


def data_wait_evidence(
    data: float, phases: PhaseBreakdown | None = None, *, where: bool = True
) -> str:
    """The evidence line of the data wait, with where the phase split came from (``where``)."""
    source = f" ({phase_source(phases)})" if where else ""
    return f"waiting for the next batch: {fmt_share(data)} of the step{source}"


def at(line: SourceLine) -> str:
    """Where a fact's line is, as the user finds it: the measured cell's "line 7", another
    cell's "In[3] line 4" (as IPython's tracebacks name a cell), a user's file's "utils.py:14"
    (a function the cell calls, read with it: ``cell.calls``)."""
    return place(line.line, line.origin)


def place(line: int, origin: Origin | None) -> str:
    """:func:`at` of a reading line and its origin (a record that keeps them apart)."""
    if origin is None:
        return f"line {line}"
    there = origin.line_there(line)
    if origin.in_file:
        return f"{_file_label(origin.filename)}:{there}"
    if origin.cell_number is not None:
        return f"In[{origin.cell_number}] line {there}"
    return f"line {there} of `{origin.function}()` (another cell)"


def lines_at(lines: Sequence[SourceLine], most: int = 6) -> str:
    """``line(s) 4, 7`` of the cell, or each line's place where one is elsewhere."""
    shown = lines[:most]
    more = " ..." if len(lines) > most else ""
    if all(s.origin is None for s in shown):
        return "line(s) " + ", ".join(str(s.line) for s in shown) + more
    return ", ".join(at(s) for s in shown) + more


def _file_label(filename: str) -> str:
    """A user's file as they name it: relative to the working directory when under it."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith(os.pardir) else relative


# A framework keyword's other way to run its work less often (cell.blocks.framework_blocks).
_SETTING_INSTEAD = {
    "eval_steps": 'eval_strategy="epoch" evaluates once an epoch',
    "save_steps": 'save_strategy="epoch" saves once an epoch',
    "val_check_interval": (
        "Lightning's default, val_check_interval=1.0, validates once an epoch; a count over an "
        "epoch's batches needs check_val_every_n_epoch=None"
    ),
}


# The cycle of the cell's own torch.profiler (cell.blocks._profiler_cycles): its cost is the
# profiler's, which the user runs on purpose; what to do is read its trace, then drop it.
PROFILER_CYCLE = (
    "each cycle records its active steps with every operator, then stops and hands their "
    "events to on_trace_ready at its end: that step's extra time is the profiler's, not the "
    "training's"
)
PROFILER_CYCLE_FIX = (
    "Nothing to change in the training: these are the cost of the cell's own profiler, and they "
    "end with it (its `repeat=` bounds its cycles). Read its trace, then measure the loop without "
    "`profile(...)`: every figure of this report carries that profiler's cost."
)


def rarer(setting: str | None, every: int) -> str:
    """How the cell runs a periodic block every ``every`` steps: the framework's keyword where
    one sets the period (``eval_steps=100``), else ``% every``."""
    return f"`% {every}`" if setting is None else f"`{setting}={every}`"


def instead(setting: str | None) -> str:
    """The framework's other way to run it less often (`` (eval_strategy="epoch" ...)``), or ""."""
    other = _SETTING_INSTEAD.get(setting) if setting is not None else None
    return f" ({other})" if other else ""


def start_ups_clause(share: float | None) -> str:
    """A remade loader's start-ups beside a bigger batch's gain: paid once an epoch, whatever
    the batch (``TinyOps.start_ups``, ``SmallBatch.start_ups``)."""
    if share is None:
        return ""
    return (
        f", nor the loader's start-ups, {fmt_share(share)} of the step time: a loader made anew "
        "every epoch starts its workers once an epoch whatever the batch"
    )


def unclocked_clause(unclocked_events: int) -> str:
    """Why a GPU timeline's figures are bounds, not measures (``GpuBusyBounds``)."""
    return (
        f"the trace's GPU timeline is partial: {unclocked_events} GPU event(s) carry no timestamps"
    )


def busy_evidence(low: float, high: float | None, unclocked_events: int) -> str:
    """The GPU's busy share of the window: measured, or on a partial timeline its bounds (the
    clocked events below, NVML inside the steps above)."""
    if not unclocked_events:
        return f"GPU busy {fmt_share(low)} of the window"
    if high is None:
        return (
            f"GPU busy at least {fmt_share(low)} of the window, not measured "
            f"({unclocked_clause(unclocked_events)}, and NVML read nothing to bound it)"
        )
    return (
        f"GPU busy at least {fmt_share(low)} of the window, at most {fmt_share(high)} (NVML "
        f"inside the steps): not measured, {unclocked_clause(unclocked_events)}"
    )


def window_share(
    low: float, high: float | None, unclocked_events: int, window: str = "the window"
) -> str:
    """A share of the GPU window read on the timeline's clocked kernels: measured, or on a
    partial timeline at least that, at most that plus the busy time no event shows."""
    if not unclocked_events:
        return f"{fmt_share(low)} of {window}"
    most = "not measured" if high is None else fmt_share(high)
    return (
        f"at least {fmt_share(low)} of {window} (at most {most}: the unclocked events' time may "
        "all be theirs)"
    )
