"""The loop body's own work outside the model: each traced step's host time before its model.

A step (marks at the optimizer's step, or the profiler's steps) runs, in order: what the loop
body does after the previous update (an EMA's ``update_parameters``, a log), the batch's arrival
(the "data" phase), what the body does to the batch before the model (tokenising strings, a
numpy or PIL augmentation, hand padding), then the model's forward, backward and update. The
phase split paints the model, the optimizer and the data wait; the time before the step's first
model operator that no such range covers is the loop body's own: Python between operators
("unattributed") and operators outside the model ("other": ``torch.tensor(ids)``, a foreach
EMA). Python between operators *inside* the model's ranges is per-operator overhead, not this.

Read off every traced step by the trace's own clock (not by the stack sampler's few samples:
unseen round 19's tokenising loop put 36% of its loop there and the sampler 7 samples over the
window, none on those lines), per step, so the spread between steps is the figure's range.
A step's wait for a core (read at the window's step marks, else by the step clock) may have
fallen in that time or elsewhere: the step's share is read both ways (``LoopPython``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpu_notebook.analysis.phases import _locator, step_bounds
from gpu_notebook.records import PHASES, LoopPython
from gpu_notebook.traces.kineto import Trace

__all__ = ["loop_python", "merged"]

_MODEL = np.asarray([PHASES.index(p) for p in ("forward", "backward")])
_OUTSIDE = np.asarray([PHASES.index(p) for p in ("other", "unattributed")])
# Points a step is read at: 1 us apart, at most this many (a 1 s GPU step is read every 50 us).
_MAX_POINTS = 20_000


def loop_python(trace: Trace, waits_s: Mapping[int, float] | None = None) -> LoopPython | None:
    """Each traced step's host time outside any model, optimizer or data range before its
    first model operator (see the module docstring); ``waits_s``: each step's wait for a core
    by step index. None without steps that hold a model."""
    bounds = step_bounds(trace)
    if bounds is None:
        return None
    locator = _locator(trace, bounds)
    outside: list[float] = []
    durations: list[float] = []
    waited: list[float] = []
    for index, start, end in zip(bounds.index, bounds.start_us, bounds.end_us, strict=True):
        span = end - start
        if span <= 0:
            continue
        n = int(min(_MAX_POINTS, max(100.0, span)))
        step_us = span / n
        phase = locator(start + (np.arange(n) + 0.5) * step_us)
        model = np.flatnonzero(np.isin(phase, _MODEL))
        if model.size == 0:
            continue  # no model in this step: nothing to be "before"
        before = phase[: model[0]]
        outside.append(float(np.isin(before, _OUTSIDE).sum()) * step_us)
        durations.append(span)
        waited.append(min(span, (waits_s or {}).get(index, 0.0) * 1e6))
    if not durations:
        return None
    return LoopPython(tuple(outside), tuple(durations), tuple(waited))


def merged(parts: list[LoopPython]) -> LoopPython | None:
    """Several windows' steps as one reading (None: no window read any)."""
    if not parts:
        return None
    return LoopPython(
        tuple(o for p in parts for o in p.outside_us),
        tuple(d for p in parts for d in p.step_us),
        tuple(w for p in parts for w in p.wait_us),
    )
