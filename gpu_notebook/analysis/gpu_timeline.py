"""GPU busy/idle time in a window of a Kineto trace, idle causes, copies and kernel time by phase.

Definitions
-----------
*GPU activity* is every ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` event of the trace, on all
devices and streams together. One trace file is one rank, normally one device, so this is
Holistic Trace Analysis's per-rank view (its temporal breakdown merges all streams of a rank);
``GpuTimeline.devices`` says which devices were merged.

*busy* is the union of the activity intervals clipped to the window; *idle* = window - busy.

*Window*: the caller's ``window`` (trace microseconds), else the span of the recorded steps
(step marks or ``ProfilerStep#`` ranges, as in ``phases.step_bounds``), else the span of the GPU
activity (first start to last end: HTA's temporal-breakdown denominator).

Idle causes follow HTA's idle-time breakdown (``hta/analyzers/breakdown_analysis.py``,
``get_idle_time_breakdown`` / ``_analyze_idle_time_for_stream``): HTA walks each stream's kernels
in time order and gives the gap before each kernel to

- *host wait* when the kernel's launch (the ``cuda_runtime`` event with the same
  ``correlation``) started after the previous kernel ended: the CPU had not enqueued work;
- else *kernel wait* when the gap is shorter than ``consecutive_kernel_delay`` (30 in trace
  units, i.e. 30 µs for Kineto JSON): launch overhead between back-to-back kernels;
- else *other* (e.g. waiting on an event from another stream).

HTA sums these per stream, so its totals do not add up to the GPU's idle time. Here the same
rules run on the gaps of the *merged* timeline, so host + kernel + other == idle exactly: the
work that ends a gap is the activity starting there (the earliest-launched one when several
start together). The gap before the first activity counts from the window start (or the
activity's start when that is earlier); the gap after the last activity of the whole trace is
host wait (nothing more was launched); an activity with no matching launch cannot be host wait.

Kernel time by phase joins each kernel's ``correlation`` to its launch and asks
``phases.phase_at`` which phase the host thread was in at the launch's timestamp; a kernel whose
launch is not in the trace goes to "unattributed".

Tensor-core kernels are recognised by name (see ``TENSOR_CORE_PATTERN``): cuBLAS/cuDNN/CUTLASS
encode the MMA instruction shape or family in kernel names (``h884gemm``, ``s1688gemm``,
``s16816gemm``, ``xmma``, ``hmma``, ``wgmma``, ``tensorop``). A heuristic: kernels that use
tensor cores under other names (Triton, flash-attention) are missed, so the figure is a lower
bound. It is None when the window holds no kernel.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from gpu_notebook.analysis.phases import _merge, phase_at, step_bounds
from gpu_notebook.records import PHASES, CopyStats, GpuTimeline
from gpu_notebook.trace.kineto import Trace

__all__ = [
    "COMM_PATTERN",
    "KERNEL_WAIT_THRESHOLD_US",
    "TENSOR_CORE_PATTERN",
    "default_window",
    "gpu_timeline",
    "launch_ts_us",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# HTA's default consecutive_kernel_delay is 30 trace units; Kineto JSON is in microseconds.
KERNEL_WAIT_THRESHOLD_US = 30.0
COMM_PATTERN = re.compile(r"nccl|rccl", re.IGNORECASE)
TENSOR_CORE_PATTERN = re.compile(
    r"xmma|hmma|wgmma|imma|tensorop|(?:884|1688|16816|16832)_?gemm|gemm.*(?:884|1688|16816)",
    re.IGNORECASE,
)
_LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def launch_ts_us(trace: Trace, rows: IntArray) -> FloatArray:
    """Timestamp of the host launch (same ``correlation``) of each row; NaN when not found."""
    out = np.full(rows.size, np.nan)
    corr = trace.correlation[rows]
    launches = np.flatnonzero(trace.category_mask(*_LAUNCH_CATEGORIES) & (trace.correlation >= 0))
    if launches.size == 0 or rows.size == 0:
        return out
    order = np.argsort(trace.correlation[launches], kind="stable")
    keys = trace.correlation[launches][order]
    pos = np.clip(np.searchsorted(keys, corr), 0, keys.size - 1)
    found = (keys[pos] == corr) & (corr >= 0)
    out[found] = trace.ts_us[launches[order[pos[found]]]]
    return out


def default_window(trace: Trace, host_tid: int | None = None) -> tuple[float, float] | None:
    """The recorded steps' span, else the GPU activity span; None without GPU activity."""
    bounds = step_bounds(trace, host_tid)
    if bounds is not None and bounds.source != "span":
        return bounds.span_us
    gpu = trace.gpu_mask
    if not gpu.any():
        return None
    return float(trace.ts_us[gpu].min()), float(trace.end_us[gpu].max())


def _name_table(trace: Trace, pattern: re.Pattern[str]) -> BoolArray:
    return np.fromiter(
        (bool(pattern.search(n)) for n in trace.names), dtype=np.bool_, count=len(trace.names)
    )


def gpu_timeline(
    trace: Trace,
    window: tuple[float, float] | None = None,
    *,
    host_tid: int | None = None,
    kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US,
) -> GpuTimeline | None:
    """GPU busy/idle in ``window`` (trace µs); None when the trace has no GPU activity."""
    gpu_rows = np.flatnonzero(trace.gpu_mask)
    if gpu_rows.size == 0:
        return None
    if window is None:
        window = default_window(trace, host_tid)
        assert window is not None  # the trace has GPU activity
    w0_us, w1_us = float(window[0]), float(max(window[1], window[0]))
    width = round((w1_us - w0_us) * 1000.0)

    # Integer ns relative to the window start: exact sums, busy + idle == window.
    start = np.rint((trace.ts_us[gpu_rows] - w0_us) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[gpu_rows] * 1000.0).astype(np.int64)
    launch_us = launch_ts_us(trace, gpu_rows)
    known = ~np.isnan(launch_us)
    launch = np.zeros(gpu_rows.size, dtype=np.int64)
    launch[known] = np.rint((launch_us[known] - w0_us) * 1000.0).astype(np.int64)

    busy_ns = _clipped_union_ns(start, end, width)
    wait_host_ns, wait_kernel_ns, wait_other_ns = _idle_causes_ns(
        start, end, launch, known, width, round(kernel_wait_threshold_us * 1000.0)
    )

    clipped = np.clip(end, 0, width) - np.clip(start, 0, width)
    # Overlapping the window; a zero-length event counts when it sits inside it.
    in_window = (start < width) & ((end > 0) | (start >= 0))
    cat = trace.cat_id[gpu_rows]
    name = trace.name_id[gpu_rows]
    is_kernel = in_window & (cat == _category_id(trace, "kernel"))
    is_memcpy = in_window & (cat == _category_id(trace, "gpu_memcpy"))
    is_memset = in_window & (cat == _category_id(trace, "gpu_memset"))

    tensor_core_us: float | None = None
    if is_kernel.any():
        tc = _name_table(trace, TENSOR_CORE_PATTERN)[name] & is_kernel
        tensor_core_us = int(clipped[tc].sum()) / 1000.0
    comm = _name_table(trace, COMM_PATTERN)[name] & is_kernel

    devices = np.where(trace.device[gpu_rows] >= 0, trace.device[gpu_rows], trace.pid[gpu_rows])
    return GpuTimeline(
        window_us=width / 1000.0,
        busy_us=busy_ns / 1000.0,
        idle_us=(width - busy_ns) / 1000.0,
        idle_host_wait_us=wait_host_ns / 1000.0,
        idle_kernel_wait_us=wait_kernel_ns / 1000.0,
        idle_other_us=wait_other_ns / 1000.0,
        kernel_us=int(clipped[is_kernel].sum()) / 1000.0,
        comm_us=int(clipped[comm].sum()) / 1000.0,
        memset_us=int(clipped[is_memset].sum()) / 1000.0,
        copies=_copies(trace, gpu_rows[is_memcpy], clipped[is_memcpy]),
        gpu_phase_us=_kernel_phases(trace, launch_us[is_kernel], clipped[is_kernel], host_tid),
        tensor_core_kernel_us=tensor_core_us,
        devices=tuple(sorted(set(devices[in_window].tolist()))),
    )


def _category_id(trace: Trace, category: str) -> int:
    try:
        return trace.categories.index(category)
    except ValueError:
        return -1  # matches no row


def _clipped_union_ns(start: IntArray, end: IntArray, width: int) -> int:
    s, e = _merge(np.clip(start, 0, width), np.clip(end, 0, width))
    return int((e - s).sum())


def _idle_causes_ns(
    start: IntArray,
    end: IntArray,
    launch: IntArray,
    known: BoolArray,
    width: int,
    threshold_ns: int,
) -> tuple[int, int, int]:
    """(host wait, kernel wait, other) ns of the idle time inside [0, width)."""
    s, e = _merge(start, end)
    if s.size == 0:
        return width, 0, 0  # nothing ran: the GPU waited for work all along
    # The work that ends each gap: activities starting exactly where a merged interval starts.
    nonempty = end > start
    k = np.searchsorted(s, start, side="right") - 1
    opener = nonempty & (k >= 0) & (start == s[np.maximum(k, 0)]) & known
    no_launch = np.iinfo(np.int64).max
    first_launch = np.full(s.size, no_launch, dtype=np.int64)
    np.minimum.at(first_launch, k[opener], launch[opener])
    has_launch = first_launch != no_launch

    # Gap j ends where merged interval j starts; gap 0 is the one before all activity.
    gap_start = np.empty(s.size, dtype=np.int64)
    gap_start[0] = min(0, int(s[0]))
    gap_start[1:] = e[:-1]
    gap_end = s
    host = has_launch & (first_launch > gap_start)
    kernel = ~host & ((gap_end - gap_start) < threshold_ns)
    length = np.maximum(np.minimum(gap_end, width) - np.maximum(gap_start, 0), 0)

    host_ns = int(length[host].sum())
    kernel_ns = int(length[kernel].sum())
    other_ns = int(length[~host & ~kernel].sum())
    # After the trace's last activity nothing else was launched: the GPU waits on the host.
    host_ns += max(0, width - max(int(e[-1]), 0))
    return host_ns, kernel_ns, other_ns


def _copies(trace: Trace, rows: IntArray, clipped_ns: IntArray) -> tuple[CopyStats, ...]:
    if rows.size == 0:
        return ()
    names, inverse = np.unique(trace.name_id[rows], return_inverse=True)
    nbytes = trace.bytes[rows]
    out: list[CopyStats] = []
    for g, name_id in enumerate(names.tolist()):
        sel = inverse == g
        b = nbytes[sel]
        kind = trace.names[name_id]
        out.append(
            CopyStats(
                kind=kind.removeprefix("Memcpy ").strip() or kind,
                count=int(sel.sum()),
                duration_us=int(clipped_ns[sel].sum()) / 1000.0,
                bytes=int(b[b >= 0].sum()) if (b >= 0).any() else None,
            )
        )
    out.sort(key=lambda c: (-c.duration_us, c.kind))
    return tuple(out)


def _kernel_phases(
    trace: Trace, launch_us: FloatArray, clipped_ns: IntArray, host_tid: int | None
) -> dict[str, float]:
    phase = np.full(launch_us.size, PHASES.index("unattributed"), dtype=np.int64)
    known = ~np.isnan(launch_us)
    locator = phase_at(trace, host_tid) if known.any() else None
    if locator is not None:
        phase[known] = locator(launch_us[known])
    totals = np.bincount(phase, weights=clipped_ns.astype(np.float64), minlength=len(PHASES))
    return {p: float(totals[i]) / 1000.0 for i, p in enumerate(PHASES)}
