"""How busy the GPU was in the trace's window, as bounds where its GPU timeline is partial.

Which reading bounds which way (every consumer of the busy share or the idle gaps reads them
here: the verdict, the host's waits, the what-if, the rules through ``rules.common``):

- The timeline's clocked events each ran when and as long as they say. A *partial* timeline
  (``GpuTimeline.partial``: CUPTI left some GPU events without timestamps, ts 0 / dur 0) leaves
  the rest out: its busy share, a kernel family's share and a phase's GPU time are LOWER bounds;
  its idle time and each idle cause (host wait, data wait, sync...) UPPER bounds; how long the
  GPU ran on after the host (``host_ahead_us``) a lower bound.
- NVML's utilization is the share of its sample periods (~1/6 s) in which any kernel ran: over
  the same time, at least the kernels' busy share (an H100 read 69% where the trace read 49%,
  an H200 83% against 64%). It is the UPPER end only where it was read inside the steps on
  enough ticks (``InSteps.read``), or where no step clock split its ticks (a reading handed in
  with a trace file: taken as given). Where too few ticks fell inside the steps, the run's mean
  is mostly the start-up (GPU idle) and, with a tick or two, no bound either way: the H100's
  autocast MLP read NVML 58% over its run (one tick inside the steps) where its complete trace
  read 84% busy. There the upper end is not known (``high`` None), and a decision reads it as
  anything up to 100%.
- A complete timeline measures: ``low == high``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.records import Analysis

__all__ = ["GpuBusyBounds", "gpu_busy_bounds", "nvml_ceiling"]


@dataclass(frozen=True)
class GpuBusyBounds:
    """How busy the GPU was in the timeline's window, as far as measured: ``low`` the clocked
    events' busy share, ``high`` the most it can be (``low`` on a complete timeline; NVML inside
    the steps on a partial one; None: partial, and nothing bounds it above)."""

    low: float
    high: float | None
    unclocked_events: int  # GPU events the timeline holds without timestamps (0: measured)

    @property
    def partial(self) -> bool:
        return self.unclocked_events > 0

    @property
    def unseen(self) -> float | None:
        """The most busy time no clocked event shows, as a share of the window (0: measured);
        None: not known (a partial timeline, no ceiling)."""
        return None if self.high is None else self.high - self.low

    @property
    def top(self) -> float:
        """The upper end a decision reads: ``high``, or 100% where nothing bounds it."""
        return 1.0 if self.high is None else self.high

    def idle_least(self, share: float) -> float:
        """The least an idle share the timeline read (an upper bound where partial) can be: less
        all the busy time no clocked event shows (it may fill exactly those gaps), at least 0."""
        return max(0.0, share - (1.0 - self.low if self.high is None else self.high - self.low))


def nvml_ceiling(analysis: Analysis) -> float | None:
    """NVML's busy share where it bounds the timeline's above: read inside the steps on enough
    ticks (``InSteps.read``). Where the step clock found too few ticks inside the steps, the
    run's mean is mostly the start-up and bounds nothing (None). Where no step clock split the
    ticks at all (``in_steps`` None: a reading handed in with a trace file), the mean is taken
    as given."""
    util = analysis.utilization
    steps = util.in_steps
    if steps is None:
        return util.nvml_busy
    if not steps.read or steps.gpu_util_mean_pct is None:
        return None
    return steps.gpu_util_mean_pct / 100.0


def gpu_busy_bounds(analysis: Analysis) -> GpuBusyBounds | None:
    """The GPU's busy share in the timeline's window, bounded (``GpuBusyBounds``); None: no
    clocked GPU window."""
    gpu = analysis.gpu
    if gpu is None or gpu.window_us <= 0:
        return None
    low = gpu.busy_share
    if not gpu.partial:
        return GpuBusyBounds(low, low, 0)
    nvml = nvml_ceiling(analysis)
    high = None if nvml is None else min(1.0, max(low, nvml))
    return GpuBusyBounds(low, high, gpu.unclocked_events)
