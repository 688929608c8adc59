"""Would a GPU help? One step of a loop measured without a GPU, estimated on a named GPU.

From the CPU run's trace, per step (the profiled steps, stalled ones left out):

- **device time**: every operator that would launch a kernel gets
  ``max(MIN_KERNEL_US, work / rate)``. Its work is its FLOPs over the card's peak (matmuls,
  from the recorded shapes when the trace has them) or, without shapes, what its CPU time
  could at most have done on this CPU (``CPU_GFLOPS_PER_CORE`` x cores for matmuls,
  ``CPU_GBPS_PER_CORE`` x cores of memory traffic for the rest) over the card's rate. Peaks
  are derated by ``GEMM_EFFICIENCY`` / ``BANDWIDTH_EFFICIENCY``;
- **host time**: the Python between operators stays as it is; every kernel costs the host its
  dispatch and launch (``HOST_PER_KERNEL_US``); operators that launch nothing (views,
  ``empty``) and composites keep their own CPU time up to that a call, the rest of it being
  tensor work (device time). Every tensor operator of the steps is work, never host time:
  each call is read as a composite or not on its own (an operator that calls itself, as
  ``aten::sort`` does, is both), and the loop's operators outside the model's phases, which
  the phases paint "other", are kernels, not Python (``sorthost_ops``);
- **data wait**: the DataLoader's wait stays (a GPU does not load data); the operators that run
  inside it (a dataset's own torch work, a sampler's ``randperm().tolist()``) are that wait, on
  CPU tensors: they are neither kernels nor reads of device values; nor are the reads of CPU
  scalars the framework keeps there whatever the device (an Adam step counter, a packed
  sequence's ``batch_sizes`` read by its recurrent layer);
- the step is ``data + max(host, device)`` when the host can run ahead of the GPU, and
  ``data + host + device`` when the loop reads a device value every step (``.item()``: each
  read waits for the queued kernels).

Checked against the reference GPU traces (tests/test_gpu_estimate.py), all profiled:
- host cost of an operator that launches one kernel (dispatch + launch, median): 12.1 us (V100),
  12.0, 17.0, 24.0 and 51.4 us (four A100 traces), 27.5 us (MI250); ``HOST_PER_KERNEL_US`` is
  12 us: the fastest hosts' figure, as the profiler itself adds a few us to each op. A
  loop of tiny ops is paced by this; on the slower hosts the estimate is up to ~4x optimistic;
- the shortest kernels (10th percentile) run 1.8-2.1 us on V100/A100; ``MIN_KERNEL_US`` is 3 us;
- the MI250 toy trace's two matmuls (recorded shapes, 164 kFLOP each) ran 12.6 and 17.6 us where
  the estimate gives its 3 us floor: launch-sized GEMMs run 4-6x longer than any peak says, so
  for them the device side is optimistic, and the host side (27.5 us an op there) decides anyway.
For big GEMMs the peaks decide, and ``GEMM_EFFICIENCY`` is the main uncertainty (real training
GEMMs reach 50-85% of peak). No run on a real GPU of a loop first measured here was at hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_notebook.analysis.host import MATMUL_OP, outside_ops_share
from gpu_notebook.analysis.ops import self_time_ns
from gpu_notebook.analysis.optimizer_split import optimizer_class
from gpu_notebook.analysis.phases import find_host_thread, step_bounds
from gpu_notebook.analysis.sorthost_ops import ops_in_other_share
from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.markers import DATALOADER_PREFIX, OPTIMIZER_STEP_PREFIX, VALUE_READ_OPS
from gpu_notebook.records import Analysis, EstimateLimit, GpuEstimate, PhaseBreakdown, Run
from gpu_notebook.traces.kineto import Trace
from gpu_notebook.traces.windows import WindowTraces

__all__ = [
    "DEFAULT_GPU",
    "GPUS",
    "GpuSpec",
    "estimate_from_trace",
    "estimate_on_gpu",
    "gpu_spec",
]


@dataclass(frozen=True)
class GpuSpec:
    """Peak figures of one card (dense, no sparsity), from its vendor's datasheet."""

    key: str
    name: str
    fp32_tflops: float  # CUDA-core float32
    tf32_tflops: float | None  # tensor-core TF32 (None: the card has none)
    bf16_tflops: float  # tensor-core bf16 (fp16 where the card has no bf16)
    memory_gbps: float  # HBM/GDDR bandwidth, GB/s
    source: str


# Dense peaks (the datasheets' "with sparsity" figures halved).
GPUS: Mapping[str, GpuSpec] = {
    g.key: g
    for g in (
        # NVIDIA A100 Tensor Core GPU datasheet (2021): SXM4 80GB, 2,039 GB/s.
        GpuSpec(
            "a100", "NVIDIA A100-SXM4-80GB", 19.5, 156.0, 312.0, 2039.0, "NVIDIA A100 datasheet"
        ),
        # NVIDIA H100 Tensor Core GPU datasheet (2023): SXM5, 3.35 TB/s.
        GpuSpec(
            "h100", "NVIDIA H100 SXM5 80GB", 67.0, 494.7, 989.4, 3350.0, "NVIDIA H100 datasheet"
        ),
        # NVIDIA H200 datasheet (2024): the H100's compute, 4.8 TB/s HBM3e.
        GpuSpec("h200", "NVIDIA H200 141GB", 67.0, 494.7, 989.4, 4800.0, "NVIDIA H200 datasheet"),
        # NVIDIA L4 datasheet (2023): 300 GB/s GDDR6.
        GpuSpec("l4", "NVIDIA L4", 30.3, 60.0, 121.0, 300.0, "NVIDIA L4 datasheet"),
        # NVIDIA A10 datasheet (2021): 600 GB/s GDDR6.
        GpuSpec("a10", "NVIDIA A10", 31.2, 62.5, 125.0, 600.0, "NVIDIA A10 datasheet"),
        # NVIDIA T4 datasheet (2019): no TF32/bf16; fp16 tensor cores 65 TFLOPS, 320 GB/s.
        GpuSpec("t4", "NVIDIA T4", 8.1, None, 65.0, 320.0, "NVIDIA T4 datasheet"),
        # NVIDIA V100 datasheet (2018), SXM2: no TF32/bf16; fp16 tensor cores 125 TFLOPS, 900 GB/s.
        GpuSpec("v100", "Tesla V100-SXM2-32GB", 15.7, None, 125.0, 900.0, "NVIDIA V100 datasheet"),
        # AMD Instinct MI250 datasheet: fp32 matrix 90.5 TFLOPS (vector 45.3), bf16 362, 3.2 TB/s.
        GpuSpec(
            "mi250", "AMD Instinct MI250", 45.3, 90.5, 362.1, 3276.8, "AMD Instinct MI250 datasheet"
        ),
    )
}
DEFAULT_GPU = "a100"  # the most common card to rent for training

# Host cost of one kernel on a GPU: the op's dispatch plus cudaLaunchKernel. The reference
# traces' cudaLaunchKernel alone has medians of 5.2 us (V100) and 9.7 us (A100); a whole
# one-kernel operator 12-51 us (profiled; module docstring).
HOST_PER_KERNEL_US = 12.0
# A kernel never takes less than this on the device (reference traces: p10 1.8-2.1 us on
# V100/A100; tiny elementwise kernels 2-8 us on MI250).
MIN_KERNEL_US = 3.0
# Share of the peaks real kernels reach: cuBLAS GEMMs of training size 50-85% of peak; memory
# bound kernels 70-90% of the bandwidth (NVIDIA "Matrix Multiplication Background" guide).
GEMM_EFFICIENCY = 0.6
BANDWIDTH_EFFICIENCY = 0.7
# What a CPU core does at most (AVX2: 2 FMA x 8 float32 lanes x ~3 GHz = 96 GFLOP/s peak, sgemm
# reaches about half on training shapes; one core streams ~10 GB/s). Without shapes, an op's CPU
# time times these is the most work it can have been: the GPU time is then not underestimated.
CPU_GFLOPS_PER_CORE = 50.0
CPU_GBPS_PER_CORE = 10.0
# torch.optim classes whose step reads its own step counter (``_get_value(step)``: ``.item()``)
# from a CPU scalar when neither capturable nor fused (torch keeps ``state["step"]`` on the CPU
# for that): those reads wait for no kernel on a GPU. Checked on torch 2.13 (reads in the step,
# ``state["step"]`` on the CPU); LBFGS reads the loss and the gradients: real device reads.
CPU_STEP_COUNTER_OPTIMIZERS = frozenset({"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad"})
# Recurrent layers given a PackedSequence read its ``batch_sizes``, which torch keeps on the CPU
# whatever the device (pack_padded_sequence takes CPU lengths): ``int(batch_sizes[0])`` and the
# zero state sized by ``batch_sizes[0]`` (nn/modules/rnn.py, torch 2.x), each an aten::item just
# before the layer's operator, with only these operators between (the index, the zero state,
# the hidden state's permutation, and their children). Those reads wait for no kernel on a GPU.
RNN_OPS = frozenset({"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu"})
RNN_PREAMBLE_OPS = frozenset(
    {*VALUE_READ_OPS, "aten::select", "aten::as_strided", "aten::zeros", "aten::empty", "aten::zero_",
     "aten::fill_", "aten::index_select", "aten::resize_"}
)  # fmt: skip

# Operators a read of a fresh CPU tensor may pass through from its factory (``torch.rand(())
# < 0.5``: rand, lt, then the read): comparisons, arithmetic, reductions, views. Never a copy
# (``aten::to``): that may be the move to a device a GPU run makes.
HOST_MADE_PASS_OPS = frozenset(
    {"aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::eq", "aten::ne", "aten::mul",
     "aten::add", "aten::sub", "aten::rsub", "aten::div", "aten::neg", "aten::abs",
     "aten::floor", "aten::ceil", "aten::round", "aten::remainder", "aten::sum", "aten::mean",
     "aten::max", "aten::min", "aten::any", "aten::all", "aten::select", "aten::slice",
     "aten::squeeze", "aten::unsqueeze", "aten::view", "aten::reshape", "aten::logical_and",
     "aten::logical_or", "aten::logical_not", "aten::clamp", "aten::detach_"}
)  # fmt: skip
HOST_MADE_CHAIN = 4  # operators at most between the factory and the read
# Operators that launch no kernel: views, metadata, allocation. Their CPU time stays on the host.
NO_KERNEL = re.compile(
    r"aten::(view|_unsafe_view|reshape|as_strided|t|transpose|permute|expand|expand_as|squeeze|"
    r"unsqueeze|select|slice|narrow|alias|detach|detach_|empty|empty_like|empty_strided|"
    r"resize_|result_type|size|stride|is_nonzero|_reshape_alias|lift_fresh|numpy_T|split|chunk|"
    r"unbind|flatten|unflatten|contiguous|_has_compatible_shallow_copy_type|set_|to|_to_copy|"
    r"lift|item|_local_scalar_dense)$"
)
# Ranges that are not operators of their own (their children are).
NOT_AN_OP = re.compile(r"^(autograd::|Optimizer\.|ProfilerStep|##|torch::autograd::|<)")


def gpu_spec(key: str | None) -> GpuSpec:
    """The table entry for ``key`` ("A100", "h100", "nvidia l4"): ValueError with the choices."""
    wanted = (key or DEFAULT_GPU).lower().replace("nvidia", "").replace("tesla", "").strip()
    if wanted in GPUS:
        return GPUS[wanted]
    raise ValueError(f"unknown GPU {key!r}; known: {', '.join(sorted(GPUS))}")


@dataclass(frozen=True)
class _OpTimes:
    name: str
    calls: int
    self_us: float
    total_us: float


def _windows(trace: Trace, phases: PhaseBreakdown) -> list[tuple[float, float]]:
    """The kept steps' spans on the trace clock: each step's bounds in the trace. Not its start
    plus its duration: a step's duration is its own time, less its wait for a core
    (``interference.own_time_phases``), so under load that span ended before the step's last
    operators (a loaded run's estimate lost a quarter of its reads and kernels)."""
    bounds = step_bounds(trace)
    spans = (
        {}
        if bounds is None
        else dict(zip(bounds.index, zip(bounds.start_us, bounds.end_us, strict=True), strict=True))
    )
    return [spans.get(s.index, (s.start_us, s.start_us + s.duration_us)) for s in phases.steps]


def _ops_in_steps(
    trace: Trace, phases: PhaseBreakdown, host_factories: frozenset[str] = frozenset()
) -> list[_OpTimes]:
    """Host operators starting inside the kept steps: calls, self and total time by name.
    ``host_factories``: the cell's CPU factories (``_host_made_reads``): reads of what they
    just made are left out."""
    host = find_host_thread(trace)
    if host is None:
        return []
    rows = np.flatnonzero(
        trace.category_mask("cpu_op") & (trace.pid == host[0]) & (trace.tid == host[1])
    )
    if rows.size == 0:
        return []
    origin = float(trace.ts_us[rows].min())
    start = np.rint((trace.ts_us[rows] - origin) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[rows] * 1000.0).astype(np.int64)
    self_ns = self_time_ns(start, end)
    keep = np.zeros(rows.size, dtype=np.bool_)
    ts = trace.ts_us[rows]
    for a, b in _windows(trace, phases):
        keep |= (ts >= a) & (ts < b)
    # The DataLoader's own work (a dataset's torch ops, a sampler's reads) is the data wait,
    # kept apart as it is: on a GPU it stays on the CPU, before the batch is copied.
    loader = np.flatnonzero(
        (trace.pid == host[0]) & (trace.tid == host[1]) & trace.name_mask(prefix=DATALOADER_PREFIX)
    )
    for r in loader:
        a = float(trace.ts_us[r])
        keep &= ~((ts >= a) & (ts < a + float(trace.dur_us[r])))
    # An optimizer's read of its own CPU step counter is no read of a device value.
    counter_steps = [
        r
        for r in np.flatnonzero(
            (trace.pid == host[0])
            & (trace.tid == host[1])
            & trace.name_mask(prefix=OPTIMIZER_STEP_PREFIX)
        )
        if optimizer_class(trace.names[int(trace.name_id[r])]) in CPU_STEP_COUNTER_OPTIMIZERS
    ]
    if counter_steps:
        reads = trace.name_mask(names=VALUE_READ_OPS)[rows]
        for r in counter_steps:
            a = float(trace.ts_us[r])
            keep &= ~(reads & (ts >= a) & (ts < a + float(trace.dur_us[r])))
    keep &= ~_rnn_metadata_reads(trace, rows)
    keep &= ~_host_made_reads(trace, rows, host_factories)
    # Summed by name and by what each call is: a composite (its children did the work) or not.
    # By name alone an operator that calls itself (aten::sort -> the stable aten::sort, which
    # sorts) summed the inner call's total twice, read as a composite, and its sort as host
    # time (generator_argsort_hardneg: "host 322.7 ms" on an A100 for a 68.6 ms CPU step).
    composite = 2 * self_ns < end - start
    acc: dict[tuple[str, bool], list[float]] = {}
    for i in np.flatnonzero(keep):
        name = trace.names[int(trace.name_id[rows[i]])]
        row = acc.setdefault((name, bool(composite[i])), [0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += float(self_ns[i]) / 1000.0
        row[2] += float(end[i] - start[i]) / 1000.0
    return [_OpTimes(n, int(v[0]), v[1], v[2]) for (n, _), v in acc.items()]


def _host_made_reads(trace: Trace, rows: np.ndarray, factories: frozenset[str]) -> np.ndarray:
    """Of the host thread's operators ``rows``, the reads of a tensor a factory of
    ``factories`` (cell.syncs.host_factories: made on the CPU, on a GPU too) has just made: a
    read whose top-level operator (``aten::is_nonzero`` of ``if t:``, or the ``aten::item``) has
    that factory before it with only ``HOST_MADE_PASS_OPS`` between (unseen round 13: an
    augment's ``if torch.rand(()) < 0.5`` per image read "256 reads of device values a step")."""
    out = np.zeros(rows.size, dtype=np.bool_)
    names = [trace.names[int(trace.name_id[r])] for r in rows]
    if not factories or not any(n in factories for n in names):
        return out
    ts = trace.ts_us[rows]
    end = ts + trace.dur_us[rows]
    tops: list[int] = []  # top-level operators, in start order
    top_of = np.full(rows.size, -1, dtype=np.int64)  # the top-level operator each one is in
    top_end = -np.inf
    for i in np.argsort(ts, kind="stable"):
        if ts[i] >= top_end:
            tops.append(int(i))
            top_end = end[i]
        top_of[i] = tops[-1]
    fresh: set[int] = set()
    for at, i in enumerate(tops):
        for back in range(1, HOST_MADE_CHAIN + 2):
            if at - back < 0:
                break
            name = names[tops[at - back]]
            if name in factories:
                fresh.add(i)
                break
            if name not in HOST_MADE_PASS_OPS:
                break
    for i, name in enumerate(names):
        out[i] = name in VALUE_READ_OPS and int(top_of[i]) in fresh
    return out


def _rnn_metadata_reads(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of the host thread's operators ``rows``, the reads a recurrent layer does of its packed
    input's CPU ``batch_sizes`` (``RNN_OPS``, ``RNN_PREAMBLE_OPS``): the reads after an index
    between the layer's operator and the last operator before it that is not its preamble."""
    out = np.zeros(rows.size, dtype=np.bool_)
    names = [trace.names[int(trace.name_id[r])] for r in rows]
    if not any(n in RNN_OPS for n in names):
        return out
    ts = trace.ts_us[rows]
    end = ts + trace.dur_us[rows]
    order = np.argsort(ts, kind="stable")
    for at, i in enumerate(order):
        if names[i] not in RNN_OPS:
            continue
        preamble: list[int] = []
        for k in range(at - 1, -1, -1):  # back from the layer: what ended before it started
            j = int(order[k])
            if end[j] > ts[i]:
                continue  # a range around the layer (its module's, the step's)
            if names[j] not in RNN_PREAMBLE_OPS:
                break
            preamble.append(j)
        # Reads of ``batch_sizes[0]``: after its index (aten::select); a read with no index
        # before it (``int(lengths.max())`` just before the layer) is the cell's own.
        indexed = False
        for j in reversed(preamble):
            indexed = indexed or names[j] == "aten::select"
            out[j] = indexed and names[j] in VALUE_READ_OPS
    return out


def _matmul_flops(name: str, dims: Any) -> float | None:
    """FLOPs of one leaf matmul from its recorded input shapes (None: not a shape we size)."""
    try:
        shapes = [list(map(int, d)) for d in dims]
    except (TypeError, ValueError):
        return None
    op = name.removeprefix("aten::")
    mats = [s for s in shapes if len(s) >= 2]
    if op in ("mm", "addmm") and len(mats) >= 2 and len(mats[-2]) == 2 and len(mats[-1]) == 2:
        (m, k), (_, n) = mats[-2], mats[-1]
        return 2.0 * m * k * n
    if op in ("bmm", "baddbmm") and len(mats) >= 2 and len(mats[-2]) == 3 and len(mats[-1]) == 3:
        (b, m, k), (_, _, n) = mats[-2], mats[-1]
        return 2.0 * b * m * k * n
    return None


def shape_flops(trace: Trace, phases: PhaseBreakdown) -> dict[str, float]:
    """FLOPs by operator name over the kept steps, from ``Input Dims`` (empty: none recorded)."""
    recorded = trace.kept_args.get("input_dims", {})
    if not recorded:
        return {}
    is_op = trace.category_mask("cpu_op")
    windows = _windows(trace, phases)
    out: dict[str, float] = {}
    for row in recorded:  # in file order, as the sums always ran
        name = trace.name_of(row)
        if not is_op[row] or not MATMUL_OP.match(name):
            continue
        ts = float(trace.ts_us[row])
        if not any(a <= ts < b for a, b in windows):
            continue
        dims = trace.kept_arg("input_dims", row)
        flops = _matmul_flops(name, dims) if dims is not None else None
        if flops is not None:
            out[name] = out.get(name, 0.0) + flops
    return out


def estimate_from_ops(
    ops: Iterable[_OpTimes],
    *,
    steps: int,
    step_us: float,
    data_us: float,
    python_us: float,
    cores: int,
    spec: GpuSpec,
    flops_by_op: Mapping[str, float] | None = None,
    precision: str = "fp32",
    off_core_us: float | None = None,
    skipped_reads: float = 0.0,
    untraced_reads: float = 0.0,
    host_reads: float = 0.0,
) -> GpuEstimate:
    """The estimate from per-step figures (all ``*_us`` per step; ``ops`` summed over ``steps``).

    ``off_core_us``: the part of the step the loop thread was off a core without waiting for one
    (sleeping, blocked on I/O or a lock): the estimated step is never shorter than it.
    ``skipped_reads``: reads of device values a step that the cell runs only on a GPU (a
    ``torch.cuda.synchronize()`` under ``if torch.cuda.is_available():``), absent from this
    CPU trace: on the GPU they make host and GPU take turns as the trace's reads do.
    ``untraced_reads``: the cell's reads a step that record no operator on the CPU
    (``out.cpu().numpy()``: the tensor is already there), counted likewise.
    ``host_reads``: the cell's reads a step of values made on the CPU that the trace records
    as reads (``.item()`` of the loader's CPU labels): left out, they wait for no kernel.
    """
    flops_by_op = flops_by_op or {}
    peak_tflops = {"fp32": spec.fp32_tflops, "tf32": spec.tf32_tflops or spec.fp32_tflops,
                   "bf16": spec.bf16_tflops}[precision]  # fmt: skip
    flops_rate = peak_tflops * 1e12 * GEMM_EFFICIENCY  # FLOP/s
    bytes_rate = spec.memory_gbps * 1e9 * BANDWIDTH_EFFICIENCY  # B/s
    cpu_flops = CPU_GFLOPS_PER_CORE * 1e9 * cores
    cpu_bytes = CPU_GBPS_PER_CORE * 1e9 * cores
    device_us = host_ops_us = kernels = 0.0
    total_flops = 0.0
    # One read records aten::item and, under it, aten::_local_scalar_dense (float()/int()/bool()
    # of a tensor too): the larger count is the reads, each once (a direct call has no item).
    ops = list(ops)
    read_calls: dict[str, float] = {}
    for op in ops:
        if op.name in VALUE_READ_OPS:
            read_calls[op.name] = read_calls.get(op.name, 0.0) + op.calls
    reads = max(read_calls.values(), default=0.0)
    reads = max(0.0, reads - host_reads * max(1, steps))
    reads += (skipped_reads + untraced_reads) * max(1, steps)
    for op in ops:
        if NOT_AN_OP.match(op.name):
            continue
        if NO_KERNEL.match(op.name) or op.self_us < 0.5 * op.total_us:
            # A view, or a composite whose children do the work: its own time is dispatch, at
            # most a kernel's host cost a call; the rest of it is tensor work the CPU did in
            # the operator itself, which the GPU does (at the card's bandwidth, as below).
            dispatch_us = min(op.self_us, op.calls * HOST_PER_KERNEL_US)
            host_ops_us += dispatch_us
            device_us += (op.self_us - dispatch_us) * cpu_bytes / bytes_rate
            continue
        kernels += op.calls
        per_call_us = op.self_us / op.calls
        if op.name in flops_by_op:
            work_s = flops_by_op[op.name] / op.calls / flops_rate
            total_flops += flops_by_op[op.name]
        elif MATMUL_OP.match(op.name):
            work_s = per_call_us * 1e-6 * cpu_flops / flops_rate
        else:
            work_s = per_call_us * 1e-6 * cpu_bytes / bytes_rate
        device_us += op.calls * max(MIN_KERNEL_US, work_s * 1e6)
        host_ops_us += op.calls * HOST_PER_KERNEL_US
    n = max(1, steps)
    device_step, kernels_step = device_us / n, kernels / n
    host_step = python_us + host_ops_us / n
    overlapped = reads == 0
    gpu_step = data_us + (max(host_step, device_step) if overlapped else host_step + device_step)
    parts: dict[EstimateLimit, float] = {"data": data_us, "host": host_step, "compute": device_step}
    limits = max(parts, key=lambda k: parts[k])
    if off_core_us is not None and off_core_us > gpu_step:
        # The loop's own waits outside torch outlast the rest: a GPU shortens none of them.
        gpu_step, limits = off_core_us, "off_core"
    return GpuEstimate(
        key=spec.key,
        gpu=spec.name,
        measured_step_s=step_us / 1e6,
        step_s=gpu_step / 1e6,
        speedup=step_us / gpu_step if gpu_step > 0 else float("inf"),
        limited_by="",  # worded by words.gpu_estimate
        data_s=data_us / 1e6,
        host_s=host_step / 1e6,
        device_s=device_step / 1e6,
        kernels_per_step=kernels_step,
        flops_per_step=total_flops / n if total_flops else None,
        overlapped=overlapped,
        precision=precision,
        peak_tflops=peak_tflops,
        reads_per_step=reads / n,
        skipped_reads_per_step=skipped_reads,
        untraced_reads_per_step=untraced_reads,
        cores=cores,
        off_core_s=off_core_us / 1e6 if off_core_us is not None else None,
        limits=limits,
    )


def estimate_from_trace(
    trace: Trace,
    analysis: Analysis,
    spec: GpuSpec,
    *,
    cores: int,
    off_core_share: float | None = None,
    precision: str = "fp32",
    skipped_reads: float = 0.0,
    untraced_reads: float = 0.0,
    host_factories: frozenset[str] = frozenset(),
    host_reads: float = 0.0,
) -> GpuEstimate | None:
    """The estimate for a CPU trace already analysed (None: no steps to size).

    ``off_core_share``: the share of the loop thread's own step time it spent off a core without
    waiting for one (analysis.on_cpu), over the run; that share of the step stays on a GPU.
    """
    steady, _ = without_stalls(analysis)
    phases = steady.phases
    # The operators come from the trace's own steps; the step they sit in is the run's: with a
    # whole-run estimate (``window_phases`` set) the window's detail gives the kernels, the
    # estimate gives the step, its data wait and its host time between operators.
    detail = analysis.window_phases if analysis.window_phases is not None else phases
    if phases is None or not phases.steps or phases.total_us <= 0:
        return None
    if detail is None or not detail.steps or detail.source != "trace":
        return None
    n = len(phases.steps)
    step_us = phases.total_us / n
    data_us = phases.phase_total_us.get("data", 0.0) / n
    # The loop's tensor work outside the model's phases (painted "other") is kernels below,
    # not host Python: taken out of the phases' reading of the host time.
    in_other = ops_in_other_share(trace, _windows(trace, detail))
    outside = outside_ops_share(steady, in_other)
    if outside is not None:  # a whole-run estimate: its host time outside the operators
        python_us = outside * step_us
    elif analysis.host is not None:
        python_us = analysis.host.between_ops_share * step_us
    else:
        painted = sum(phases.share(p) or 0.0 for p in ("other", "unattributed"))
        python_us = max(0.0, painted - in_other) * step_us
    flops = shape_flops(trace, detail)
    return estimate_from_ops(
        _ops_in_steps(trace, detail, host_factories),
        steps=len(detail.steps),
        step_us=step_us,
        data_us=data_us,
        python_us=python_us,
        cores=cores,
        spec=spec,
        flops_by_op=flops,
        precision=precision,
        off_core_us=off_core_share * step_us if off_core_share is not None else None,
        skipped_reads=skipped_reads,
        untraced_reads=untraced_reads,
        host_reads=host_reads,
    )


def estimate_on_gpu(
    run: Run,
    analysis: Analysis,
    gpu: str | None = None,
    traces: WindowTraces | None = None,
    *,
    autocast: bool = False,
    skipped_reads: float = 0.0,
    untraced_reads: float = 0.0,
    host_factories: frozenset[str] = frozenset(),
    host_reads: float = 0.0,
) -> GpuEstimate | None:
    """The estimate for ``run`` on ``gpu`` (a GPUS key; default ``DEFAULT_GPU``).

    None when the run used a GPU (its own figures answer), or has no trace of steps.
    ``traces``: the report's decoded window traces (without it the file is decoded here).
    ``autocast``: the cell trains under ``torch.autocast`` (on the CPU with bf16): on the GPU
    its matmuls run at the card's bf16/fp16 peak, not its fp32 one.
    ``skipped_reads``: the cell's reads a step that only a GPU run makes (``estimate_from_ops``).
    ``untraced_reads``: the cell's reads a step that no CPU trace records (``estimate_from_ops``).
    ``host_factories``: the cell's factories of CPU tensors (``_host_made_reads``).
    ``host_reads``: the cell's traced reads a step of CPU values (``estimate_from_ops``).
    """
    if run.env.cuda_available or run.env.gpus or analysis.gpu is not None:
        return None
    if run.window.recorded_steps == 0:  # no whole step in the trace (a within-step window)
        return None
    trace = (WindowTraces() if traces is None else traces).get(run.window.trace_path)
    if trace is None:
        return None
    from gpu_notebook.analysis.on_cpu import on_cpu

    # The thread's time off a core (wall less its wait for a core, less its time on one) is a
    # sleep or a block a GPU does not shorten; read over every step, as a share, so the
    # machine's load (the wait for a core) scales with the rest of the step.
    on = on_cpu(run.steps.steps, run.steps.process_cpu)
    return estimate_from_trace(
        trace,
        analysis,
        gpu_spec(gpu),
        cores=max(1, run.env.cpu_count),
        off_core_share=1.0 - on.computing if on is not None else None,
        precision="bf16" if autocast else "fp32",
        skipped_reads=skipped_reads,
        untraced_reads=untraced_reads,
        host_factories=host_factories,
        host_reads=host_reads,
    )
