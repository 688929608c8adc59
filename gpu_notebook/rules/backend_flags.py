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

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    compute_capability,
    finding,
    fp32_matmul_kernel_share,
    gain_bound,
    has_gpu,
    severity_of,
)
from gpu_notebook.rules.shapes import batch_sizes

TF32_CC = 8.0  # Ampere and later
_CONV_KERNEL = re.compile(r"conv|dgrad|wgrad|fprop|scudnn|implicit_gemm", re.IGNORECASE)
_CONV_OP = re.compile(
    r"aten::(cudnn_convolution|convolution|_convolution|conv\dd|miopen_convolution)"
)
_GUIDE = "PyTorch performance tuning guide (cuDNN auto-tuner for fixed sizes; TF32 on Ampere)"


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
    gpu = analysis.gpu
    conv_us = sum(
        op.total_us
        for op in analysis.top_ops
        if op.device == "gpu" and _CONV_KERNEL.search(op.name)
    )
    conv_share = conv_us / gpu.window_us if gpu.window_us > 0 else None
    bound = gain_bound(conv_share, analysis, host_side=False)
    evidence = [
        "convolutions run with torch.backends.cudnn.benchmark = False",
        f"input batch sizes seen: {sorted(set(sizes)) or 'not measured'} (fixed shapes: tuning pays once)",
    ]
    if conv_share is not None:
        evidence.append(
            f"convolution kernels (top kernels): {fmt_share(conv_share)} of the GPU window; gain {fmt_gain(bound)} if they took no time"
        )
    return finding(
        "backend.cudnn_benchmark",
        "cuDNN picks convolution algorithms without timing them",
        severity_of(conv_share, low=0.0) or "low",
        evidence,
        "Set torch.backends.cudnn.benchmark = True before the loop (shapes stay fixed).",
        _GUIDE,
        phase_share=conv_share,
        bound=bound,
        fix_id="backend_flags",
        fix_params={"cudnn_benchmark": True, "tf32": False},
    )


def tf32_off(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    cc = compute_capability(run)
    if cc is None or cc < TF32_CC or analysis.gpu is None or facts.autocast:
        return None
    if _flag(facts.live.tf32_matmul, facts.tf32) is True:
        return None
    eligible = fp32_matmul_kernel_share(analysis)
    if not eligible:
        return None  # no float32 GEMM kernel among the top kernels: nothing for TF32 to speed up
    bound = gain_bound(eligible, analysis, host_side=False)
    known = _flag(facts.live.tf32_matmul, facts.tf32)
    return finding(
        "backend.tf32",
        "float32 matmuls skip the TF32 tensor cores",
        "medium" if eligible >= 0.10 else "low",
        [
            f"compute capability {cc:.1f} supports TF32",
            "TF32 for matmuls is off"
            if known is False
            else "TF32 setting not known (torch flags not readable)",
            f"float32 GEMM/convolution kernels without tensor cores (top kernels): {fmt_share(eligible)} of the GPU window; gain {fmt_gain(bound)} if they took no time",
        ],
        "Set torch.backends.cuda.matmul.allow_tf32 = True (and cudnn.allow_tf32), or "
        "torch.set_float32_matmul_precision('high'): ~10 mantissa bits, fine for training.",
        _GUIDE,
        phase_share=eligible,
        bound=bound,
        fix_id="backend_flags",
        fix_params={"cudnn_benchmark": False, "tf32": True},
    )


RULES = (cudnn_benchmark_off, tf32_off)
