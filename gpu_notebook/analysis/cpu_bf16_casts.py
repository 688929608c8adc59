"""A CPU run's dtype casts beside its matmuls, found in a profiler trace.

What torch 2.13's trace shows on this CPU (an MLP's step under ``torch.autocast("cpu",
dtype=torch.bfloat16)``, 2026-12-07): each ``aten::linear`` casts its float32 weight and input
first (``aten::to`` -> ``aten::_to_copy`` -> ``aten::copy_``, 14 in a 3-layer forward and 14
more in the backward's ``ToCopyBackward0``, the gradients back to float32); in float32 the same
step has no ``aten::_to_copy`` at all. The casts held 15% of the profiled step there, and the
bfloat16 ``aten::mm``/``aten::addmm`` took 1.3-1.5x their float32 time (a second trace, not this
one: one trace holds one dtype, so the matmul's slower path is not read here).

The operators the autocast runs in bfloat16 (``BF16_SLOWDOWN``: the matmuls and convolutions
it casts for, and the activations between them, which take the bfloat16 output), each with the
time it took here and how much slower in bfloat16 than in float32 it measured on this CPU
(``benchmarks/cpu_bf16_op_factors.py``): what float32 saves on them is the range's top beside
the casts. Where the trace recorded input types (``record_shapes``), only the calls with a
bfloat16 input are counted; else every call in the steps (a top: an activation outside the
autocast's reach is counted too).

Counted: the outermost ``aten::_to_copy`` calls inside the profiled steps (a cast's own copy
within it once), floored over the steps (``_floored_us``: a time slice given to another process
lands in one step's cast, not in every step's, as analysis/amp_scaler floors the scaler's
operators), against every operator floored alike; and their plain sum against the steps' wall
time. Each pair is read on one clock: on a busy machine a long matmul waits in every step and a
short cast escapes in some, so a floored cast over the steps' own time (the step clock's waits
out) read 71% where its sum over the wall time read 21% (load 14). Beside them,
the matmul operators' time. A GPU trace reads nothing: there casts run as kernels, and bfloat16
autocast is the right recipe.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook.records import Bf16OpTime, CpuBf16Casts, PhaseBreakdown
from gpu_notebook.traces.kineto import Trace

__all__ = ["BF16_SLOWDOWN", "CAST_OP", "MATMUL_OPS", "cpu_bf16_casts"]

CAST_OP = "aten::_to_copy"  # the copy behind aten::to / .to(dtype) / autocast's casts
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
# bfloat16 time over float32's, per operator, on this avx512_bf16 CPU without AMX, one thread,
# on the process CPU clock (benchmarks/cpu_bf16_op_factors.py, three runs at load 10-16,
# 2026-12-07; the shapes of benchmarks/cpu_bf16_ab.py's MLP at batch 128, a 32-channel 3x3
# convolution on 32x32 images): each the slowest ratio of medians of the three, as the range's
# top is the most float32 can save. A trace's wall times under load read the matmuls only
# 1.1-1.45x slower: a wait for a core lands alike on both dtypes and dilutes the ratio. The
# convolutions read 0.60x-1.63x over the three runs (bfloat16 not always slower): their top.
BF16_SLOWDOWN: dict[str, float] = {
    "aten::mm": 1.83,  # 1.42-1.83 (the backward's input and weight gradients)
    "aten::addmm": 1.80,  # 1.74-1.80 (the forward's linear)
    "aten::bmm": 2.13,  # 1.70-2.13
    "aten::baddbmm": 1.62,  # 1.60-1.62
    "aten::convolution": 1.63,  # 0.60-1.63
    "aten::convolution_backward": 1.53,  # 0.93-1.53
    "aten::relu": 2.24,  # 2.14-2.24
    "aten::threshold_backward": 1.67,  # 1.09-1.67 (relu's backward)
    "aten::gelu": 1.22,  # 1.14-1.22
    "aten::gelu_backward": 1.13,  # 1.00-1.13
    "aten::silu": 1.35,  # 1.17-1.35
    "aten::silu_backward": 1.27,  # 0.86-1.27
}


def cpu_bf16_casts(trace: Trace, phases: PhaseBreakdown | None) -> CpuBf16Casts | None:
    """The casts and matmuls of the traced steps; None: no steps recorded, or GPU activity."""
    if phases is None or phases.source != "trace" or not phases.steps or phases.total_us <= 0:
        return None
    if trace.has_gpu_activity:
        return None
    spans = [(s.start_us, s.start_us + s.duration_us) for s in phases.steps]
    casts = trace.outermost(_rows_in(trace, (CAST_OP,), spans))
    matmuls = trace.outermost(_rows_in(trace, MATMUL_OPS, spans))
    everything = trace.outermost(_rows_in(trace, None, spans))
    bf16, dtypes_read = _bf16_rows(
        trace, trace.outermost(_rows_in(trace, tuple(BF16_SLOWDOWN), spans))
    )
    return CpuBf16Casts(
        casts=len(casts),
        casts_us=_floored_us(trace, casts, spans),
        casts_sum_us=float(sum(float(trace.dur_us[r]) for r in casts)),
        matmuls=len(matmuls),
        matmul_us=float(sum(float(trace.dur_us[r]) for r in matmuls)),
        steps_us=phases.total_us,
        steps=len(phases.steps),
        ops_us=_floored_us(trace, everything, spans) if everything else None,
        bf16_ops=_by_name(trace, bf16, spans),
        dtypes_read=dtypes_read,
    )


def _bf16_rows(trace: Trace, rows: list[int]) -> tuple[list[int], bool]:
    """``rows`` that ran in bfloat16: those with a bfloat16 input where the trace recorded input
    types (and True), else all of them (and False)."""
    types = trace.kept_args.get("input_types", {})
    if not types:
        return rows, False
    return [r for r in rows if "BFloat16" in str(trace.kept_arg("input_types", r, ""))], True


def _by_name(
    trace: Trace, rows: list[int], spans: list[tuple[float, float]]
) -> tuple[Bf16OpTime, ...]:
    """The rows summed and floored by operator, each with its slowdown, in ``BF16_SLOWDOWN``'s
    order."""
    named: dict[str, list[int]] = {}
    for r in rows:
        named.setdefault(trace.name_of(r), []).append(r)
    return tuple(
        Bf16OpTime(
            name,
            len(named[name]),
            float(sum(float(trace.dur_us[r]) for r in named[name])),
            factor,
            floored_us=_floored_us(trace, named[name], spans),
        )
        for name, factor in BF16_SLOWDOWN.items()
        if name in named
    )


def _rows_in(
    trace: Trace, names: tuple[str, ...] | None, spans: list[tuple[float, float]]
) -> list[int]:
    """The operators named ``names`` (None: every one) that start inside the steps."""
    cpu = np.flatnonzero(trace.category_mask("cpu_op"))
    if names is None:
        return [int(r) for r in cpu if any(a <= float(trace.ts_us[r]) < b for a, b in spans)]
    ids = trace.name_ids(lambda n: n in names)
    rows = cpu[np.isin(trace.name_id[cpu], ids)] if ids.size else cpu[:0]
    return [int(r) for r in rows if any(a <= float(trace.ts_us[r]) < b for a, b in spans)]


def _floored_us(trace: Trace, rows: list[int], spans: list[tuple[float, float]]) -> float:
    """The rows' time in the steps, floored: where every step ran as many, each step's times
    sorted and the k-th longest taken at its least over the steps, times the steps; else their
    sum. Sorted, not in order: every cast bears one name, and a 4 MB weight's cast paired in
    order with a bias's would floor the weight's to the bias's (a Lightning step's 23 casts
    read 8 ms in order against 49 ms summed over 3 steps, at load 14)."""
    if not rows:
        return 0.0
    by_step: list[list[float]] = [[] for _ in spans]
    for r in rows:
        start = float(trace.ts_us[r])
        k = next(i for i, (a, b) in enumerate(spans) if a <= start < b)
        by_step[k].append(float(trace.dur_us[r]))
    total = float(sum(sum(step) for step in by_step))
    counts = {len(step) for step in by_step}
    if len(spans) < 2 or len(counts) != 1:
        return total
    least = np.min([sorted(step, reverse=True) for step in by_step], axis=0)
    return float(least.sum()) * len(spans)
