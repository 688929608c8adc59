"""Split each recorded step of a Kineto trace into host phases (data, forward, backward, ...).

How a step is painted
---------------------
Only the host thread's ``cpu_op`` / ``user_annotation`` / ``cuda_runtime`` / ``cuda_driver``
events are used, with two exceptions. Backward ops (``backward_op_mask``: autograd's
``autograd::engine::evaluate_function*``, ``torch::autograd::*`` and the ``*Backward<N>`` /
``*_backward`` families) on *other* threads of the same process also paint "backward", because
on CUDA the autograd engine runs backward on its own device thread while the main thread only
waits inside ``loss.backward()`` (seen in the V100/A100 reference traces); without them a GPU
run's backward reads as "unattributed". And module ranges that ``with_modules`` / ``with_stack``
traces carry as ``python_function`` events (``nn.Module: Name_0``) mark forward.

A trace with no backward op and no optimizer range anywhere is *inference*
(``PhaseBreakdown.workload``): there every operator of the host thread is the model's forward
(data, copy and sync ranges still win where they overlap).

Ranges are painted by precedence, higher wins where they overlap:
``forward < backward < optimizer < comm < data < copy < sync``. Time covered by some host event but
by no classified range is "other"; time covered by nothing is "unattributed". The computation
is a vectorised sweep on integer nanoseconds, so every step's phases sum exactly to its
duration (in ns; the microsecond floats are those integers divided by 1000).

Step boundaries, first that applies: the ``markers.STEP_MARK_PREFIX`` marks (N marks give N-1
steps), else ``ProfilerStep#N`` ranges, else the whole host span as one step.

"comm" is the time a collective is in flight in this process (gloo's ``gloo:all_reduce`` on
its worker threads, ``c10d::allreduce_`` and the ``nccl:*`` / ``record_param_comms`` ranges on
the host thread) while the host thread runs no other operator: the host waits for its peers
(DDP's ``work.wait()`` at the end of backward runs no operator of its own). A trace without any
collective leaves "comm" out of ``measured``: a one-process run has no peer to wait for. On a
GPU, collectives mostly wait on the device (NCCL kernels, ``GpuTimeline.comm_us``), not here.

"copy" is the host side of ``cudaMemcpy*`` / ``hipMemcpy*``, except the part of a
device-to-host copy spent before the copy itself started on the GPU: a DtoH copy (``.cpu()``,
``.item()``, ``.tolist()``) first waits for every kernel queued before it, and that wait is
"sync" (``_blocked_reads``). A trace without any GPU activity
(a CPU-only run) has no device to copy to, so "copy" is *not measured* there: it is left out of
``measured`` and out of the per-phase mappings rather than reported as a measured zero.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpu_notebook import markers
from gpu_notebook.records import PHASES, PhaseBreakdown, StepPhases
from gpu_notebook.traces.kineto import BoolArray, FloatArray, IntArray, Trace

__all__ = [
    "PhaseLocator",
    "StepBounds",
    "backward_op_mask",
    "find_host_thread",
    "has_collectives",
    "phase_at",
    "phase_breakdown",
    "step_bounds",
    "workload",
]

# Paint levels, lowest to highest precedence. Level 0 is "nothing covers this time".
_LEVEL_PHASES: tuple[str, ...] = (
    "unattributed",
    "other",
    "forward",
    "backward",
    "optimizer",
    "comm",
    "data",
    "copy",
    "sync",
)
_LEVEL_TO_PHASE_INDEX: IntArray = np.asarray([PHASES.index(p) for p in _LEVEL_PHASES], np.int64)
_PAINT_CATEGORIES = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
# Ranges of a collective in flight, on any thread of the process: gloo's worker-thread ranges,
# the c10d dispatcher ops (``c10d::allreduce_``, ``c10d::broadcast_``...), NCCL/RCCL/MPI/UCC
# host annotations and torch's ``record_param_comms``.
COLLECTIVE_PREFIXES = ("gloo:", "nccl:", "rccl:", "mpi:", "ucc:", "c10d::", "record_param_comms")
# Backward ops under every name torch has given them since 1.8 (the engine's evaluate_function
# wrapper, the autograd nodes themselves, ``aten::*_backward`` kernels they call).
_BACKWARD_NAME = re.compile(
    r"^autograd::engine::evaluate_function|^torch::autograd::|Backward\d*$|_backward$"
)
# Fewer aten ops than this (a few aten::empty around collectives) tell nothing of a model.
_MIN_MODEL_OPS = 10
_MODULE_PREFIX = "nn.Module: "  # python_function ranges of a module's forward (with_modules)


# ---------------------------------------------------------------------------------------------
# Interval helpers (integer nanoseconds)
# ---------------------------------------------------------------------------------------------


def _to_ns(trace: Trace, ts_us: FloatArray) -> IntArray:
    """Trace microseconds -> integer ns from the trace's first event (exact arithmetic after)."""
    origin = float(trace.ts_us.min()) if len(trace) else 0.0
    return np.rint((np.asarray(ts_us, dtype=np.float64) - origin) * 1000.0).astype(np.int64)


def _merge(starts: IntArray, ends: IntArray) -> tuple[IntArray, IntArray]:
    """Union of intervals as sorted, disjoint [start, end) pairs; empty intervals dropped."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # A new merged interval begins where a start lies beyond everything seen before it.
    new = np.empty(s.size, dtype=np.bool_)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return s[first], reach[last]


@dataclass(frozen=True)
class _Cover:
    """Disjoint sorted intervals with a prefix sum, to measure coverage of any window fast."""

    starts: IntArray
    ends: IntArray
    before: IntArray  # covered length before interval k

    @classmethod
    def of(cls, starts: IntArray, ends: IntArray) -> _Cover:
        s, e = _merge(starts, ends)
        before = np.zeros(s.size, dtype=np.int64)
        if s.size > 1:
            before[1:] = np.cumsum(e - s)[:-1]
        return cls(s, e, before)

    def covered_until(self, t: IntArray) -> IntArray:
        """Covered length in (-inf, t] for each t."""
        if self.starts.size == 0:
            return np.zeros(np.shape(t), dtype=np.int64)
        k = np.searchsorted(self.starts, t, side="right") - 1
        kc = np.maximum(k, 0)
        inside = np.clip(t - self.starts[kc], 0, self.ends[kc] - self.starts[kc])
        return np.where(k >= 0, self.before[kc] + inside, 0)

    def covered(self, a: IntArray, b: IntArray) -> IntArray:
        return self.covered_until(b) - self.covered_until(a)

    def contains(self, t: IntArray) -> BoolArray:
        if self.starts.size == 0:
            return np.zeros(np.shape(t), dtype=np.bool_)
        k = np.searchsorted(self.starts, t, side="right") - 1
        kc = np.maximum(k, 0)
        return (k >= 0) & (t < self.ends[kc])


# ---------------------------------------------------------------------------------------------
# Host thread and steps
# ---------------------------------------------------------------------------------------------


def _host_rows(trace: Trace) -> BoolArray:
    return trace.category_mask(*_PAINT_CATEGORIES)


def find_host_thread(trace: Trace) -> tuple[int, int] | None:
    """(pid, tid) of the training loop's thread, or None when the trace has no host events.

    The thread holding the step marks, else the one holding ``ProfilerStep#`` ranges, else the
    one with the most ``cpu_op`` time (union, so deep nesting does not count twice).
    """
    host = _host_rows(trace)
    for prefix in (markers.STEP_MARK_PREFIX, markers.PROFILER_STEP_PREFIX):
        rows = np.flatnonzero(host & trace.name_mask(prefix=prefix))
        if rows.size:
            return _most_common_thread(trace, rows)
    rows = np.flatnonzero(trace.category_mask("cpu_op"))
    if rows.size == 0:
        rows = np.flatnonzero(host)
    if rows.size == 0:
        return None
    best: tuple[int, int] | None = None
    best_us = -1
    for pid, tid in thread_pairs(trace.pid[rows], trace.tid[rows]):
        sel = rows[(trace.pid[rows] == pid) & (trace.tid[rows] == tid)]
        start = _to_ns(trace, trace.ts_us[sel])
        cover = _Cover.of(start, start + np.rint(trace.dur_us[sel] * 1000).astype(np.int64))
        total = int((cover.ends - cover.starts).sum())
        if total > best_us:
            best, best_us = (int(pid), int(tid)), total
    return best


def _sorted_unique(values: IntArray) -> IntArray:
    """``np.unique`` of mostly distinct values by one sort (numpy's hash table is slower there)."""
    out = np.sort(values)
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def _packed_threads(pid: IntArray, tid: IntArray) -> IntArray | None:
    """(pid, tid) packed into one int64 a pair (order-preserving), or None when one of them
    does not fit in 32 bits (then the callers unique the pairs as rows, slower)."""
    lo, hi = -(2**31), 2**31
    if pid.size and (pid.min() < lo or pid.max() >= hi or tid.min() < lo or tid.max() >= hi):
        return None
    return (pid.astype(np.int64) << 32) + (tid.astype(np.int64) - lo)


def thread_pairs(pid: IntArray, tid: IntArray) -> list[tuple[int, int]]:
    """The distinct (pid, tid) pairs, sorted as ``np.unique(..., axis=0)`` sorts them."""
    packed = _packed_threads(pid, tid)
    if packed is None:
        return [(int(p), int(t)) for p, t in np.unique(np.stack([pid, tid], axis=1), axis=0)]
    _, first = np.unique(packed, return_index=True)
    return [(int(p), int(t)) for p, t in zip(pid[first].tolist(), tid[first].tolist(), strict=True)]


def _most_common_thread(trace: Trace, rows: IntArray) -> tuple[int, int]:
    pid, tid = trace.pid[rows], trace.tid[rows]
    packed = _packed_threads(pid, tid)
    if packed is None:
        keys, counts = np.unique(np.stack([pid, tid], axis=1), axis=0, return_counts=True)
        p, t = keys[int(np.argmax(counts))].tolist()
        return int(p), int(t)
    values, counts = np.unique(packed, return_counts=True)
    # np.unique sorts the packed keys as it sorted the pairs: the first most common one wins.
    at = int(np.flatnonzero(packed == values[int(np.argmax(counts))])[0])
    return int(pid[at]), int(tid[at])


def _resolve_thread(trace: Trace, host_tid: int | None) -> tuple[int, int] | None:
    if host_tid is None:
        return find_host_thread(trace)
    rows = np.flatnonzero(_host_rows(trace) & (trace.tid == host_tid))
    if rows.size == 0:
        return None
    return _most_common_thread(trace, rows)


@dataclass(frozen=True)
class StepBounds:
    """Step boundaries on the trace clock (absolute microseconds), in time order."""

    index: tuple[int, ...]
    start_us: tuple[float, ...]
    end_us: tuple[float, ...]
    source: Literal["marks", "profiler_step", "span"]
    host: tuple[int, int]  # (pid, tid) of the host thread

    @property
    def span_us(self) -> tuple[float, float]:
        return (min(self.start_us), max(self.end_us))


def _number_after_hash(name: str, fallback: int) -> int:
    try:
        return int(name.rsplit("#", 1)[1])
    except (IndexError, ValueError):
        return fallback


def step_bounds(trace: Trace, host_tid: int | None = None) -> StepBounds | None:
    """The steps of the trace (see the module docstring for the rules); None without host events."""
    host = _resolve_thread(trace, host_tid)
    if host is None:
        return None
    on_thread = _host_rows(trace) & (trace.pid == host[0]) & (trace.tid == host[1])

    marks = np.flatnonzero(on_thread & trace.name_mask(prefix=markers.STEP_MARK_PREFIX))
    if marks.size >= 2:
        marks = marks[np.argsort(trace.ts_us[marks], kind="stable")]
        ts = trace.ts_us[marks]
        names = [trace.name_of(int(r)) for r in marks[:-1]]
        return StepBounds(
            index=tuple(_number_after_hash(n, i) for i, n in enumerate(names)),
            start_us=tuple(ts[:-1].tolist()),
            end_us=tuple(ts[1:].tolist()),
            source="marks",
            host=host,
        )

    ranges = np.flatnonzero(on_thread & trace.name_mask(prefix=markers.PROFILER_STEP_PREFIX))
    if ranges.size:
        ranges = ranges[np.argsort(trace.ts_us[ranges], kind="stable")]
        names = [trace.name_of(int(r)) for r in ranges]
        return StepBounds(
            index=tuple(_number_after_hash(n, i) for i, n in enumerate(names)),
            start_us=tuple(trace.ts_us[ranges].tolist()),
            end_us=tuple(trace.end_us[ranges].tolist()),
            source="profiler_step",
            host=host,
        )

    rows = np.flatnonzero(on_thread)
    return StepBounds(
        index=(0,),
        start_us=(float(trace.ts_us[rows].min()),),
        end_us=(float(trace.end_us[rows].max()),),
        source="span",
        host=host,
    )


# ---------------------------------------------------------------------------------------------
# Painting
# ---------------------------------------------------------------------------------------------


class PhaseLocator:
    """Maps trace timestamps to the phase the host thread was in (index into ``records.PHASES``).

    Built once per trace by ``phase_at``; calling it is vectorised.
    """

    level_phases: tuple[str, ...] = _LEVEL_PHASES  # the phase of each paint level, lowest first

    def __init__(
        self, trace: Trace, host: tuple[int, int], bounds: StepBounds | None = None
    ) -> None:
        self.host = host
        self._origin_us = float(trace.ts_us.min()) if len(trace) else 0.0
        # covers[L] = union of every range painted at level >= L (L = 1..7).
        self._covers: tuple[_Cover, ...] = _level_covers(trace, host, bounds)

    def __call__(self, ts_us: npt.ArrayLike) -> IntArray:
        t = np.rint((np.asarray(ts_us, dtype=np.float64) - self._origin_us) * 1000.0).astype(
            np.int64
        )
        level = np.zeros(t.shape, dtype=np.int64)
        for lv, cover in enumerate(self._covers, start=1):
            # Covers are nested (>= L+1 is inside >= L), so the last one containing t wins.
            level[cover.contains(t)] = lv
        return _LEVEL_TO_PHASE_INDEX[level]

    def covered_ns(self, start_ns: IntArray, end_ns: IntArray) -> list[IntArray]:
        """Per level L>=1: covered ns of [start, end) by ranges of level >= L."""
        return [c.covered(start_ns, end_ns) for c in self._covers]

    def to_ns(self, ts_us: npt.ArrayLike) -> IntArray:
        return np.rint((np.asarray(ts_us, dtype=np.float64) - self._origin_us) * 1000.0).astype(
            np.int64
        )


def _level_covers(
    trace: Trace, host: tuple[int, int], bounds: StepBounds | None = None
) -> tuple[_Cover, ...]:
    pid, tid = host
    same_pid = trace.pid == pid
    on_thread = trace.category_mask(*_PAINT_CATEGORIES) & same_pid & (trace.tid == tid)
    # Step boundaries are not work: a ProfilerStep range spans the whole step and would turn
    # every uncovered microsecond into "other".
    on_thread &= ~trace.name_mask(prefix=(markers.PROFILER_STEP_PREFIX, markers.STEP_MARK_PREFIX))
    is_runtime = trace.category_mask("cuda_runtime", "cuda_driver")
    autograd = trace.name_mask(prefix=markers.AUTOGRAD_PREFIX)
    backward_ops = backward_op_mask(trace)
    start = _to_ns(trace, trace.ts_us)
    end = start + np.rint(trace.dur_us * 1000.0).astype(np.int64)

    def spans(mask: BoolArray) -> tuple[IntArray, IntArray]:
        rows = np.flatnonzero(mask)
        return start[rows], end[rows]

    forward_marks = on_thread & trace.name_mask(prefix=markers.FORWARD_PREFIX)
    forward_marks |= (
        trace.category_mask("python_function")
        & same_pid
        & (trace.tid == tid)
        & trace.name_mask(prefix=_MODULE_PREFIX)
    )
    backward = (on_thread & trace.name_mask(names=(markers.BACKWARD,))) | (backward_ops & same_pid)
    optimizer = spans(
        on_thread
        & trace.name_mask(
            prefix=(markers.OPTIMIZER_STEP_PREFIX, markers.OPTIMIZER_ZERO_GRAD_PREFIX)
        )
    )
    # Closure optimizers (LBFGS, Lightning's automatic optimization, any ``step(closure)``) run
    # forward and backward inside ``Optimizer.step``: there they stay forward and backward, and
    # so do the ops autograd recorded (grad mode on; the update itself runs under no_grad), which
    # is how a forward shows up in a trace without our forward ranges.
    # Only what lies wholly inside one optimizer range is a closure's.
    opt_cover = _Cover.of(*optimizer)

    def inside_optimizer(mask: BoolArray) -> BoolArray:
        rows = np.flatnonzero(mask)
        k = np.searchsorted(opt_cover.starts, start[rows], side="right") - 1
        kc = np.maximum(k, 0)
        inside = np.zeros(len(trace), dtype=np.bool_)
        if opt_cover.starts.size:
            inside[rows] = (k >= 0) & (end[rows] <= opt_cover.ends[kc])
        return inside

    grad_mode = on_thread & trace.category_mask("cpu_op") & (trace.sequence >= 0) & ~autograd
    fwd_in = inside_optimizer(forward_marks | grad_mode)
    bwd_in = inside_optimizer(backward)
    closure_fwd, closure_bwd = _closure_blocks(start, end, fwd_in, bwd_in, opt_cover)
    # Where the step clock wrote each closure call's range (markers.CLOSURE), the closure is
    # known, not inferred: none of it is the update; its forward runs from its start to its
    # last backward, and what follows that backward (Lightning's on_before_optimizer_step
    # callbacks, a closure's logging: ops in grad mode that the inference reads as a forward)
    # is other, as the step clock counts it.
    closures = spans(on_thread & trace.name_mask(names=(markers.CLOSURE,)))
    if closures[0].size:
        closure_fwd = _forward_in_closures(
            closures, _union(spans(backward), closure_bwd), np.sort(start[fwd_in])
        )
    forward = _union(spans(forward_marks), closure_fwd)
    if bounds is not None and not forward_marks.any():
        # No hook of ours sits on modules: forward is inferred from the step's shape.
        data_mask = on_thread & trace.name_mask(prefix=markers.DATALOADER_PREFIX)
        forward = _union(
            forward,
            _inferred_forward(
                trace,
                bounds,
                start,
                end,
                backward=backward,
                data=data_mask,
                grad_mode=grad_mode,
            ),
        )
    if workload(trace) == "inference":
        # No backward, no optimizer: the host thread's operators and launches (a graph replay
        # included) are the model's forward.
        forward = _union(forward, spans(on_thread & ~trace.category_mask("user_annotation")))
    backward_spans = _union(spans(backward), closure_bwd)
    model = _union(forward, backward_spans)
    optimizer = _subtract(
        opt_cover.starts, opt_cover.ends, *_union(_union(closure_fwd, closure_bwd), closures)
    )
    if optimizer[0].size == 0 and not opt_cover.starts.size:
        bounds = step_bounds(trace, tid)
        step_starts = (
            _to_ns(trace, np.asarray(bounds.start_us)) if bounds else np.zeros(1, np.int64)
        )
        optimizer = _manual_updates(
            trace, on_thread, start, end, model, _merge(*spans(backward)), step_starts
        )

    # Python the host thread ran outside any operator (with_stack traces) is host work: other.
    python = trace.category_mask("python_function") & same_pid & (trace.tid == tid)
    levels: list[tuple[IntArray, IntArray]] = [
        _union(spans(on_thread | python), closures),  # other
        forward,
        backward_spans,
        optimizer,
        _comm_waits(trace, pid, on_thread, start, end),
        spans(on_thread & trace.name_mask(prefix=markers.DATALOADER_PREFIX)),
        spans(
            on_thread
            & (
                (is_runtime & trace.name_mask(prefix=markers.COPY_RUNTIME_PREFIXES))
                | copy_stand_ins(trace)
            )
        ),
        _union(
            spans(on_thread & trace.name_mask(names=markers.SYNC_OPS)),
            _blocked_reads(trace, on_thread & is_runtime, start, end),
        ),
    ]
    covers: list[_Cover] = []
    acc_s = np.zeros(0, dtype=np.int64)
    acc_e = np.zeros(0, dtype=np.int64)
    # Build from the top level down so each cover is the union of its level and all above it.
    for s, e in reversed(levels):
        acc_s, acc_e = _merge(np.concatenate([acc_s, s]), np.concatenate([acc_e, e]))
        covers.append(_Cover.of(acc_s, acc_e))
    covers.reverse()
    return tuple(covers)


def _comm_waits(
    trace: Trace, pid: int, on_thread: BoolArray, start: IntArray, end: IntArray
) -> tuple[IntArray, IntArray]:
    """Collectives in flight (any thread of ``pid``) minus the host thread's own operators."""
    collective = trace.name_mask(prefix=COLLECTIVE_PREFIXES) & (trace.pid == pid)
    collective &= trace.category_mask(*_PAINT_CATEGORIES)
    rows = np.flatnonzero(collective)
    if rows.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    flight = _merge(start[rows], end[rows])
    # The host is not waiting while it works: its own operators, and backward's on autograd's
    # device threads (on a GPU the main thread only waits inside loss.backward() while DDP's
    # reducer launches the all-reduces that overlap it: that is backward, not a wait for peers).
    autograd = trace.name_mask(prefix=markers.AUTOGRAD_PREFIX) & (trace.pid == pid)
    work = np.flatnonzero(((on_thread & ~collective) | autograd) & trace.category_mask("cpu_op"))
    busy = _merge(start[work], end[work])
    return _subtract(*flight, *busy)


_DEVICE_TO_HOST = re.compile(r"DtoH|Device -> (?:Pageable|Pinned|Host)", re.IGNORECASE)


def _blocked_reads(
    trace: Trace, runtime: BoolArray, start: IntArray, end: IntArray
) -> tuple[IntArray, IntArray]:
    """Where the host waited inside a device-to-host copy call for the queue ahead of it.

    From the call's start to the start of its copy on the GPU (same ``correlation``), when that
    copy started inside the call: the host was blocked until every earlier kernel finished.
    """
    calls = np.flatnonzero(runtime & trace.name_mask(prefix=markers.COPY_RUNTIME_PREFIXES))
    dtoh = trace.name_ids(lambda n: _DEVICE_TO_HOST.search(n) is not None)
    table = np.zeros(len(trace.names), dtype=np.bool_)
    table[dtoh] = True
    copies = np.flatnonzero(
        trace.category_mask("gpu_memcpy") & table[trace.name_id] & (trace.correlation >= 0)
    )
    if calls.size == 0 or copies.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(trace.correlation[copies], kind="stable")
    keys = trace.correlation[copies][order]
    pos = np.clip(np.searchsorted(keys, trace.correlation[calls]), 0, keys.size - 1)
    found = keys[pos] == trace.correlation[calls]
    calls, gpu = calls[found], copies[order[pos[found]]]
    gpu_start = start[gpu]
    inside = (gpu_start > start[calls]) & (gpu_start <= end[calls])
    return _merge(start[calls][inside], gpu_start[inside])


def backward_op_mask(trace: Trace) -> BoolArray:
    """Host ops that are backward work, whichever thread runs them (see ``_BACKWARD_NAME``)."""
    named = trace.name_ids(lambda n: _BACKWARD_NAME.search(n) is not None)
    table = np.zeros(len(trace.names), dtype=np.bool_)
    table[named] = True
    return table[trace.name_id] & trace.category_mask("cpu_op", "user_annotation")


def workload(trace: Trace) -> Literal["training", "inference"] | None:
    """ "training" with any backward op or optimizer range, "inference" with host ops and
    neither, None without host ops (a GPU-only trace says nothing of what launched it)."""
    host = trace.category_mask("cpu_op", "user_annotation")
    if not host.any():
        return None
    trains = trace.name_mask(
        prefix=(markers.OPTIMIZER_STEP_PREFIX, markers.OPTIMIZER_ZERO_GRAD_PREFIX),
        names=(markers.BACKWARD,),
    )
    if bool((host & trains).any()) or bool(backward_op_mask(trace).any()):
        return "training"
    # Only markers and collectives (no operator of a model): nothing says what ran.
    if int(trace.name_mask(prefix="aten::").sum()) < _MIN_MODEL_OPS:
        return None
    return "inference"


def has_collectives(trace: Trace) -> bool:
    """Whether any collective ran in this trace (host ranges; NCCL kernels count too)."""
    host = trace.category_mask(*_PAINT_CATEGORIES) & trace.name_mask(prefix=COLLECTIVE_PREFIXES)
    if host.any():
        return True
    kernels = trace.gpu_mask & trace.name_mask(prefix=("ncclKernel", "ncclDevKernel", "rcclKernel"))
    return bool(kernels.any())


def _inferred_forward(
    trace: Trace,
    bounds: StepBounds,
    start: IntArray,
    end: IntArray,
    *,
    backward: BoolArray,
    data: BoolArray,
    grad_mode: BoolArray | None = None,
) -> tuple[IntArray, IntArray]:
    """Forward spans for a trace without forward ranges (no hook of ours sits on modules).

    Where autograd numbered the ops (grad mode on), the forward starts at the step's first such
    op: a no_grad validation pass or logging before it stays outside the forward. Where the
    backward's graph says where its forward began (``_graph_forward``: the op that made the
    graph's first node), the forward starts there if that is later: host work in grad mode
    that makes no node (``torch.save(model.state_dict())``, whose ``detach`` calls autograd
    numbers, at the top of the step) is not the model's forward either.

    In each step that has a backward: from the end of its last data range before the first
    backward (the step's start when it has none) to that backward, or to where its graph's
    last node was made where the graph says so (``_graph_forward``). Painted at the forward
    level, so every classified range (backward, optimizer, data, copy, sync) still wins where
    they overlap. A step without backward (inference) is left as it is: nothing in the trace
    tells the model's ops from the rest there. With ``grad_mode`` (the host thread's ops autograd
    numbered), each backward pass also gets the forward that built its graph
    (``_graph_forward``), in whichever step it ran.
    """
    s0 = _to_ns(trace, np.asarray(bounds.start_us, dtype=np.float64))
    e0 = _to_ns(trace, np.asarray(bounds.end_us, dtype=np.float64))
    bwd_starts = np.sort(start[backward])
    data_rows = np.flatnonzero(data)
    data_end_sorted = np.sort(end[data_rows]) if data_rows.size else np.zeros(0, dtype=np.int64)
    grad_starts = np.sort(start[grad_mode]) if grad_mode is not None and grad_mode.any() else None
    # With marks, the last one may be a backward pass's own (the step clock writes it at the
    # call) whose pass the trace ends before: the forward before it is its graph's.
    last_mark = int(e0.max()) if bounds.source == "marks" and e0.size else None
    graph = (
        None
        if grad_mode is None
        else _graph_forward(
            trace, start, end, backward=backward, graph=grad_mode, last_mark=last_mark
        )
    )
    # Each graph's forward start and end by the pass it runs to (the pass's first backward
    # event): the end where the graph's last node was made, not the pass.
    graph_begin = (
        {} if graph is None else dict(zip(graph[1].tolist(), graph[0].tolist(), strict=True))
    )
    graph_end = (
        {} if graph is None else dict(zip(graph[1].tolist(), graph[2].tolist(), strict=True))
    )
    fs: list[int] = []
    fe: list[int] = []
    for a, b in zip(s0.tolist(), e0.tolist(), strict=True):
        k = int(np.searchsorted(bwd_starts, a, side="left"))
        if k >= bwd_starts.size or bwd_starts[k] >= b:
            continue  # no backward in this step
        first_bwd = int(bwd_starts[k])
        j = int(np.searchsorted(data_end_sorted, first_bwd, side="right")) - 1
        begin = a
        if j >= 0 and a <= data_end_sorted[j] <= first_bwd:
            begin = int(data_end_sorted[j])
        if grad_starts is not None:
            g = int(np.searchsorted(grad_starts, begin, side="left"))
            if g < grad_starts.size and grad_starts[g] < first_bwd:
                begin = int(grad_starts[g])
        made = graph_begin.get(first_bwd)
        if made is not None and begin < made < first_bwd:
            begin = made
        until = graph_end.get(first_bwd, first_bwd)
        if until > begin:
            fs.append(begin)
            fe.append(until)
    by_step = (np.asarray(fs, dtype=np.int64), np.asarray(fe, dtype=np.int64))
    if graph is None:
        return by_step
    return _union(by_step, (graph[0], graph[2]))


def _graph_forward(
    trace: Trace,
    start: IntArray,
    end: IntArray,
    *,
    backward: BoolArray,
    graph: BoolArray,
    last_mark: int | None = None,
) -> tuple[IntArray, IntArray, IntArray]:
    """The forward that built the graph each backward pass consumes, wherever the steps cut.

    A backward node carries the sequence number autograd gave it when the forward op that
    made it ran; the pass's smallest one is the graph's first node. Its forward starts at the
    top-level host op holding the last op recorded with that number after the previous pass
    (ops that made no node share the number: a hand-written update after the previous pass,
    the next batch's indexing) and runs to the pass. Loops whose steps end at the backward
    (``torch.autograd.grad``, ``torch.func.grad``, manual updates) have that forward at the
    end of the step before, where the step-shaped inference finds none; a pass whose nodes
    all come from before the previous pass (a fragment of the same pass) adds nothing.

    After the trace's last pass, up to ``last_mark`` (a pass the trace ends at): the graph's
    first node is the number the first op after that pass read, when a later op reads a higher
    one (a node was made: under no_grad, or with only ``.item()`` after the pass, none is).

    The forward ends where the graph's last node was made (the pass's largest number: the top-
    level op holding the last op that read it), not at the pass: what the loop runs between the
    loss and ``backward()`` makes no node of this graph (nanoGPT's next ``get_batch``, 12% of
    its step, read as the model's forward and as time compiling the model removes; compiled,
    that part measured unchanged). Returns the spans' starts, their passes' starts, and their
    ends (the pass's start where the last node's maker is not in the trace).
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    bwd_rows = np.flatnonzero(backward & (trace.sequence >= 0))
    fwd_rows = np.flatnonzero(graph)
    if bwd_rows.size == 0 or fwd_rows.size == 0:
        return empty
    passes_s, passes_e = _merge(start[np.flatnonzero(backward)], end[np.flatnonzero(backward)])
    bwd_rows = bwd_rows[np.argsort(start[bwd_rows], kind="stable")]
    which = np.searchsorted(passes_s, start[bwd_rows], side="right") - 1
    fwd_rows = fwd_rows[np.argsort(start[fwd_rows], kind="stable")]
    f_start, f_seq = start[fwd_rows], trace.sequence[fwd_rows]
    # Top-level host ops (not nested in an earlier one) of the forward's thread.
    tops = np.flatnonzero(trace.category_mask("cpu_op") & _same_thread(trace, graph))
    tops = tops[np.lexsort((-end[tops], start[tops]))]
    t_s, t_e = start[tops], end[tops]
    top = np.ones(tops.size, dtype=np.bool_)
    top[1:] = t_s[1:] >= np.maximum.accumulate(t_e)[:-1]
    top_starts, top_ends = t_s[top], t_e[top]
    fs: list[int] = []
    fp: list[int] = []
    fe: list[int] = []
    for i, a in enumerate(passes_s.tolist()):
        seqs = trace.sequence[bwd_rows[which == i]]
        if seqs.size == 0:
            continue
        first_node, last_node = int(seqs.min()), int(seqs.max())
        lo = int(passes_e[i - 1]) if i > 0 else np.iinfo(np.int64).min
        k0 = int(np.searchsorted(f_start, lo, side="left"))
        k1 = int(np.searchsorted(f_start, a, side="left"))
        hits = np.flatnonzero(f_seq[k0:k1] == first_node)
        if hits.size == 0:
            continue
        made = int(f_start[k0 + int(hits[-1])])
        t = int(np.searchsorted(top_starts, made, side="right")) - 1
        begin = max(int(top_starts[t]) if t >= 0 else made, lo)
        # The last node's maker: ops read a node's number until one makes it, the next one after.
        lasts = np.flatnonzero(f_seq[k0:k1] == last_node)
        until = a
        if lasts.size:
            maker = int(f_start[k0 + int(lasts[-1])])
            u = int(np.searchsorted(top_starts, maker, side="right")) - 1
            until = min(a, max(int(top_ends[u]) if u >= 0 else maker, begin))
        if until > begin:
            fs.append(begin)
            fp.append(a)
            fe.append(until)
    if last_mark is not None and passes_e.size:
        lo = int(passes_e[-1])
        k0 = int(np.searchsorted(f_start, lo, side="left"))
        k1 = int(np.searchsorted(f_start, last_mark, side="left"))
        tail = f_seq[k0:k1]
        if tail.size and bool((tail > tail[0]).any()):
            made = int(f_start[k0 + int(np.flatnonzero(tail == tail[0])[-1])])
            t = int(np.searchsorted(top_starts, made, side="right")) - 1
            begin = max(int(top_starts[t]) if t >= 0 else made, lo)
            if last_mark > begin:
                fs.append(begin)
                fp.append(last_mark)
                fe.append(last_mark)
    return (
        np.asarray(fs, dtype=np.int64),
        np.asarray(fp, dtype=np.int64),
        np.asarray(fe, dtype=np.int64),
    )


def _same_thread(trace: Trace, rows: BoolArray) -> BoolArray:
    """Rows on the (pid, tid) of the first row of ``rows`` (all of them share one thread)."""
    at = np.flatnonzero(rows)
    if at.size == 0:
        return np.zeros(len(trace), dtype=np.bool_)
    same: BoolArray = (trace.pid == trace.pid[at[0]]) & (trace.tid == trace.tid[at[0]])
    return same


def _closure_blocks(
    start: IntArray, end: IntArray, fwd: BoolArray, bwd: BoolArray, opt: _Cover
) -> tuple[tuple[IntArray, IntArray], tuple[IntArray, IntArray]]:
    """Forward and backward blocks of the closures run inside optimizer ranges.

    Inside one optimizer range, a run of forward events (our forward ranges, ops autograd
    recorded) is forward from its first start to the next backward's start, the Python between
    its ops and before ``loss.backward()`` included; a run of backward events is backward from
    its first start to its last end. LBFGS calls the closure several times: one block each.
    """
    rows = np.flatnonzero(fwd | bwd)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if rows.size == 0:
        return empty, empty
    rows = rows[np.lexsort((-end[rows], start[rows]))]
    s, e, is_fwd = start[rows], end[rows], fwd[rows] & ~bwd[rows]
    range_id = np.searchsorted(opt.starts, s, side="right") - 1
    new_run = np.ones(rows.size, dtype=np.bool_)
    new_run[1:] = (is_fwd[1:] != is_fwd[:-1]) | (range_id[1:] != range_id[:-1])
    first = np.flatnonzero(new_run)
    run_start = s[first]
    run_end = np.maximum.reduceat(e, first)
    run_fwd = is_fwd[first]
    run_range = range_id[first]
    # A forward run reaches the next run's start when that run is a backward in the same range.
    nxt_start = np.append(run_start[1:], -1)
    nxt_same = np.append(run_range[1:] == run_range[:-1], False)
    reach = np.where(nxt_same, np.maximum(run_end, nxt_start), run_end)
    fwd_end = np.where(run_fwd, reach, run_end)
    return (
        _merge(run_start[run_fwd], fwd_end[run_fwd]),
        _merge(run_start[~run_fwd], run_end[~run_fwd]),
    )


def _forward_in_closures(
    closures: tuple[IntArray, IntArray],
    backward: tuple[IntArray, IntArray],
    model_starts: IntArray | None = None,
) -> tuple[IntArray, IntArray]:
    """Each closure call's forward: from its first model operator (``model_starts``, sorted: a
    module's forward range or an op in grad mode inside it; else its start) to the start of the
    last backward pass that starts inside it (the backward itself is painted above). The
    closure's Python before its first model operator is other: Lightning's ``training_step``
    tokenising its batch before calling the model is the user's work on the batch, not the
    model's. A call with no backward has none: its time is other, as the step clock counts it."""
    b_starts = np.sort(backward[0])
    a, b = closures
    k = np.searchsorted(b_starts, b, side="left") - 1  # the last backward starting before b
    last = b_starts[np.maximum(k, 0)] if b_starts.size else np.zeros(a.size, np.int64)
    has = (k >= 0) & (last >= a) if b_starts.size else np.zeros(a.size, np.bool_)
    first = a
    if model_starts is not None and model_starts.size:
        j = np.minimum(np.searchsorted(model_starts, a, side="left"), model_starts.size - 1)
        found = model_starts[j]
        first = np.where((found >= a) & (found <= last), found, a)
    return _merge(first[has], last[has])


def _union(a: tuple[IntArray, IntArray], b: tuple[IntArray, IntArray]) -> tuple[IntArray, IntArray]:
    return _merge(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _subtract(
    a_starts: IntArray, a_ends: IntArray, b_starts: IntArray, b_ends: IntArray
) -> tuple[IntArray, IntArray]:
    """The parts of the intervals ``a`` not covered by ``b`` (both sorted and disjoint)."""
    if a_starts.size == 0 or b_starts.size == 0:
        return a_starts, a_ends
    # Membership changes only at endpoints: test each elementary segment once.
    cuts = _sorted_unique(np.concatenate([a_starts, a_ends, b_starts, b_ends]))
    lo, hi = cuts[:-1], cuts[1:]
    keep = _Cover(a_starts, a_ends, np.zeros(0, np.int64)).contains(lo) & ~_Cover(
        b_starts, b_ends, np.zeros(0, np.int64)
    ).contains(lo)
    return _merge(lo[keep], hi[keep])


# In-place ops of a hand-written update: ``p.data.add_(g, alpha=-lr)``, ``p -= lr * p.grad``
# (aten::sub_), ``p.grad.zero_()``, and the foreach/fused kernels some loops call directly.
_IN_PLACE = re.compile(r"^aten::(_foreach_\w+|_fused_\w+|[a-z]\w*_)$")


def _manual_updates(
    trace: Trace,
    on_thread: BoolArray,
    start: IntArray,
    end: IntArray,
    model: tuple[IntArray, IntArray],
    backward: tuple[IntArray, IntArray],
    step_starts_ns: IntArray,
) -> tuple[IntArray, IntArray]:
    """Without an optimizer object, the update after each backward is the optimizer phase.

    After a backward, from its end to the end of the last top-level in-place op that follows
    it in the same step: ``p -= lr * p.grad`` and friends, with the Python between them (one
    iteration per parameter). A data copy (``copy_``) is not an update, and the next step's
    in-place ops (an inplace ReLU in its forward) are not this step's update.
    """
    ops = np.flatnonzero(on_thread & trace.category_mask("cpu_op"))
    if ops.size == 0 or backward[0].size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ops = ops[np.lexsort((-end[ops], start[ops]))]
    s, e = start[ops], end[ops]
    reach = np.maximum.accumulate(e)
    top = np.ones(ops.size, dtype=np.bool_)
    top[1:] = s[1:] >= reach[:-1]  # not nested inside an earlier op
    in_place = trace.name_ids(lambda n: n != "aten::copy_" and _IN_PLACE.match(n) is not None)
    table = np.zeros(len(trace.names), dtype=np.bool_)
    table[in_place] = True
    update = top & table[trace.name_id[ops]]
    update &= ~_Cover.of(*model).contains(s)
    if not update.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    us, ue = s[update], e[update]
    # The backward each update op follows (intervals sorted, so k never decreases).
    b_starts, b_ends = backward
    k = np.searchsorted(b_starts, us, side="right") - 1
    after = k >= 0
    us, ue, k = us[after], ue[after], k[after]

    def step_of(t: IntArray) -> IntArray:
        return np.searchsorted(step_starts_ns, t, side="right")

    same_step = step_of(us) == step_of(b_ends[k])
    us, ue, k = us[same_step], ue[same_step], k[same_step]
    if k.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # Group the update ops by the model interval they follow: [its end, the group's last op end].
    groups, first = np.unique(k, return_index=True)
    return _merge(b_ends[groups], np.maximum.reduceat(ue, first))


# The locator of each trace and steps, built once: a report's phase breakdown and GPU timeline
# ask for the same one, and its covers cost ~0.1 s on a million events. A Trace is immutable
# (frozen, compared by identity); the entry goes with it.
_LOCATORS: weakref.WeakKeyDictionary[Trace, dict[StepBounds, PhaseLocator]] = (
    weakref.WeakKeyDictionary()
)


def _locator(trace: Trace, bounds: StepBounds) -> PhaseLocator:
    built = _LOCATORS.setdefault(trace, {})
    locator = built.get(bounds)
    if locator is None:
        locator = built[bounds] = PhaseLocator(trace, bounds.host, bounds)
    return locator


def phase_at(trace: Trace, host_tid: int | None = None) -> PhaseLocator | None:
    """A callable mapping timestamps (µs) to phase indices, or None without a host thread."""
    bounds = step_bounds(trace, host_tid)
    return None if bounds is None else _locator(trace, bounds)


def phase_breakdown(trace: Trace, *, host_tid: int | None = None) -> PhaseBreakdown | None:
    """Phase split of every step in the trace (``source="trace"``); None without host events."""
    bounds = step_bounds(trace, host_tid)
    if bounds is None:
        return None
    locator = _locator(trace, bounds)
    split = _breakdown(bounds, locator, measured=_measured(trace), kind=workload(trace))
    if "comm" not in split.measured:
        return split
    return dataclasses.replace(split, comm_in_backward=comm_in_backward(trace, bounds))


def comm_in_backward(trace: Trace, bounds: StepBounds) -> float | None:
    """The part of the host's wait in collectives (``_comm_waits``) within the steps that lay
    inside a backward call (``markers.BACKWARD`` on the host thread): a gradient exchange's wait
    (DDP's reducer waits at the end of backward). The rest is the loop's own collectives (a
    loss reduced for a log, a barrier). None: no wait in collectives."""
    pid, tid = bounds.host
    on_thread = trace.category_mask(*_PAINT_CATEGORIES) & (trace.pid == pid) & (trace.tid == tid)
    start = _to_ns(trace, trace.ts_us)
    end = start + np.rint(trace.dur_us * 1000.0).astype(np.int64)
    a, b = _to_ns(trace, np.asarray(bounds.start_us)), _to_ns(trace, np.asarray(bounds.end_us))
    steps = _merge(a, b)
    waits = _comm_waits(trace, pid, on_thread, start, end)
    waits = _subtract(*waits, *_subtract(*waits, *steps))  # within the steps
    total = int((waits[1] - waits[0]).sum())
    if total <= 0:
        return None
    rows = np.flatnonzero(on_thread & trace.name_mask(names=(markers.BACKWARD,)))
    outside = _subtract(*waits, *_merge(start[rows], end[rows]))
    return 1.0 - int((outside[1] - outside[0]).sum()) / total


def _unclocked_copy_calls(trace: Trace) -> BoolArray:
    """Copy calls (``cudaMemcpy*``...) the trace holds with no clock reading."""
    if not trace.unclocked_mask.any():  # cached: every clocked trace stops here
        return np.zeros(len(trace), dtype=np.bool_)
    return (
        trace.category_mask("cuda_runtime", "cuda_driver")
        & trace.name_mask(prefix=markers.COPY_RUNTIME_PREFIXES)
        & trace.unclocked_mask
    )


def copy_stand_ins(trace: Trace) -> BoolArray:
    """Host operators that stand for copy calls with no clock reading: the clocked ``cpu_op``
    with the same ``External id`` (an H200 trace of pageable ``.to(device)`` copies had every
    ``cudaMemcpyAsync`` at ts 0, and its ``aten::copy_``, 8 ms a step, with its times)."""
    calls = _unclocked_copy_calls(trace)
    if not calls.any():
        return np.zeros(len(trace), dtype=np.bool_)
    ext = trace.external_id[calls]
    ext = ext[ext >= 0]
    ops = trace.category_mask("cpu_op") & ~trace.unclocked_mask
    return ops & np.isin(trace.external_id, ext)


def _measured(trace: Trace) -> tuple[str, ...]:
    absent = set()
    calls = np.flatnonzero(_unclocked_copy_calls(trace))
    linked = set(trace.external_id[copy_stand_ins(trace)].tolist()) if calls.size else set()
    if not trace.has_gpu_activity or any(int(e) not in linked for e in trace.external_id[calls]):
        # No device, or copy calls with no clock reading and no operator of theirs that has
        # one: where the host copied is unknown.
        absent.add("copy")
    if not has_collectives(trace):
        absent.add("comm")
    return tuple(p for p in PHASES if p not in absent)


def _breakdown(
    bounds: StepBounds,
    locator: PhaseLocator,
    measured: Sequence[str],
    kind: Literal["training", "inference"] | None = None,
) -> PhaseBreakdown:
    a = locator.to_ns(bounds.start_us)
    b = locator.to_ns(bounds.end_us)
    dur = np.maximum(b - a, 0)
    b = a + dur
    covered = locator.covered_ns(a, b)  # level 1..7, each nested in the one before
    per_level = np.empty((len(_LEVEL_PHASES), a.size), dtype=np.int64)
    per_level[0] = dur - covered[0]
    for lv in range(1, len(_LEVEL_PHASES)):
        above = covered[lv] if lv < len(covered) else 0
        per_level[lv] = covered[lv - 1] - above

    if "copy" not in measured:
        # Without a device nothing can be a host<->device copy; keep the sum exact anyway.
        per_level[_LEVEL_PHASES.index("other")] += per_level[_LEVEL_PHASES.index("copy")]
    by_phase = {p: per_level[_LEVEL_PHASES.index(p)] for p in PHASES if p in measured}
    steps = tuple(
        StepPhases(
            index=bounds.index[i],
            start_us=bounds.start_us[i],
            duration_us=int(dur[i]) / 1000.0,
            phase_us={p: int(v[i]) / 1000.0 for p, v in by_phase.items()},
        )
        for i in range(a.size)
    )
    return PhaseBreakdown(
        source="trace",
        steps=steps,
        total_us=int(dur.sum()) / 1000.0,
        phase_total_us={p: int(v.sum()) / 1000.0 for p, v in by_phase.items()},
        measured=tuple(measured),
        workload=kind,
    )
