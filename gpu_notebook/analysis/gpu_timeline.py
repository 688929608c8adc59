"""GPU busy/idle time in a window of a Kineto trace, idle causes, copies and kernel time by phase.

Definitions
-----------
*GPU activity* is every ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` event of the trace, on all
devices and streams together. One trace file is one rank, normally one device, so this is
Holistic Trace Analysis's per-rank view (its temporal breakdown merges all streams of a rank);
``GpuTimeline.devices`` says which devices were merged.

*busy* is the union of the activity intervals clipped to the window; *idle* = window - busy.

*Window*: the caller's ``window`` (trace microseconds), else the span of the recorded steps
(step marks or ``ProfilerStep#`` ranges, as in ``phases.step_bounds``) run on to the end of the
last GPU activity launched inside them, else the GPU span. A host with no sync in its step runs
ahead of a busy GPU (CUDA queues the launches): it may issue the profiled steps in a tenth of
the time the GPU takes to run them, and a window that stopped with the host would see the GPU
idle while it ran the work of the steps before. ``host_ahead_us`` says how far the window ran on.
For the same reason the GPU may still be running work launched before the profiler started
(which it does not record) when the window opens: the first recorded activity then waits long
after its launch with nothing recorded running. When the host ran ahead at the window's end,
the window then opens where that first work starts (``queued_before_trace_us`` says how long
it waited): the GPU was busy, on work no event shows, not waiting for the host. (Without it
the first work can also start late for other reasons: CUPTI's first activity after the
profiler starts waits ~0.4 ms on an H200, seen on a host-bound loop.)
``GpuTimeline.window_source`` says which. The *GPU span* runs from the first to the last GPU
activity launched inside the trace (HTA's temporal-breakdown denominator, TraceLens's
``total_time``): work whose launch precedes the trace (the tail of a step before profiling
began) is left out of it, as TraceLens leaves it out of its tree. A step can be much longer
than its GPU span (host preprocessing before the first kernel): both figures are kept, so a
report can say which window a share describes.

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

A host wait is further split by what the host thread did meanwhile (``phases.PhaseLocator``):
a DataLoader wait or a host-side copy is *data*, a sync (``.item()``, ``cudaStreamSynchronize``)
is *sync*; the rest stays host wait. So host + data + sync + kernel + other == idle.

GPU time by phase joins each kernel, copy and memset to its launch (``correlation``: the
``cuda_runtime``/``cuda_driver`` call, ``cudaLaunchKernel``, ``hipExtModuleLaunchKernel``,
``cudaGraphLaunch``...) and takes the phase the host was in at that launch. A launch on another
thread inside a backward op (autograd's device threads, every torch since 1.8) is backward. A
kernel whose launch is not in the trace goes to "unattributed".

Communication follows HTA's comm/compute overlap and TraceLens's exposed communication: the
collective kernels' union, and the part of it during which no computation kernel runs
(*exposed*); copies count as exposed where no kernel runs. Collective kernels are recognised by
name (``COMM_PATTERN``: NCCL, RCCL, MSCCL, and the all-reduce / all-gather / reduce-scatter /
all-to-all families of custom and symmetric-memory collectives).

CUDA graphs: the kernels of a graph replay share the correlation of their ``cudaGraphLaunch`` /
``hipGraphLaunch``; they are busy GPU time like any other (``graph_us``). A *capture* records
launches whose kernels never run (they go into the graph): a trace where most kernel launches
have no kernel, or that begins a stream capture, is flagged ``capture``.

Tensor-core kernels are recognised by name (see ``TENSOR_CORE_PATTERN``): cuBLAS/cuDNN/CUTLASS
encode the MMA instruction shape or family in kernel names (``h884gemm``, ``s1688gemm``,
``s16816gemm``, ``xmma``, ``hmma``, ``wgmma``, ``tensorop``; cuBLASLt's Hopper kernels are
``nvjet_sm90_...``: an H100's bf16 autocast MLP ran its GEMMs in them, read as 1.4% tensor-core
work before they were named here), except the float32 ones cuBLAS
and cuDNN also name ``xmma``: ``sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...`` runs on the CUDA
cores (FFMA; seen on an H200, fp32 with TF32 off: 60% of an MLP's kernel time was read as
tensor-core work, and the precision finding stayed silent). A heuristic: kernels that use
tensor cores under other names (Triton, flash-attention) are missed, so the figure is a lower
bound. It is None when the window holds no kernel.
"""

from __future__ import annotations

import math
import re

import numpy as np

from gpu_notebook.analysis.gpu_line_steps import step_edges_ns, step_figures
from gpu_notebook.analysis.phases import (
    PhaseLocator,
    StepBounds,
    _merge,
    _subtract,
    backward_op_mask,
    phase_at,
    step_bounds,
    thread_pairs,
)
from gpu_notebook.analysis.tc_share import unclocked_rooms
from gpu_notebook.records import PHASES, CopyStats, GpuTimeline
from gpu_notebook.traces.kineto import BoolArray, FloatArray, IntArray, Trace

__all__ = [
    "COMM_PATTERN",
    "KERNEL_WAIT_THRESHOLD_US",
    "TENSOR_CORE_PATTERN",
    "default_window",
    "gpu_span",
    "gpu_timeline",
    "launch_rows",
    "launch_ts_us",
]

# HTA's default consecutive_kernel_delay is 30 trace units; Kineto JSON is in microseconds.
KERNEL_WAIT_THRESHOLD_US = 30.0
COMM_PATTERN = re.compile(
    r"nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce"
    r"|multimem",
    re.IGNORECASE,
)
TENSOR_CORE_PATTERN = re.compile(
    # Not the FP32 kernels cuBLAS/cuDNN name xmma too: "..._ffma_...", all-f32 types.
    r"^(?!.*(?:ffma|simt|_f32f32_f32f32_f32_))"
    r".*(?:xmma|hmma|wgmma|imma|tensorop|nvjet|(?:884|1688|16816|16832)_?gemm"
    r"|gemm.*(?:884|1688|16816))",
    re.IGNORECASE,
)
_LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
# Runtime/driver calls that put a kernel on a stream, CUDA and HIP alike: cudaLaunchKernel(ExC),
# cuLaunchKernel(Ex), cudaLaunchCooperativeKernel, hipLaunchKernel, hip(Ext)ModuleLaunchKernel.
_KERNEL_LAUNCH = re.compile(r"^(?:cuda|cu|hip)\w*Launch\w*Kernel", re.IGNORECASE)
_GRAPH_LAUNCH = re.compile(r"^(?:cuda|cu|hip)GraphLaunch", re.IGNORECASE)
_CAPTURE_CALL = re.compile(r"^(?:cuda|cu|hip)StreamBeginCapture", re.IGNORECASE)
# A capture records launches whose kernels run only at replay; a few lost kernels are not one.
_CAPTURE_MIN_LAUNCHES = 20
_CAPTURE_SHARE = 0.5


def launch_rows(trace: Trace, rows: IntArray) -> IntArray:
    """Row of the host launch (same ``correlation``) of each row; -1 when not in the trace."""
    out = np.full(rows.size, -1, dtype=np.int64)
    corr = trace.correlation[rows]
    launches = np.flatnonzero(trace.category_mask(*_LAUNCH_CATEGORIES) & (trace.correlation >= 0))
    if launches.size == 0 or rows.size == 0:
        return out
    order = np.argsort(trace.correlation[launches], kind="stable")
    keys = trace.correlation[launches][order]
    pos = np.clip(np.searchsorted(keys, corr), 0, keys.size - 1)
    found = (keys[pos] == corr) & (corr >= 0)
    out[found] = launches[order[pos[found]]]
    return out


def launch_ts_us(trace: Trace, rows: IntArray) -> FloatArray:
    """Timestamp of the host launch (same ``correlation``) of each row; NaN when not found."""
    launch = launch_rows(trace, rows)
    out = np.full(rows.size, np.nan)
    out[launch >= 0] = trace.ts_us[launch[launch >= 0]]
    return out


def gpu_span(trace: Trace) -> tuple[float, float] | None:
    """First start to last end of the GPU activity launched inside the trace (all activity when
    no launch is in it); None without GPU activity."""
    rows = np.flatnonzero(trace.gpu_mask)
    if rows.size == 0:
        return None
    launched = launch_rows(trace, rows) >= 0
    if launched.any():
        rows = rows[launched]
    return float(trace.ts_us[rows].min()), float(trace.end_us[rows].max())


def default_window(trace: Trace, host_tid: int | None = None) -> tuple[float, float] | None:
    """The recorded steps' span, else the GPU span; None without GPU activity."""
    bounds = step_bounds(trace, host_tid)
    if bounds is not None and bounds.source != "span":
        return bounds.span_us
    return gpu_span(trace)


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
        unclocked = int(trace.unclocked_gpu_mask.sum())
        # Activity with no clock reading: a GPU ran, and when is unknown (an empty window).
        return _unclocked_timeline(trace) if unclocked else None
    span = gpu_span(trace)
    assert span is not None  # the trace has GPU activity
    source: str = "caller"
    steps: StepBounds | None = None
    if window is None:
        bounds = step_bounds(trace, host_tid)
        if bounds is not None and bounds.source != "span":
            window, source, steps = bounds.span_us, "steps", bounds
        else:
            window, source = span, "gpu_span"
    w0_us, w1_us = float(window[0]), float(max(window[1], window[0]))
    launch_row = launch_rows(trace, gpu_rows)
    known = launch_row >= 0
    launch_us = np.full(gpu_rows.size, np.nan)
    launch_us[known] = trace.ts_us[launch_row[known]]
    host_ahead_us = 0.0
    if source == "steps":
        # The steps' work ends where the GPU finishes it: a host that runs ahead (no sync in the
        # step) issues the window's kernels long before they run.
        inside = (launch_us >= w0_us) & (launch_us < w1_us)
        if inside.any():
            host_ahead_us = max(0.0, float(trace.end_us[gpu_rows[inside]].max()) - w1_us)
        w1_us += host_ahead_us
    threshold_ns = round(kernel_wait_threshold_us * 1000.0)
    queued_us = 0.0
    if host_ahead_us * 1000.0 > threshold_ns:
        # The GPU was still on work launched before the profiler started: the window opens
        # where the first recorded work starts (what no event shows cannot be split).
        opens = _first_queued_us(trace, gpu_rows, launch_us, w0_us, w1_us, threshold_ns / 1000.0)
        if opens is not None:
            queued_us = opens[1] - max(w0_us, opens[0])
            w0_us = opens[1]
    width = round((w1_us - w0_us) * 1000.0)

    # Integer ns relative to the window start: exact sums, busy + idle == window.
    start = np.rint((trace.ts_us[gpu_rows] - w0_us) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[gpu_rows] * 1000.0).astype(np.int64)
    launch = np.zeros(gpu_rows.size, dtype=np.int64)
    launch[known] = np.rint((launch_us[known] - w0_us) * 1000.0).astype(np.int64)

    busy_iv = _clip_merge(start, end, width)
    busy_ns = _length_ns(busy_iv)
    locator = phase_at(trace, host_tid) if known.any() else None
    gaps = _gaps_ns(start, end, launch, known, width, threshold_ns)
    wait_host_ns, wait_kernel_ns, wait_other_ns, wait_data_ns, wait_sync_ns = _idle_causes(
        gaps, locator, w0_us
    )
    wait_model_ns = _model_wait_ns(gaps, locator, w0_us)

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
    compute_iv = _clip_merge(start[is_kernel & ~comm], end[is_kernel & ~comm], width)
    comm_iv = _clip_merge(start[comm], end[comm], width)
    memory_iv = _clip_merge(start[is_memcpy | is_memset], end[is_memcpy | is_memset], width)
    kernels_iv = _merge(
        np.concatenate([compute_iv[0], comm_iv[0]]), np.concatenate([compute_iv[1], comm_iv[1]])
    )
    exposed_iv = _subtract(*comm_iv, *compute_iv)
    edges = (
        None
        if steps is None
        else step_edges_ns(
            steps.start_us, steps.end_us, launch_us, trace.end_us[gpu_rows], w0_us, width
        )
    )
    per_step = (
        ()
        if edges is None
        else step_figures(
            edges, busy_iv, exposed_iv, gaps, lambda g: _data_sync_ns(g, locator, w0_us)
        )
    )

    # The GPU span's busy time, on the activity it is made of (launched inside the trace).
    span_start = np.rint((trace.ts_us[gpu_rows] - span[0]) * 1000.0).astype(np.int64)
    span_width = round((span[1] - span[0]) * 1000.0)
    own = known if known.any() else np.ones(gpu_rows.size, dtype=np.bool_)
    span_end = span_start + (end - start)
    span_busy_ns = _clipped_union_ns(span_start[own], span_end[own], span_width)

    graph = _launch_name_table(trace, _GRAPH_LAUNCH)
    from_graph = known & graph[np.where(known, trace.name_id[np.maximum(launch_row, 0)], 0)]
    # An unclocked kernel ran all the same (when is what is unknown): its launch had work.
    ran_rows = np.flatnonzero(trace.gpu_mask | trace.unclocked_gpu_mask)
    launches, without_work, capture = _launch_census(trace, ran_rows)

    rooms = unclocked_rooms(trace, _name_table(trace, TENSOR_CORE_PATTERN), w0_us, width)
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
        gpu_phase_us=_gpu_phases(trace, launch_row, in_window, clipped, locator),
        tensor_core_kernel_us=tensor_core_us,
        devices=tuple(sorted(set(devices[in_window].tolist()))),
        window_source=source,  # type: ignore[arg-type]
        window_start_us=w0_us,
        span_us=span_width / 1000.0,
        span_busy_us=span_busy_ns / 1000.0,
        before_trace_us=int(clipped[in_window & ~known].sum()) / 1000.0 if known.any() else 0.0,
        queued_before_trace_us=queued_us,
        host_ahead_us=host_ahead_us,
        idle_data_wait_us=wait_data_ns / 1000.0,
        idle_sync_wait_us=wait_sync_ns / 1000.0,
        idle_model_wait_us=None if wait_model_ns is None else wait_model_ns / 1000.0,
        compute_us=_length_ns(compute_iv) / 1000.0,
        comm_busy_us=_length_ns(comm_iv) / 1000.0,
        comm_exposed_us=_length_ns(exposed_iv) / 1000.0,
        memcpy_exposed_us=_length_ns(_subtract(*memory_iv, *kernels_iv)) / 1000.0,
        collectives=int(comm.sum()),
        graph_launches=int((trace.category_mask(*_LAUNCH_CATEGORIES) & graph[trace.name_id]).sum()),
        graph_us=int(clipped[from_graph & in_window].sum()) / 1000.0,
        kernel_launches=launches,
        launches_without_work=without_work,
        capture=capture,
        unclocked_events=int(trace.unclocked_gpu_mask.sum()),
        unclocked_tail=_unclocked_tail(trace),
        unclocked_collectives=int(
            (_name_table(trace, COMM_PATTERN)[trace.name_id] & trace.unclocked_gpu_mask).sum()
        ),
        unclocked_tensor_core_kernels=rooms.tensor_core,
        unclocked_other_kernels=rooms.other,
        unclocked_tensor_core_room_us=rooms.tensor_core_room_us,
        unclocked_other_room_us=rooms.other_room_us,
        steps=per_step,
    )


def _unclocked_tail(trace: Trace) -> int:
    """Unclocked GPU events that may have run after all the clocked work: those launched after
    the last clocked event launched on their stream (or with no launch, or no stream, known).
    A stream runs its work in launch order, so the rest ended before a clocked event started:
    they leave the clocked work's end (the window's, ``host_ahead_us``) as measured."""
    unclocked = np.flatnonzero(trace.unclocked_gpu_mask)
    if unclocked.size == 0:
        return 0
    clocked = np.flatnonzero(trace.gpu_mask)
    last: dict[tuple[int, int, int], float] = {}
    for key, at in zip(
        _streams(trace, clocked), launch_ts_us(trace, clocked).tolist(), strict=True
    ):
        if not math.isnan(at):
            last[key] = max(at, last.get(key, at))
    tail = 0
    for key, at in zip(
        _streams(trace, unclocked), launch_ts_us(trace, unclocked).tolist(), strict=True
    ):
        ahead = last.get(key)
        if math.isnan(at) or ahead is None or at > ahead:
            tail += 1
    return tail


def _streams(trace: Trace, rows: IntArray) -> list[tuple[int, int, int]]:
    """Each row's stream: (process, thread, stream) as the trace names them."""
    return list(
        zip(
            trace.pid[rows].tolist(),
            trace.tid[rows].tolist(),
            trace.stream[rows].tolist(),
            strict=True,
        )
    )


def _unclocked_timeline(trace: Trace) -> GpuTimeline:
    """No activity with a clock reading: an empty window; the copies keep their kind, count and
    bytes (what ran is known, when and how long is not)."""
    unclocked = trace.unclocked_gpu_mask
    memcpy = np.flatnonzero(unclocked & (trace.cat_id == _category_id(trace, "gpu_memcpy")))
    return GpuTimeline(
        copies=_copies(trace, memcpy, np.zeros(memcpy.size, dtype=np.int64)),
        window_us=0.0,
        busy_us=0.0,
        idle_us=0.0,
        idle_host_wait_us=0.0,
        idle_kernel_wait_us=0.0,
        idle_other_us=0.0,
        kernel_us=0.0,
        comm_us=0.0,
        memset_us=0.0,
        unclocked_events=int(unclocked.sum()),
    )


def _first_queued_us(
    trace: Trace,
    gpu_rows: IntArray,
    launch_us: FloatArray,
    w0_us: float,
    w1_us: float,
    threshold_us: float,
) -> tuple[float, float] | None:
    """(launch, start) of the window's first recorded activity when it waited behind work the
    trace does not show; None when it did not.

    It was launched at ``launch`` and began at ``start``: when nothing recorded ran in between
    and the wait is longer than a launch's latency (the kernel-wait threshold), its stream was
    still running work launched before the profiler started (a host that runs ahead queues
    whole steps), and the profiler records only what is launched while it runs.
    """
    ts, end = trace.ts_us[gpu_rows], trace.end_us[gpu_rows]
    live = (end > w0_us) & (ts < w1_us)
    if not live.any() or (ts[live] <= w0_us).any():
        return None
    first = int(np.flatnonzero(live)[np.argmin(ts[live])])
    launched = float(launch_us[first])
    if np.isnan(launched) or float(ts[first]) - max(w0_us, launched) <= threshold_us:
        return None
    return launched, float(ts[first])


def _category_id(trace: Trace, category: str) -> int:
    try:
        return trace.categories.index(category)
    except ValueError:
        return -1  # matches no row


def _launch_name_table(trace: Trace, pattern: re.Pattern[str]) -> BoolArray:
    return _name_table(trace, pattern)


def _launch_census(trace: Trace, gpu_rows: IntArray) -> tuple[int, int, bool]:
    """(kernel launch calls, those whose kernel never ran, whether this is a graph capture)."""
    runtime = trace.category_mask(*_LAUNCH_CATEGORIES)
    launch_names = _name_table(trace, _KERNEL_LAUNCH)
    rows = np.flatnonzero(runtime & launch_names[trace.name_id])
    ran = trace.correlation[gpu_rows]  # np.isin finds each in it: no unique needed
    ran = ran[ran >= 0]
    corr = trace.correlation[rows]
    without = int((~np.isin(corr, ran)).sum()) if rows.size else 0
    began = bool((runtime & _name_table(trace, _CAPTURE_CALL)[trace.name_id]).any())
    capture = began or (
        rows.size >= _CAPTURE_MIN_LAUNCHES and without >= _CAPTURE_SHARE * rows.size
    )
    return int(rows.size), without, capture


def _clip_merge(start: IntArray, end: IntArray, width: int) -> tuple[IntArray, IntArray]:
    return _merge(np.clip(start, 0, width), np.clip(end, 0, width))


def _length_ns(iv: tuple[IntArray, IntArray]) -> int:
    return int((iv[1] - iv[0]).sum())


def _clipped_union_ns(start: IntArray, end: IntArray, width: int) -> int:
    return _length_ns(_clip_merge(start, end, width))


# Gap causes, as HTA names them; the host waits are split further by what the host did.
_HOST, _KERNEL, _OTHER = 0, 1, 2


def _gaps_ns(
    start: IntArray,
    end: IntArray,
    launch: IntArray,
    known: BoolArray,
    width: int,
    threshold_ns: int,
) -> tuple[IntArray, IntArray, IntArray]:
    """The idle gaps inside [0, width) as (start, end, cause) arrays (window-relative ns)."""
    s, e = _merge(start, end)
    if s.size == 0:
        # Nothing ran: the GPU waited for work all along.
        return np.zeros(1, np.int64), np.full(1, width, np.int64), np.zeros(1, np.int64)
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
    cause = np.where(host, _HOST, np.where(kernel, _KERNEL, _OTHER)).astype(np.int64)
    # After the trace's last activity nothing else was launched: the GPU waits on the host.
    tail_start = max(int(e[-1]), 0)
    gs = np.append(np.clip(gap_start, 0, width), min(tail_start, width))
    ge = np.append(np.clip(gap_end, 0, width), width)
    cause = np.append(cause, _HOST)
    keep = ge > gs
    return gs[keep], ge[keep], cause[keep]


def _idle_causes(
    gaps: tuple[IntArray, IntArray, IntArray], locator: PhaseLocator | None, w0_us: float
) -> tuple[int, int, int, int, int]:
    """(host wait, kernel wait, other, data wait, sync wait) ns of the idle gaps."""
    gs, ge, cause = gaps
    length = ge - gs
    host = cause == _HOST
    data_ns = sync_ns = 0
    if locator is not None and host.any():
        # The host thread's phase during each host wait: painted levels, highest wins.
        a = locator.to_ns(w0_us + gs[host] / 1000.0)
        b = a + length[host]
        covered = locator.covered_ns(a, b)
        level = {p: i for i, p in enumerate(locator.level_phases)}
        at = [covered[level[p] - 1] for p in ("data", "copy", "sync")]
        sync_ns = int(at[2].sum())
        data_ns = int((at[0] - at[2]).sum())  # data and host copies: moving the input
    host_ns = int(length[host].sum()) - data_ns - sync_ns
    return (
        host_ns,
        int(length[cause == _KERNEL].sum()),
        int(length[cause == _OTHER].sum()),
        data_ns,
        sync_ns,
    )


def _data_sync_ns(
    gaps: tuple[IntArray, IntArray, IntArray], locator: PhaseLocator | None, w0_us: float
) -> tuple[int, int]:
    """(data wait, sync wait) ns of the idle gaps (``_idle_causes``)."""
    causes = _idle_causes(gaps, locator, w0_us)
    return causes[3], causes[4]


def _model_wait_ns(
    gaps: tuple[IntArray, IntArray, IntArray], locator: PhaseLocator | None, w0_us: float
) -> int | None:
    """ns of the host- and kernel-wait gaps while the host thread ran the model's forward or
    backward (paint levels forward and backward; the levels above them, the optimizer, data and
    syncs, are not the model's). None: no locator."""
    gs, ge, cause = gaps
    waits = (cause == _HOST) | (cause == _KERNEL)
    if locator is None:
        return None
    if not waits.any():
        return 0
    a = locator.to_ns(w0_us + gs[waits] / 1000.0)
    b = a + (ge[waits] - gs[waits])
    covered = locator.covered_ns(a, b)
    level = {p: i for i, p in enumerate(locator.level_phases)}
    # covered[L - 1]: by ranges of level >= L; forward and backward are the two levels below
    # the optimizer's.
    return int((covered[level["forward"] - 1] - covered[level["optimizer"] - 1]).sum())


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


def _gpu_phases(
    trace: Trace,
    launch_row: IntArray,
    in_window: BoolArray,
    clipped_ns: IntArray,
    locator: PhaseLocator | None,
) -> dict[str, float]:
    """GPU time in the window by the host phase of each activity's launch."""
    phase = np.full(launch_row.size, PHASES.index("unattributed"), dtype=np.int64)
    known = launch_row >= 0
    if locator is not None and known.any():
        rows = launch_row[known]
        phase[known] = locator(trace.ts_us[rows])
        # Launched from another thread inside a backward op (autograd's device threads).
        pid, tid = locator.host
        elsewhere = (trace.pid[rows] != pid) | (trace.tid[rows] != tid)
        if elsewhere.any():
            in_backward = _inside(trace, backward_op_mask(trace), rows[elsewhere])
            sub = phase[known]
            idx = np.flatnonzero(elsewhere)[in_backward]
            sub[idx] = PHASES.index("backward")
            phase[known] = sub
    sel = in_window
    totals = np.bincount(
        phase[sel], weights=clipped_ns[sel].astype(np.float64), minlength=len(PHASES)
    )
    return {p: float(totals[i]) / 1000.0 for i, p in enumerate(PHASES)}


def _inside(trace: Trace, ranges: BoolArray, rows: IntArray) -> BoolArray:
    """Whether each row starts inside one of the ``ranges`` rows on its own thread."""
    out = np.zeros(rows.size, dtype=np.bool_)
    cand = np.flatnonzero(ranges)
    if cand.size == 0 or rows.size == 0:
        return out
    for pid, tid in thread_pairs(trace.pid[cand], trace.tid[cand]):
        on = cand[(trace.pid[cand] == pid) & (trace.tid[cand] == tid)]
        mine = (trace.pid[rows] == pid) & (trace.tid[rows] == tid)
        if not mine.any():
            continue
        s, e = _merge(
            np.rint(trace.ts_us[on] * 1000.0).astype(np.int64),
            np.rint(trace.end_us[on] * 1000.0).astype(np.int64),
        )
        t = np.rint(trace.ts_us[rows[mine]] * 1000.0).astype(np.int64)
        k = np.searchsorted(s, t, side="right") - 1
        out[np.flatnonzero(mine)] = (k >= 0) & (t < e[np.maximum(k, 0)])
    return out
