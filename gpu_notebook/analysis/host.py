"""Host overhead of a traced step: how many operators Python dispatches, how long each runs, and
how much of the step lies between them.

A step is *host-bound* when its time goes to per-op overhead rather than to work: the typical
top-level operator is shorter than ``SMALL_OP_US`` and at least ``HOST_BOUND_SHARE`` of the
step is spent in such small operators or in Python between operators. ``SMALL_OP_US`` is
HTA's 30 us kernel-wait threshold (``breakdown_analysis.py``): an op that short would, on any
GPU, be shorter than its own launch gap, so a GPU would wait on Python exactly as the CPU does
here. ``HOST_BOUND_SHARE`` is half the step: the overhead is then the larger part, and no
faster device can shorten it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gpu_notebook import markers
from gpu_notebook.analysis.floor_lines import floor_scale, settled_small_line, small_floor
from gpu_notebook.analysis.interference import marked_step_waits_s
from gpu_notebook.analysis.large_elementwise_ops import large_ops_hold_step
from gpu_notebook.analysis.phases import _merge
from gpu_notebook.records import Analysis, HostOverhead, OpStat, PhaseBreakdown
from gpu_notebook.traces.kineto import Trace

__all__ = [
    "HOST_BOUND_SHARE",
    "MATMUL_OP",
    "SMALL_OP_US",
    "heaviest_matmul_us",
    "host_bound",
    "host_overhead",
    "in_memory_host_bound",
    "in_memory_overhead",
    "model_work_share",
    "outside_ops_share",
    "overhead_near_line",
    "overhead_reach",
    "per_sample_model_share",
]

SMALL_OP_US = 30.0
HOST_BOUND_SHARE = 0.5
# Host operators that launch GEMM / convolution kernels: the work a faster device accelerates.
MATMUL_OP = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|conv|cudnn_conv|_convolution|"
                       r"convolution|mkldnn_conv|_scaled_dot_product)", re.IGNORECASE)  # fmt: skip


def host_overhead(
    trace: Trace,
    phases: PhaseBreakdown | None,
    host: tuple[int, int] | None,
    waits: Mapping[int, float] | None = None,
    window_waits_s: Mapping[int, float] | None = None,
) -> HostOverhead | None:
    """Median per-step figures of the host thread's top-level operators; None without steps.

    ``waits``: each traced step's share of its time the step clock read its thread waiting for
    a core (by step index). A wait inside a call is taken out by the call's floor; the rest of
    it fell between calls and is taken out of the gaps, not read as Python there (a metrics
    loop whose thread waited 87% of a step read "Python between operators 84%").

    ``window_waits_s``: each traced step's wait (s) read at the trace's own step marks
    (``ProfileWindow.step_waits_s``), used where given. The step clock's steps span the
    trace's only nearly: nanogpt_shaped under two busy processes had a 25 ms wait in the
    clock's step 4 and in the trace's step 3, and the clock's shares moved the Python share
    between 0% and 35% over five runs (24-28% quiet)."""
    if phases is None or host is None or not phases.steps:
        return None
    rows = np.flatnonzero(
        trace.category_mask("cpu_op") & (trace.pid == host[0]) & (trace.tid == host[1])
    )
    if rows.size == 0:
        return None
    origin = float(trace.ts_us.min())
    start = np.rint((trace.ts_us[rows] - origin) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[rows] * 1000.0).astype(np.int64)
    order = np.lexsort((-end, start))
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    top = np.ones(start.size, dtype=np.bool_)
    top[1:] = start[1:] >= reach[:-1]  # not nested in an earlier op
    s, e = start[top], end[top]  # disjoint, sorted
    dur = e - s
    # Not Python: the host thread inside a runtime call (launch, copy, sync), or waiting while
    # the autograd engine runs backward (on CUDA, on its own thread) or a loader fetches.
    busy_rows = np.flatnonzero(
        (trace.pid == host[0])
        & (
            (trace.tid == host[1]) & trace.category_mask("cpu_op", "cuda_runtime", "cuda_driver")
            | trace.name_mask(
                prefix=(markers.AUTOGRAD_PREFIX, markers.DATALOADER_PREFIX),
                names=(markers.BACKWARD,),
            )
        )
    )
    busy_s = np.rint((trace.ts_us[busy_rows] - origin) * 1000.0).astype(np.int64)
    busy = _merge(busy_s, busy_s + np.rint(trace.dur_us[busy_rows] * 1000.0).astype(np.int64))
    before = np.concatenate([[0], np.cumsum(busy[1] - busy[0])])

    def busy_ns(a: int, b: int) -> int:
        """Length of [a, b) covered by the busy intervals (disjoint, sorted)."""
        lo, hi = busy
        i, j = np.searchsorted(hi, a, side="right"), np.searchsorted(lo, b, side="left")
        if j <= i:
            return 0
        total = int(before[j] - before[i])
        total -= max(0, a - int(lo[i])) + max(0, int(hi[j - 1]) - b)
        return max(total, 0)

    indexed = _step_spans(phases, origin)
    spans = [(a, b) for _, a, b in indexed]
    top_rows = rows[order][top]
    floor = call_floors(trace.name_id[top_rows], s, dur, spans)
    # The small-operator line in this machine's floors on a CPU-only run (analysis.floor_lines).
    stepped = [floor[np.searchsorted(s, a) : np.searchsorted(s, b)] for a, b in spans]
    floors_us = np.concatenate(stepped) / 1000.0 if stepped else np.zeros(0)
    machine: float | None = None  # the host's floors in the reference machine's; GPU: None
    if trace.category_mask("kernel").any():
        line_us, op_floor_us = SMALL_OP_US, small_floor(floors_us, SMALL_OP_US)
    else:
        line_us, op_floor_us = settled_small_line(floors_us, SMALL_OP_US)
        machine = None if op_floor_us is None else floor_scale(op_floor_us)
    small = floor < line_us * 1000.0  # by the call's floor: a stretched add_ stays small
    in_data = _in_data_wait(trace, origin, s, e)
    gap_key, gap_at, gap_ns, py_ns, gap_mid = _gaps(trace.name_id[top_rows], s, e, spans, busy_ns)
    gap_floor = call_floors(gap_key, gap_at, gap_ns, spans)
    # The Python between operators at each gap's floor (the same gap of the step that ran it
    # undisturbed): the undisturbed model side the CPU work share is read against.
    py_floor = py_ns * np.divide(
        np.minimum(gap_floor, gap_ns), gap_ns, out=np.zeros(gap_ns.size), where=gap_ns > 0
    )
    work = model_work_share(
        trace, phases, top_rows, s, e, origin, floor, (gap_mid, py_floor), line_us
    )
    model_gaps_us, model_floor_us = _model_floors_us(
        trace, origin, spans, (s, e, floor), (gap_key, gap_at, gap_ns, py_ns, gap_mid)
    )
    # A gap counts at most STRETCHED times its least over the steps: Python's own jitter stays,
    # a time slice (a wait for a core, ms against a gap's us) goes, wherever in the gap it fell.
    # At its least alone, a loaded machine's slower running (caches shared, no wait schedstat
    # sees) would leave the Python share as quiet, but every step then reads the same overhead
    # and a program at the 50% line loses its range: nanogpt_shaped read cpu-only in 2 of 4
    # loaded runs (steps 0.487, 0.499; benchmarks/README.md, 2026-12-05 08:47).
    gap_counted = np.minimum(gap_ns, STRETCHED * gap_floor)
    py_counted = py_ns * np.divide(gap_counted, gap_ns, out=np.zeros(gap_ns.size), where=gap_ns > 0)
    counts: list[int] = []
    op_us: list[np.ndarray] = []
    between: list[float] = []
    small_share: list[float] = []
    data_small: list[float] = []
    waited_ns: list[int] = []
    # The waits read at the marks, the one source the phases' own time reads too.
    marks = marked_step_waits_s(phases, window_waits_s)
    for index, a, b in indexed:
        i, j = np.searchsorted(s, a, side="left"), np.searchsorted(s, b, side="left")
        covered = np.minimum(e[i:j], b) - s[i:j]
        counted = np.minimum(covered, floor[i:j])
        gi, gj = np.searchsorted(gap_at, a, side="left"), np.searchsorted(gap_at, b, side="left")
        python = float(py_counted[gi:gj].sum())
        # The step's own time: less what its calls and the Python between them ran past their
        # floors (waits for a core: a time slice lands between operators as often as in one),
        # or less the step clock's wait where that is longer: the rest of it fell between
        # calls in a gap the floors kept (every traced step preempted there), and is no Python.
        stretched = int((covered - counted).sum()) + int((gap_ns[gi:gj] - gap_counted[gi:gj]).sum())
        waited = min(
            b - a,
            round(marks[index] * 1e9)
            if marks is not None
            else int((waits or {}).get(index, 0.0) * (b - a)),
        )
        own = max(1, (b - a) - max(stretched, waited))
        py = max(0.0, python - max(0, waited - stretched)) / own
        tiny = float(counted[small[i:j]].sum()) / own
        # Never more than the step: a wait read larger than the gaps that could hold it.
        scale = min(1.0, 1.0 / (py + tiny)) if py + tiny > 0 else 1.0
        counts.append(j - i)
        op_us.append(floor[i:j] / 1000.0)
        between.append(py * scale)
        small_share.append(tiny * scale)
        if in_data is not None:
            data_small.append(float(counted[small[i:j] & in_data[i:j]].sum()) / own * scale)
        waited_ns.append(waited)
    if not counts:
        return None
    all_ops = np.concatenate(op_us)
    spans_ns = sum(b - a for _, a, b in indexed)
    return HostOverhead(
        ops_per_step=float(np.median(counts)),
        median_op_us=float(np.median(all_ops)) if all_ops.size else 0.0,
        between_ops_share=max(0.0, float(np.median(between))),
        small_op_share=float(np.median(small_share)),
        small_op_us=line_us,
        model_work_share=work,
        heaviest_matmul_us=_heaviest_matmul_floor_us(trace, host, origin, spans),
        overhead_share_high=max(x + y for x, y in zip(between, small_share, strict=True)),
        matmul_floor_us=_matmul_floor_us(trace, host, origin, spans),
        core_wait_share=sum(waited_ns) / spans_ns if marks is not None and spans_ns > 0 else None,
        data_small_share=float(np.median(data_small)) if data_small else None,
        model_gaps_us=model_gaps_us,
        model_floor_us=model_floor_us,
        op_floor_us=op_floor_us,
        floor_scale=machine,
    )


def _model_floors_us(
    trace: Trace,
    origin_us: float,
    spans: Sequence[tuple[int, int]],
    ops: tuple[np.ndarray, np.ndarray, np.ndarray],
    gaps: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[float | None, float | None]:
    """The model's forward and backward a traced step at floors (median, us): its top-level
    operators (``ops``: starts, ends, floors, ns) and the gaps between them (``_gaps``' arrays),
    each at its least over the steps (load only adds time); and of it, the time between the
    model's operators: the forward's Python between them (module calls, a loop over time steps)
    and the autograd engine's own time between backward nodes. What a compiled graph surely
    takes away is in the second: Dynamo traces the forward's Python out, and its backward is
    one node where the eager one was many. (None, None): no phase to place them in."""
    start, end, op_floor = ops
    key, at, length, python, mid = gaps
    op_mid = (start + end) / 2.0
    op_model = [_in_phase(trace, origin_us, op_mid, p) for p in ("forward", "backward")]
    forward = _in_phase(trace, origin_us, mid, "forward")
    backward = _in_phase(trace, origin_us, mid, "backward")
    if forward is None or backward is None or op_model[0] is None or op_model[1] is None:
        return None, None
    if not spans:
        return None, None
    in_model = op_model[0] | op_model[1]
    floor = call_floors(key, at, length, spans)
    py_floor = python * np.divide(floor, length, out=np.zeros(length.size), where=length > 0)
    between = np.where(forward, py_floor, 0.0) + np.where(backward, floor, 0.0)
    whole = np.where(forward | backward, floor, 0.0)
    gaps_step, model_step = [], []
    for a, b in spans:
        i, j = np.searchsorted(at, a, side="left"), np.searchsorted(at, b, side="left")
        k, m = np.searchsorted(start, a, side="left"), np.searchsorted(start, b, side="left")
        gaps_step.append(float(between[i:j].sum()))
        ops_ns = float(op_floor[k:m][in_model[k:m]].sum())
        model_step.append(ops_ns + float(whole[i:j].sum()))
    return float(np.median(gaps_step)) / 1000.0, float(np.median(model_step)) / 1000.0


def _in_data_wait(
    trace: Trace, origin_us: float, start: np.ndarray, end: np.ndarray
) -> np.ndarray | None:
    """Which top-level operators (``start``/``end``, ns from ``origin_us``) run inside the
    step's data wait; None: no phase to place them in."""
    return _in_phase(trace, origin_us, (start + end) / 2.0, "data")


def _in_phase(trace: Trace, origin_us: float, at_ns: np.ndarray, phase: str) -> np.ndarray | None:
    """Which instants (ns from ``origin_us``) lie in ``phase``; None: no phase to place them in."""
    from gpu_notebook.analysis.phases import phase_at
    from gpu_notebook.records import PHASES

    locate = phase_at(trace)
    if locate is None:
        return None
    return np.asarray(locate(origin_us + at_ns / 1000.0) == PHASES.index(phase))


def _gaps(
    names: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    spans: Sequence[tuple[int, int]],
    busy_ns: Callable[[int, int], int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each step's time between its top-level operators (``start``/``end`` disjoint, sorted,
    ns) as calls of their own, for ``call_floors``: the stretch before the step's first
    operator, and after each operator up to the next one or the step's end; and of each, the
    Python, less what the thread spent in the runtime or the autograd engine (``busy_ns``: a
    wait there is a wait all the same, so floors read the whole gap). Keyed by the
    operator before it (-1: the step's start, -2: its end, whatever operator comes last: a step
    with more calls than another has its own last gap), placed at that operator's start (the
    step's start), so the same gap of every step is one call repeated. Returns keys, places,
    lengths, Python in them, and each gap's midpoint (the phase it lies in); sorted by place."""
    keys: list[int] = []
    at: list[int] = []
    length: list[int] = []
    python: list[int] = []
    mid: list[int] = []
    for a, b in spans:
        i, j = (
            int(np.searchsorted(start, a, side="left")),
            int(np.searchsorted(start, b, side="left")),
        )
        edges = [a, *(int(x) for x in start[i:j]), b]
        ends = [a, *(min(int(x), b) for x in end[i:j])]
        for k in range(j - i + 1):
            lo, hi = ends[k], edges[k + 1]
            keys.append(-1 if k == 0 else -2 if k == j - i else int(names[i + k - 1]))
            at.append(a if k == 0 else int(start[i + k - 1]))
            length.append(max(0, hi - lo))
            python.append(max(0, (hi - lo) - busy_ns(lo, hi)) if hi > lo else 0)
            mid.append((lo + max(lo, hi)) // 2)
    order = np.argsort(np.asarray(at, dtype=np.int64), kind="stable")
    return (
        np.asarray(keys, dtype=np.int64)[order],
        np.asarray(at, dtype=np.int64)[order],
        np.asarray(length, dtype=np.int64)[order],
        np.asarray(python, dtype=np.int64)[order],
        np.asarray(mid, dtype=np.int64)[order],
    )


def _matmul_floor_us(
    trace: Trace, host: tuple[int, int], origin_us: float, spans: Sequence[tuple[int, int]]
) -> float | None:
    """The model side's matmul and convolution calls a traced step by their floors (median over
    the steps, us): what a compiled graph still calls, at what each costs undisturbed
    (``call_floors``). The innermost such call where one nests another (``aten::linear`` holds
    its ``aten::addmm``, a backward node its ``aten::mm``): a composite such as
    ``aten::gru_cell`` counts only its matmuls, the rest a compiled graph fuses. None: no phase
    to place them in."""
    from gpu_notebook.analysis.phases import phase_at
    from gpu_notebook.records import PHASES

    locate = phase_at(trace)
    if locate is None or not spans:
        return None
    rows = np.flatnonzero(
        trace.category_mask("cpu_op")
        & (trace.pid == host[0])
        & (trace.tid == host[1])
        & np.isin(trace.name_id, trace.name_ids(lambda n: bool(MATMUL_OP.match(n))))
    )
    start = np.rint((trace.ts_us[rows] - origin_us) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[rows] * 1000.0).astype(np.int64)
    order = np.lexsort((-end, start))
    rows, start, end = rows[order], start[order], end[order]
    leaf = np.ones(start.size, dtype=np.bool_)
    leaf[:-1] = start[1:] >= end[:-1]  # the next matmul call does not start inside this one
    rows, start, end = rows[leaf], start[leaf], end[leaf]
    floor = call_floors(trace.name_id[rows], start, end - start, spans)
    model = locate(origin_us + (start + end) / 2000.0) != PHASES.index("data")
    per_step = []
    for a, b in spans:
        i, j = np.searchsorted(start, a, side="left"), np.searchsorted(start, b, side="left")
        per_step.append(float(floor[i:j][model[i:j]].sum()))
    return float(np.median(per_step)) / 1000.0


def _step_spans(phases: PhaseBreakdown, origin_us: float) -> list[tuple[int, int, int]]:
    """Each traced step's index and [start, end) in ns from ``origin_us`` (empty steps left
    out)."""
    spans = []
    for step in phases.steps:
        a = round((step.start_us - origin_us) * 1000.0)
        b = a + round(step.duration_us * 1000.0)
        if b > a:
            spans.append((step.index, a, b))
    return spans


def call_floors(
    names: np.ndarray, start: np.ndarray, dur: np.ndarray, spans: Sequence[tuple[int, int]]
) -> np.ndarray:
    """Each call's floor: the least any step took for the same call (its operator name and its
    ordinal among that name's calls in the step), ``dur`` where the call lies in no step.

    Load only adds time to a call (a wait for a core, a preemption): the same call of another
    step, run undisturbed, shows what it costs. A median over calls moves with the load (a
    python_items addmm read 32 us a call under load 8-12, well under 30 quiet; one 2 us add_
    took 18 ms), the least of one call's repeats does not while one step ran it undisturbed.
    ``start`` sorted; ns throughout."""
    floor: np.ndarray = np.array(dur, copy=True)
    groups: dict[tuple[int, int], list[int]] = {}
    for a, b in spans:
        i, j = np.searchsorted(start, a, side="left"), np.searchsorted(start, b, side="left")
        seen: dict[int, int] = {}
        for idx in range(int(i), int(j)):
            name = int(names[idx])
            k = seen.get(name, 0)
            seen[name] = k + 1
            groups.setdefault((name, k), []).append(idx)
    for members in groups.values():
        floor[members] = dur[members].min()
    return floor


def _heaviest_matmul_floor_us(
    trace: Trace, host: tuple[int, int], origin_us: float, spans: Sequence[tuple[int, int]]
) -> float | None:
    """The heaviest host matmul/convolution's typical call by its floor (``call_floors`` of its
    self time): per operator name the median call's floor, the largest over names. None: no
    such operator in the traced steps."""
    from gpu_notebook.analysis.ops import self_time_ns

    rows = np.flatnonzero(
        trace.category_mask("cpu_op") & (trace.pid == host[0]) & (trace.tid == host[1])
    )
    start = np.rint((trace.ts_us[rows] - origin_us) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[rows] * 1000.0).astype(np.int64)
    self_ns = self_time_ns(start, end)
    names = trace.name_id[rows]
    keep = np.isin(names, trace.name_ids(lambda n: bool(MATMUL_OP.match(n))))
    if not keep.any():
        return None
    order = np.argsort(start[keep], kind="stable")
    names, start, self_ns = names[keep][order], start[keep][order], self_ns[keep][order]
    inside = np.zeros(start.size, dtype=np.bool_)
    for a, b in spans:
        inside[np.searchsorted(start, a) : np.searchsorted(start, b)] = True
    if not inside.any():
        return None
    floor = call_floors(names, start, self_ns, spans)[inside]
    names = names[inside]
    return max(float(np.median(floor[names == n])) / 1000.0 for n in np.unique(names))


# A call this many times its name's median was stretched by the machine (preempted), not work.
STRETCHED = 4.0
# Backward of a matmul or convolution, as the autograd engine runs it on the host thread.
WORK_BACKWARD = re.compile(
    r"autograd::engine::evaluate_function: (Addmm|Mm|Bmm|Baddbmm|Convolution|MkldnnConvolution)"
)


def model_work_share(
    trace: Trace,
    phases: PhaseBreakdown,
    rows: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    origin_us: float,
    floor: np.ndarray | None = None,
    gaps: tuple[np.ndarray, np.ndarray] | None = None,
    small_op_us: float = SMALL_OP_US,
) -> float | None:
    """The share of the traced steps' model side (every phase but the data wait) spent in
    top-level operators whose work grows with the batch: matmuls and convolutions and their
    backward, of any size, and any operator whose typical call (its name's median call floor,
    ``call_floors``, else its median call) takes ``small_op_us`` (``HostOverhead.small_op_us``)
    or more (work, not dispatch). The rest of the model side (Python between operators, small
    operators' dispatch, the optimizer's per-tensor updates) is paid once a step whatever the
    batch. Each call counts at most ``STRETCHED`` times its name's median: a
    call stretched by the machine (an ``add_`` of 2 us that took 18 ms on a loaded machine) is
    neither work nor per-step cost, and its excess leaves the model side too. ``rows``, ``start``, ``end``: the
    host thread's top-level operators (ns from ``origin_us``). None: no model side, or no
    phase to place the operators in."""
    from gpu_notebook.analysis.phases import phase_at
    from gpu_notebook.records import PHASES

    locate = phase_at(trace)
    model_us = phases.total_us - phases.phase_total_us.get("data", 0.0)
    if locate is None or model_us <= 0 or rows.size == 0:
        return None
    first = min(st.start_us for st in phases.steps)
    last = max(st.start_us + st.duration_us for st in phases.steps)
    mid_us = origin_us + (start + end) / 2000.0
    picked = (mid_us >= first) & (mid_us < last) & (locate(mid_us) != PHASES.index("data"))
    if not picked.any():
        return None
    names = trace.name_id[rows[picked]]
    dur_us = (end - start)[picked] / 1000.0
    ids, which = np.unique(names, return_inverse=True)
    floor_us = floor[picked] / 1000.0 if floor is not None else dur_us
    typical = np.array([np.median(floor_us[which == k]) for k in range(ids.size)])
    counted = np.minimum(dur_us, STRETCHED * typical[which])
    excess = float((dur_us - counted).sum())
    named = {
        int(i) for i in trace.name_ids(lambda n: bool(MATMUL_OP.match(n) or WORK_BACKWARD.match(n)))
    }
    real = np.array([int(i) in named for i in ids]) | (typical >= small_op_us)
    work_us = float(counted[real[which]].sum())
    traced = min(1.0, work_us / max(model_us - excess, work_us, 1e-9))
    if floor is None or gaps is None or trace.category_mask("kernel").any():
        return traced
    # On the CPU an operator's time is its work: what a call of the forward or backward takes
    # beyond a call's fixed cost grows with the batch, however small the call (heads_modulelist's
    # bias adds, sigmoid and BCE under 30 us were counted as paid once a step), and the share is
    # read undisturbed on both sides: each call and each gap's Python at its floor. Against the
    # traced time, a loaded run's waits between calls (no call's excess) read the model side
    # large and its work small: 7% of it, the bigger batch's low end 4.14x where by hand batch
    # 1024 gave 3.04x (load 12-15). The fixed cost is the optimizer's calls' typical floor
    # (per-parameter updates: no batch in them). The larger of the two readings: the low end is
    # a least gain, and a call stretched in every traced step reads larger against the time.
    phase = locate(mid_us)[picked]
    update = phase == PHASES.index("optimizer")
    fixed_us = float(np.median(floor_us[update])) if update.any() else float(typical.min())
    grows = ~real[which] & ~update & (phase != PHASES.index("sync"))
    work_us = float(floor_us[real[which]].sum())
    work_us += float(np.maximum(0.0, floor_us[grows] - fixed_us).sum())
    gap_us = origin_us + gaps[0] / 1000.0
    in_model = (gap_us >= first) & (gap_us < last) & (locate(gap_us) != PHASES.index("data"))
    model_floor_us = float(floor_us.sum()) + float(gaps[1][in_model].sum()) / 1000.0
    return max(traced, min(1.0, work_us / max(model_floor_us, work_us, 1e-9)))


def heaviest_matmul_us(top_ops: Sequence[OpStat], host: HostOverhead | None = None) -> float | None:
    """Self time per call of the heaviest host matmul/convolution (CPU runs): the host
    figures' reading by call floors where read (``HostOverhead.heaviest_matmul_us``: load only
    adds time to a call), else among the top ops the median call's (a call another process
    preempted says nothing of its size)."""
    if host is not None and host.heaviest_matmul_us is not None:
        return host.heaviest_matmul_us
    per_call = [
        op.median_self_us if op.median_self_us is not None else op.self_us / op.calls
        for op in top_ops
        if op.device == "cpu" and op.calls and MATMUL_OP.match(op.name)
    ]
    return max(per_call) if per_call else None


def host_bound(
    host: HostOverhead | None, top_ops: Sequence[OpStat] = (), *, on_gpu: bool = False
) -> bool:
    """Per-op overhead, not work, fills the step (see the module docstring).

    On a CPU run, also when even the heaviest matmul/convolution is under the small-operator
    line a call (``HostOverhead.small_op_us``: ``SMALL_OP_US`` in this machine's floors): the
    ops the model is made of are too small for any device to be kept busy by them (the ``launch.tiny_ops`` finding reads the same figure, so the two never disagree).
    """
    if host is None or host.ops_per_step < 1:
        return False
    if not on_gpu:
        heaviest = heaviest_matmul_us(top_ops, host)
        # Tiny matmuls do not make the step's ops small where calls of milliseconds hold it
        # (an optimizer's update of a large embedding table: analysis.large_elementwise_ops).
        if (
            heaviest is not None
            and heaviest < host.small_op_us
            and not large_ops_hold_step(top_ops, overhead_reach(host), host.op_floor_us)
        ):
            return True
    return host.median_op_us < host.small_op_us and overhead_reach(host) >= HOST_BOUND_SHARE


def in_memory_overhead(host: HostOverhead, data: float) -> float | None:
    """The per-op overhead share with a data wait of ``data`` that is per-sample assembly of
    batches already in memory (``rules.input_pipeline.data_in_memory``) counted as overhead:
    the loader's tiny operators are in ``small_op_share`` already, its Python between them is
    not (the loader's ranges are not Python of the step's), so the wait goes in whole and its
    small operators come out once. None: the small operators were not placed by phase.

    lr_finder_runs (an MLP of 128-256-256-1 at batch 64 over a TensorDataset) read between
    ops 24%, small ops 22% (10 points of them the loader's per-sample ``select``) and data 22%:
    the model side's overhead at 46-51% put the verdict on either side of the host line, so one
    script read input-bound, host-bound or too busy to judge in four runs; with the assembly
    counted it reads about 58% every run."""
    if host.data_small_share is None:
        return None
    return host.between_ops_share + host.small_op_share - host.data_small_share + max(0.0, data)


def in_memory_host_bound(host: HostOverhead | None, data: float | None) -> bool:
    """``host_bound`` with an in-memory data wait counted as the overhead it is
    (``in_memory_overhead``): the typical operator small and that overhead half the step."""
    if host is None or data is None or host.ops_per_step < 1:
        return False
    overhead = in_memory_overhead(host, data)
    return (
        overhead is not None
        and host.median_op_us < host.small_op_us
        and overhead >= HOST_BOUND_SHARE
    )


def overhead_reach(host: HostOverhead) -> float:
    """The per-op overhead share (Python between operators and small operators) as far as the
    traced steps read it: the most any one step read, the median where that was not kept.

    The figure sits where it sits by the program, not by the machine (call floors), but a
    program whose overhead is half its step reads 49.5% in one run and 50.1% in the next
    (nanogpt_shaped: steps 49-51%): the verdict and the compile fix then followed the side the
    median fell on. Read on its range over the steps, a range that reaches the line decides as
    the line (host-bound, said as near the half: ``overhead_near_line``) in every run whose
    steps straddle it; load only lowers a step's reading (a wait its floors miss stays in its
    own time), so it cannot lift a program across."""
    point = host.between_ops_share + host.small_op_share
    return max(point, host.overhead_share_high if host.overhead_share_high is not None else point)


def overhead_near_line(host: HostOverhead) -> bool:
    """The median step reads the overhead under ``HOST_BOUND_SHARE`` and a traced step at or
    over it: host-bound by the range, near the line."""
    return host.between_ops_share + host.small_op_share < HOST_BOUND_SHARE <= overhead_reach(host)


def outside_ops_share(analysis: Analysis, ops_in_other: float = 0.0) -> float | None:
    """Share of the run's step spent outside the model's operators and the data wait: host
    Python that no device shortens. None unless the phases are a whole-run estimate.

    ``ops_in_other``: the share of the step in operators the phases paint "other"
    (``sorthost_ops.ops_in_other_share``: a loop's own tensor work outside the model's
    phases), taken out of the phases' reading: tensor work, not Python.

    Trace-based (later windows weighted): the estimate's "other" and "unattributed". Hook-timed
    (every step's phases): hooks cannot tell the forward from host work between the optimizer
    and the next backward (a ``time.sleep`` there reads as forward), so the operators' time is
    taken from the window's trace instead (its step outside Python between operators) and the
    rest of the run's step is host work; the larger of the two readings is given.
    """
    phases, window = analysis.phases, analysis.window_phases
    if window is None or phases is None or phases.total_us <= 0:
        return None
    share = max(0.0, sum(phases.share(p) or 0.0 for p in ("other", "unattributed")) - ops_in_other)
    if phases.source == "trace" or analysis.host is None or not window.steps:
        return share
    n = max(1, len(phases.steps))
    step_us = phases.total_us / n
    data_us = phases.phase_total_us.get("data", 0.0) / n
    ops_us = (1.0 - analysis.host.between_ops_share) * window.total_us / len(window.steps)
    return max(share, min(1.0, max(0.0, step_us - data_us - ops_us) / step_us))


def per_sample_model_share(analysis: Analysis, real_work_us: float) -> float:
    """The share of the window's model side (every phase but the data wait) spent in operators
    whose work grows with the batch: ``HostOverhead.model_work_share`` where the trace read it,
    else matmuls, convolutions and operators whose typical call takes ``real_work_us`` or more,
    by self time among the window's top ten operators. 0 where nothing is read."""
    host = analysis.host
    if host is not None and host.model_work_share is not None:
        return host.model_work_share
    phases = analysis.window_phases or analysis.phases
    if phases is None:
        return 0.0
    model_us = phases.total_us - phases.phase_total_us.get("data", 0.0)
    if model_us <= 0:
        return 0.0
    work = sum(
        op.self_us
        for op in analysis.top_ops
        if op.device == "cpu"
        and (MATMUL_OP.match(op.name) or (op.median_self_us or 0.0) >= real_work_us)
    )
    return min(1.0, work / model_us)
