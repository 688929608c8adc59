"""The typical steps of a profiled window: stalled steps left out of the phase split.

Shared by the verdict and the rules, so that both decide on the same steps.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.records import Analysis

__all__ = ["STALL_FACTOR", "STALL_MAX_FRACTION", "without_stalls"]

# A profiled step longer than this many times the median is a stall (GC, another process, the
# profiler's own start-up) when a minority of the steps show it; our choice, stated in the
# evidence. The diagnosis then describes the typical step; the bound still counts every step.
STALL_FACTOR = 3.0
STALL_MAX_FRACTION = 0.5


def without_stalls(analysis: Analysis) -> tuple[Analysis, int]:
    """The analysis with stalled profiled steps left out of the phase split, and how many.

    On a small machine one step of a window can take 10-50x the others (seen on 2 cores: a
    single 8 ms pause in a 0.4 ms step), and one such step decides the shares of a short window.
    Steps over ``STALL_FACTOR`` x the median are dropped when they are a minority of the steps
    (on a shared 2-core machine 3 of 8 steps were seen to stall for 10-30 ms); the bounds are
    computed with them too and the larger one is given (see ``run_rules``).
    """
    phases = analysis.phases
    if phases is None or len(phases.steps) < 4 or analysis.window_phases is not None:
        # A whole-run estimate (analysis/run_trend.py) stands for every step, stalls included,
        # and its steps are scaled to the time they stand for: none is a stall to leave out.
        return analysis, 0
    durations = sorted(s.duration_us for s in phases.steps)
    mid = len(durations) // 2
    median = durations[mid] if len(durations) % 2 else (durations[mid - 1] + durations[mid]) / 2
    kept = [s for s in phases.steps if s.duration_us <= STALL_FACTOR * median]
    dropped = len(phases.steps) - len(kept)
    if dropped == 0 or dropped >= STALL_MAX_FRACTION * len(phases.steps):
        return analysis, 0
    totals: dict[str, float] = {}
    for step in kept:
        for name, value in step.phase_us.items():
            totals[name] = totals.get(name, 0.0) + value
    trimmed = dataclasses.replace(
        phases,
        steps=tuple(kept),
        total_us=sum(s.duration_us for s in kept),
        phase_total_us=totals,
    )
    return dataclasses.replace(analysis, phases=trimmed), dropped
