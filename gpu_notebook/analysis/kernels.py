"""Shares of the GPU window by kernel name, from the analysis's top operators: GEMM and
convolution kernels, those that ran without tensor cores, any kernels a rule picks by name."""

from __future__ import annotations

import re
from collections.abc import Callable

from gpu_notebook.analysis.host import MATMUL_OP
from gpu_notebook.records import Analysis

# GEMM / convolution kernels by name (cuBLAS, cuDNN, CUTLASS): the work tensor cores accelerate.
MATMUL_KERNEL = re.compile(
    r"gemm|conv|dgrad|wgrad|fprop|scudnn|cutlass|xmma|hmma|wgmma|nvjet", re.IGNORECASE
)
# Host operators that launch such kernels: analysis.host.MATMUL_OP (the verdict reads it too).


def fp32_matmul_kernel_share(analysis: Analysis) -> float | None:
    """Share of the GPU window spent in GEMM/conv kernels that did not use tensor cores.

    From the top GPU kernels of the analysis (the ten longest), so it is a lower estimate of
    the true share; None without a GPU timeline.
    """
    from gpu_notebook.analysis.gpu_timeline import TENSOR_CORE_PATTERN

    def fp32_matmul(name: str) -> bool:
        return bool(MATMUL_KERNEL.search(name)) and not TENSOR_CORE_PATTERN.search(name)

    share = kernel_share(analysis, fp32_matmul)
    return None if share is None else min(1.0, share)


def kernel_share(analysis: Analysis, picks: Callable[[str], object]) -> float | None:
    """Share of the GPU window spent in the top GPU kernels whose name ``picks``; None without a
    GPU timeline."""
    gpu = analysis.gpu
    if gpu is None or gpu.window_us <= 0:
        return None
    picked = (op.total_us for op in analysis.top_ops if op.device == "gpu" and picks(op.name))
    return sum(picked) / gpu.window_us


def runs_matmuls(analysis: Analysis) -> bool:
    """Matmul or convolution operators ran in the window (host op names or kernel names)."""
    return any(
        (op.device == "cpu" and MATMUL_OP.match(op.name))
        or (op.device == "gpu" and MATMUL_KERNEL.search(op.name))
        for op in analysis.top_ops
    )
