"""How much of its steps the loop's thread spent on a core: run-wide evidence that the time is compute.

The step clock reads the loop thread's schedstat at every step end: its time on a core
(``StepTiming.cpu_s``) and its wait for one (``wait_s``, the machine's share). A step's own time
is its wall time less that wait; a thread that computes is on a core for nearly all of it, one
that sleeps, blocks on I/O, a lock or another process is not. The verdict says "compute" only on
this evidence (or, where it was not read, on the operators' time); a share is the ratio of the
sums over the read steps (each step weighs what it cost: the on-CPU figure is exact to a
scheduler tick, and the ticks' error telescopes over a run), with a seeded bootstrap range over
the steps, as analysis/uncertainty does for phase shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpu_notebook.analysis.uncertainty import LEVEL, RESAMPLES, SEED
from gpu_notebook.records import StepCpu, StepTiming

__all__ = ["ON_CPU_COMPUTE", "OnCpu", "on_cpu", "process_cores", "process_share"]

# A thread on a core for at least half its own step time mostly computes; below, it mostly waits
# (the same 50% line as host.HOST_BOUND_SHARE: the larger part of the step decides).
ON_CPU_COMPUTE = 0.5
# Read steps whose own time sums to less than this say nothing (a scheduler tick is 1-10 ms).
MIN_READ_S = 0.1
# The read steps must hold at least this share of the kept steps' time to stand for the run.
MIN_COVER = 0.5


@dataclass(frozen=True)
class OnCpu:
    """The loop thread's time on a core over its steps' own time (wall less its wait for a core)."""

    share: float
    low: float  # the LEVEL range over the read steps (bootstrap, seeded)
    high: float
    steps: int  # steps read
    own_s: float  # their own time, summed
    # This process's CPU time (all its threads) over the same steps' own time, from the step
    # clock's spaced readings (None: fewer than two readings over enough steps). A thread that
    # waits at the end of each parallel region for torch's other threads is off a core while
    # its process computes: that is compute, not a sleep.
    process: float | None = None

    @property
    def computing(self) -> float:
        """The larger of the two readings: the share of the steps' own time spent computing."""
        return min(1.0, max(self.share, self.process or 0.0))


def on_cpu(steps: Sequence[StepTiming], readings: Sequence[StepCpu] = ()) -> OnCpu | None:
    """The loop thread's on-core share of the run's steps; None when too few steps carry a
    reading (not Linux, steps too short to pay for the read, an older record). Steps holding our
    own work (a profiler starting or stopping) are left out: that time is not the cell's."""
    read = [s for s in steps if s.cpu_s is not None and s.wait_s is not None and s.ours_s <= 0]
    if len(read) < 2:
        return None
    own = np.fromiter((max(0.0, s.duration_s - (s.wait_s or 0.0)) for s in read), dtype=float)
    cpu = np.fromiter((s.cpu_s or 0.0 for s in read), dtype=float)
    total = sum(s.duration_s for s in steps)
    if own.sum() < MIN_READ_S or total <= 0 or sum(s.duration_s for s in read) < MIN_COVER * total:
        return None
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, len(read), size=(RESAMPLES, len(read)))
    # A step's reading may run a tick past its own time (the next one's falls short): only the
    # sums are exact, so only shares are clipped.
    shares = np.minimum(1.0, cpu[idx].sum(axis=1) / np.maximum(own[idx].sum(axis=1), 1e-12))
    tail = (1.0 - LEVEL) / 2 * 100
    return OnCpu(
        min(1.0, float(cpu.sum() / own.sum())),
        float(np.percentile(shares, tail)),
        float(np.percentile(shares, 100 - tail)),
        len(read),
        float(own.sum()),
        process_share(steps, readings),
    )


def process_share(steps: Sequence[StepTiming], readings: Sequence[StepCpu]) -> float | None:
    """This process's CPU time over the own time (wall less the loop thread's wait for a core)
    of the steps between its first reading at or after ``steps[0]`` and its last: cores per
    second of the loop's own time. Our own work in those steps (a profiler starting, stopping)
    is left out of both. None: fewer than two readings, or too little time between them."""
    ends = _end_readings(steps, readings)
    if ends is None:
        return None
    first, last = ends
    span = [s for s in steps if first.index < s.index <= last.index]
    wall = sum(s.duration_s for s in span)
    if not span or wall <= 0:
        return None
    # Kept steps may be every Nth: the span's wait and our work as shares of its kept steps.
    wait = sum(s.wait_s or 0.0 for s in span) / wall
    ours = sum(s.ours_s for s in span) / wall
    elapsed = last.end_s - first.end_s
    own = elapsed * max(0.0, 1.0 - wait - ours)
    if own < MIN_READ_S:
        return None
    cpu = last.process_cpu_s - first.process_cpu_s - elapsed * ours
    return max(0.0, cpu / own)


def process_cores(steps: Sequence[StepTiming], readings: Sequence[StepCpu]) -> float | None:
    """This process's cores (CPU seconds per wall second, all its threads) between its first
    reading at or after ``steps[0]`` and its last: what the loop itself used, not the imports
    and set-up the sampler's whole-run readings also hold, however short the loop."""
    ends = _end_readings(steps, readings)
    if ends is None:
        return None
    first, last = ends
    elapsed = last.end_s - first.end_s
    if elapsed < MIN_READ_S:
        return None
    return max(0.0, (last.process_cpu_s - first.process_cpu_s) / elapsed)


def _end_readings(
    steps: Sequence[StepTiming], readings: Sequence[StepCpu]
) -> tuple[StepCpu, StepCpu] | None:
    """The first and last readings taken within ``steps`` (None: fewer than two)."""
    if not steps:
        return None
    inside = [r for r in readings if steps[0].index <= r.index <= steps[-1].index]
    return (inside[0], inside[-1]) if len(inside) >= 2 else None
