"""The optimizer phase split by optimizer class, from a profiler trace's per-optimizer ranges.

torch's ``Optimizer`` wraps each ``step`` and ``zero_grad`` in a profiler range named for the
instance's class: ``Optimizer.step#SparseAdam.step``, ``Optimizer.zero_grad#Adam.zero_grad``
(torch/optim/optimizer.py, ``profile_hook_step`` and ``zero_grad``; recorded on the CPU as
``user_annotation`` events of the loop's thread). The step clock times every optimizer's step
together (its global step hooks), so where a loop steps several (a GAN's G and D, SparseAdam for
a sparse embedding beside Adam for the dense rest) only these ranges say whose update the time
is: a fix that reaches some of them (``fused=True`` exists for Adam, not SparseAdam) is bounded by
their part alone (issue 26: "up to 1.26x" on the whole update, measured 0.93x, where SparseAdam
held most of it).

A range inside another optimizer's (a wrapper whose ``step`` calls its inner optimizer's: a
Lookahead, a ZeRO wrapper) counts as the inner one's; the wrapper keeps only its own time. A
closure's calls inside a step (``step(closure)``: LBFGS, Lightning) leave it where the step clock
wrote their ranges (``markers.CLOSURE``); in a trace recorded elsewhere they stay in its step's
time (the bound stays a ceiling). Several instances of one class are one class: the trace does
not tell them apart.

On the CPU the split comes from the step clock where it timed each class (``clock_split``):
each optimizer's own steps on the loop thread's CPU clock over the run's unprofiled steps. The
trace's split moves with the machine's load and the profiler: over 3 steps a time slice lost to
another process lands in whichever range ran long (SparseAdam's 10 ms step took 40 ms of wall
time at load 15, Adam's 0.5 ms none), and the profiler's cost on each op inflates an unfused
Adam's many small ones (embbag_sparse: Adam's part read 11% loaded and about 30% quiet, for a
fused bound of "up to 1.07x" and "up to 1.23x"; its step's CPU time is 5% of the update, and
the fix measured 0.97x). On a GPU the host's CPU time is the launches', not the update's: the
trace's split stays.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook import markers
from gpu_notebook.analysis.phases import step_bounds
from gpu_notebook.records import OptimizerSplit, OptimizerTime, PhaseBreakdown, StepClockRecord
from gpu_notebook.traces.kineto import Trace

__all__ = ["clock_split", "optimizer_class", "optimizer_split"]

# Steps of each class the clock must have timed for its split to be read (as ``run_phase``).
CLOCK_MIN_STEPS = 8

_PREFIXES = (markers.OPTIMIZER_STEP_PREFIX, markers.OPTIMIZER_ZERO_GRAD_PREFIX)


def optimizer_class(range_name: str) -> str:
    """``Optimizer.step#AdamW.step`` or ``Optimizer.zero_grad#AdamW.zero_grad`` -> ``AdamW``."""
    for prefix in _PREFIXES:
        if range_name.startswith(prefix):
            return range_name.removeprefix(prefix).split(".", 1)[0]
    return range_name


def optimizer_split(trace: Trace, phases: PhaseBreakdown | None) -> OptimizerSplit | None:
    """The optimizer time of the traced steps (``phases``' steps) by optimizer class. None: no
    steps recorded, or no optimizer range starts inside them (hooks only, an inference loop)."""
    if phases is None or phases.source != "trace" or not phases.steps:
        return None
    bounds = step_bounds(trace)
    if bounds is None:
        return None
    host = bounds.host
    rows = np.flatnonzero(
        (trace.name_mask(prefix=_PREFIXES) | trace.name_mask(names=(markers.CLOSURE,)))
        & ~trace.category_mask("gpu_user_annotation")
        & (trace.pid == host[0])
        & (trace.tid == host[1])
    )
    # Each kept step's span on the trace clock: its bounds where the trace has them (a step's
    # duration is its own time, less its wait for a core, so start + duration may end early).
    spans = dict(zip(bounds.index, zip(bounds.start_us, bounds.end_us, strict=True), strict=True))
    kept = [spans.get(s.index, (s.start_us, s.start_us + s.duration_us)) for s in phases.steps]
    ts = trace.ts_us[rows]
    inside = np.zeros(rows.size, dtype=np.bool_)
    for a, b in kept:
        inside |= (ts >= a) & (ts < b)
    rows = rows[inside]
    if rows.size == 0:
        return None
    # Outer ranges first where two start together, so a nested one is always seen inside.
    rows = rows[np.lexsort((-trace.dur_us[rows], trace.ts_us[rows]))]
    own_us = trace.dur_us[rows].astype(np.float64)
    ends = trace.end_us[rows]
    open_ranges: list[int] = []  # positions in ``rows`` of the ranges enclosing the current one
    names = [trace.name_of(row) for row in rows.tolist()]
    # A closure's call (the step clock's range) and whatever it holds (Lightning's zero_grad)
    # are the model's and the framework's: they leave the step around them and count for none.
    in_closure = np.zeros(rows.size, dtype=np.bool_)
    for k in range(rows.size):
        start = float(trace.ts_us[rows[k]])
        while open_ranges and float(ends[open_ranges[-1]]) <= start:
            open_ranges.pop()
        if open_ranges:  # its whole span leaves the range directly around it
            own_us[open_ranges[-1]] -= float(trace.dur_us[rows[k]])
        in_closure[k] = names[k] == markers.CLOSURE or any(in_closure[j] for j in open_ranges)
        open_ranges.append(k)
    times: dict[str, list[float]] = {}
    for k, name in enumerate(names):
        if in_closure[k]:
            continue
        entry = times.setdefault(optimizer_class(name), [0.0, 0.0, 0.0])
        spent = max(0.0, float(own_us[k]))
        if name.startswith(markers.OPTIMIZER_STEP_PREFIX):
            entry[0] += spent
            entry[2] += 1
        else:
            entry[1] += spent
    classes = sorted(
        (OptimizerTime(cls, v[0], v[1], int(v[2])) for cls, v in times.items()),
        key=lambda c: (-(c.step_us + c.zero_grad_us), c.cls),
    )
    return OptimizerSplit(tuple(classes), len(phases.steps))


def clock_split(
    record: StepClockRecord, traced: OptimizerSplit | None, *, on_gpu: bool
) -> OptimizerSplit | None:
    """The optimizers' update time by class from the step clock's CPU readings (each class's
    own steps on the loop thread's CPU clock over the run), where it timed every class the
    trace shows and each over ``CLOCK_MIN_STEPS`` steps or more. None: on a GPU, or not so
    timed (the trace's split, ``traced``, stands)."""
    timed = record.optimizer_cpu
    if on_gpu or not timed or any(n < CLOCK_MIN_STEPS for _, n in timed.values()):
        return None
    if traced is not None and not {c.cls for c in traced.classes} <= set(timed):
        return None  # an optimizer the clock did not time (another thread's): not split here
    classes = sorted(
        (OptimizerTime(cls, cpu_s * 1e6, 0.0, n) for cls, (cpu_s, n) in timed.items()),
        key=lambda c: (-c.step_us, c.cls),
    )
    if sum(c.step_us for c in classes) <= 0:
        return None
    return OptimizerSplit(tuple(classes), min(n for _, n in timed.values()), source="clock")
