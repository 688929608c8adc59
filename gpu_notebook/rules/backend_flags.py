"""Backend flag rules: cuDNN autotuner off with convolutions and fixed shapes; TF32 off on Ampere+.

Sources: PyTorch performance tuning guide ("enable cuDNN auto-tuner" for fixed input sizes;
TF32 on Ampere). The flags are read from the live torch module when available (they are global
state, set by any earlier cell), else from this cell's source.
Gain bounds: Amdahl over the GPU time of the kernels the flag affects (convolution kernels for
the autotuner, float32 GEMM kernels for TF32), from the top kernels: the step if those kernels
took no time. On a CPU-only run neither flag does anything and the rules stay silent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpu_notebook.analysis.kernels import fp32_matmul_kernel_share, kernel_share
from gpu_notebook.analysis.tc_share import tensor_core_share
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import (
    compute_capability,
    found,
    gain_bound,
    gpu_busy_bounds,
    has_gpu,
    level_of,
    window_share_high,
)
from gpu_notebook.rules.precision import autocast_idle
from gpu_notebook.rules.shapes import batch_sizes

TF32_CC = 8.0  # Ampere and later
_CONV_KERNEL = re.compile(r"conv|dgrad|wgrad|fprop|scudnn|implicit_gemm", re.IGNORECASE)
_CONV_OP = re.compile(
    r"aten::(cudnn_convolution|convolution|_convolution|conv\dd|miopen_convolution)"
)


@dataclass(frozen=True)
class CudnnBenchmarkOff(Said):
    sizes: tuple[int, ...]  # the input batch sizes seen, sorted (empty: not measured)
    conv: float | None  # convolution kernels' share of the GPU window (top kernels)
    bound: float | None
    # A partial GPU timeline (``GpuBusyBounds``): ``conv`` is a lower bound, this its upper one
    # (None: not measured), which the bound rests on.
    unclocked_events: int = 0
    conv_high: float | None = None


@dataclass(frozen=True)
class Tf32Off(Said):
    cc: float
    known: bool | None  # the TF32 flag as read (None: not known)
    eligible: float  # float32 GEMM/convolution kernels' share of the GPU window
    bound: float | None
    # A partial GPU timeline: ``eligible`` is a lower bound (the grade rests on it), this its
    # upper one (None: not measured), which the bound rests on.
    unclocked_events: int = 0
    eligible_high: float | None = None


def _unclocked(analysis: Analysis) -> int:
    bounds = gpu_busy_bounds(analysis)
    return 0 if bounds is None else bounds.unclocked_events


def _flag(live: bool | None, source: bool | None) -> bool | None:
    return source if source is not None else live


def cudnn_benchmark_off(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    if not has_gpu(run) or analysis.gpu is None:
        return None
    if _flag(facts.live.cudnn_benchmark, facts.cudnn_benchmark) is not False:
        return None  # on, or not known (no torch flag to read and nothing in the cell)
    convs = any(op.device == "cpu" and _CONV_OP.match(op.name) for op in analysis.top_ops)
    if not (convs or facts.convolutions or any(m.has_conv for m in facts.live.models)):
        return None
    sizes = batch_sizes(run)
    if len(set(sizes)) > 2:
        return None  # changing shapes: the autotuner would re-tune each one (shapes rule)
    conv_share = kernel_share(analysis, _CONV_KERNEL.search)
    high = window_share_high(analysis, conv_share)
    bound = gain_bound(high, analysis, host_side=False)
    said = CudnnBenchmarkOff(
        tuple(sorted(set(sizes))), conv_share, bound, _unclocked(analysis), high
    )
    return found("backend.cudnn_benchmark", level_of(analysis, conv_share, low=0.0) or "low", said,
                 phase_share=conv_share, bound=bound, fix_id="backend_flags",
                 fix_params={"cudnn_benchmark": True, "tf32": False})  # fmt: skip


def tf32_off(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    cc = compute_capability(run)
    if cc is None or cc < TF32_CC or analysis.gpu is None:
        return None
    if _flag(facts.live.tf32_matmul, facts.tf32) is True:
        return None
    eligible = fp32_matmul_kernel_share(analysis)
    if not eligible:
        return None  # no float32 GEMM kernel among the top kernels: nothing for TF32 to speed up
    share = tensor_core_share(analysis.gpu)
    tc = 0.0 if share is None else share.high  # the most it can be: a partial timeline's range
    if facts.autocast and not autocast_idle(facts, eligible, tc):
        return None
    high = window_share_high(analysis, eligible)
    bound = gain_bound(high, analysis, host_side=False)
    said = Tf32Off(
        cc, _flag(facts.live.tf32_matmul, facts.tf32), eligible, bound, _unclocked(analysis), high
    )
    return found("backend.tf32", "medium" if eligible >= 0.10 else "low", said,
                 phase_share=eligible, bound=bound, fix_id="backend_flags",
                 fix_params={"cudnn_benchmark": False, "tf32": True})  # fmt: skip


TIE = 90  # where its findings tie: the verdict table's order (rules._families)
RULES = (cudnn_benchmark_off, tf32_off)
