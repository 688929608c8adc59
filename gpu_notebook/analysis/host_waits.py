"""How long the host thread waited on the GPU, read on the host alone: what stands in for the GPU
timeline when the trace has no usable one, to confirm or rule out a busy GPU.

Without GPU timestamps (CUPTI wrote ``ts 0, dur 0`` for every GPU event and CUDA call of a
pageable-copy loop, twice on an H200 and twice on an H100; a trace recorded without CUDA
activities) the GPU's busy share comes from NVML, whose utilization is the share of its sample
periods (~1/6 s) in which *any* kernel ran: an upper bound on the time kernels ran. On one H100,
an MLP whose GPU time is about its launch time read 49% busy on its trace and 69% and 82% on
NVML in two runs of the same code: read as the busy share, the second was gpu-bound.

A GPU that sets the pace makes the host wait for it: in a sync (``.item()``, a synchronize,
a device-to-host read, the trace's "sync" phase), in a launch that finds CUDA's queue full (the
operator that launches holds the wait: the typical operator is long), or somewhere outside the
profiled window (the host issued the window's steps faster than the run's steps took). A host
that waited less than ``WAITS_LINE`` of its step in all three ways was itself busy for the rest:
the GPU cannot be busy past the GPU-bound line *and* set the pace, whatever NVML read.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.records import Analysis

__all__ = ["WAITS_LINE", "HostWaits", "host_waits"]

# The step share the host must wait on the GPU for the GPU to set the pace past the GPU-bound
# line (verdict.GPU_BUSY, 80%): a host that waits less was busy more than 80% of the step itself.
WAITS_LINE = 0.2


@dataclass(frozen=True)
class HostWaits:
    """The host thread's waits on the GPU over the profiled steps, each a share of the step."""

    sync: float | None  # in device syncs (the trace's "sync" phase); None: not measured
    # The share of the run's typical step the window's own host time leaves: the host issued the
    # window's steps faster than the run's steps took, so it waited elsewhere (a full launch
    # queue, a sync after the window). None: not read (no window compared with the run).
    elsewhere: float | None
    op_us: float | None  # the typical host operator's time; None: not read
    small_op_us: float  # under this, no launch of the typical operator waited for a full queue
    # ``elsewhere`` rests only on a partial GPU timeline's lag (``analysis.gpu_bounds``: the
    # unclocked work may have run later still): a lower bound, which rules no wait out.
    elsewhere_least: bool = False

    @property
    def share(self) -> float | None:
        """The larger wait read (None: neither read)."""
        known = [x for x in (self.sync, self.elsewhere) if x is not None]
        return max(known) if known else None

    @property
    def waited(self) -> bool:
        """The host waited on the GPU a share at the line or past it: the GPU may set the pace."""
        share = self.share
        return share is not None and share >= WAITS_LINE

    @property
    def never_waited(self) -> bool:
        """Every way the host could wait on the GPU was read, and each stayed under the line."""
        return (
            self.sync is not None
            and self.sync < WAITS_LINE
            and not self.elsewhere_least
            and (self.elsewhere or 0.0) < WAITS_LINE
            and self.op_us is not None
            and self.op_us < self.small_op_us
        )


def host_waits(analysis: Analysis) -> HostWaits:
    """The typical profiled step's waits on the GPU (stalled steps left out, as the verdict
    reads them)."""
    analysis, _ = without_stalls(analysis)
    phases, host, shape, gpu = analysis.phases, analysis.host, analysis.shape, analysis.gpu
    sync = phases.share("sync") if phases is not None and phases.source == "trace" else None
    read: list[float] = []
    if shape is not None and shape.window_median_s and not shape.window_gpu_paced:
        run_s = shape.window_run_median_s
        if run_s > 0:
            read.append(max(0.0, 1.0 - shape.window_median_s / run_s))
    # The run's steps against the window's measure the wait; a partial timeline's lag alone
    # only says it was at least that long.
    least = not read and gpu is not None and gpu.partial
    if gpu is not None and gpu.window_us > 0:
        # What clocked GPU work there is ran on after the host had issued the steps: the GPU,
        # not the host, was behind (the window runs on to its end: GpuTimeline.host_ahead_us).
        read.append(min(1.0, gpu.host_ahead_us / gpu.window_us))
    elsewhere = max(read) if read else None
    return HostWaits(
        sync=sync,
        elsewhere=elsewhere,
        op_us=host.median_op_us if host is not None and host.ops_per_step >= 1 else None,
        small_op_us=host.small_op_us if host is not None else 0.0,
        elsewhere_least=least,
    )
