"""Precision rule: float32 math on a GPU with tensor cores (autocast / bf16 would use them).

Threshold: compute capability >= 7.0 and no tensor-core kernels while matmul/conv kernels run
(PyTorch TensorBoard profiler plugin's tensor-core advice). We flag it when tensor-core kernels
are under 10% of the kernel time (our margin: one stray TF32 kernel should not hide the rest).
Gain bound: Amdahl over the GPU time of float32 GEMM/convolution kernels among the top kernels,
i.e. the step if those kernels took no time. autocast shortens them (about 2x is typical, the
peak ratio is 8-16x), so the real gain is below the bound. Without a trace of GPU kernels
(CPU-only run) the rule stays silent: nothing about tensor cores was measured.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    compute_capability,
    finding,
    fp32_matmul_kernel_share,
    gain_bound,
    gpu_name,
    runs_matmuls,
)

TENSOR_CORE_CC = 7.0  # Volta and later
BF16_CC = 8.0  # Ampere and later run bfloat16 on tensor cores
LOW_TENSOR_CORE_SHARE = 0.10


def fp32_on_tensor_core_gpu(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    cc = compute_capability(run)
    gpu = analysis.gpu
    if cc is None or cc < TENSOR_CORE_CC or gpu is None or gpu.kernel_us <= 0:
        return None
    if gpu.tensor_core_kernel_us is None or facts.autocast:
        return None
    tc_share = gpu.tensor_core_kernel_us / gpu.kernel_us
    if tc_share >= LOW_TENSOR_CORE_SHARE or not runs_matmuls(analysis):
        return None
    eligible = fp32_matmul_kernel_share(analysis)
    bound = gain_bound(eligible, analysis, host_side=False)
    dtype = "bfloat16" if cc >= BF16_CC else "float16"
    evidence = [
        f"{gpu_name(run)} (compute capability {cc:.1f}) has tensor cores",
        f"tensor-core kernels: {fmt_share(tc_share)} of the kernel time; matmul/convolution kernels ran in float32",
        f"GPU busy {fmt_share(gpu.busy_share)} of the window",
    ]
    if eligible is not None:
        evidence.append(
            f"float32 GEMM/convolution kernels (top kernels): {fmt_share(eligible)} of the window; "
            f"gain {fmt_gain(bound)} if they took no time"
        )
    return finding(
        "precision.fp32_tensor_cores",
        "float32 math leaves the tensor cores idle",
        "high" if gpu.busy_share >= 0.8 else "medium",
        evidence,
        f"Run the forward pass under torch.autocast(dtype=torch.{dtype})"
        + (" with a GradScaler" if dtype == "float16" else "")
        + "; about 2x on tensor-core GPUs and half the activation memory.",
        "PyTorch TensorBoard profiler plugin (CC >= 7.0 and no tensor-core kernels -> AMP); "
        "10% tensor-core margin: ours",
        phase_share=eligible,
        bound=bound,
        fix_id="autocast",
        fix_params={"dtype": dtype, "device_type": "cuda"},
    )


RULES = (fp32_on_tensor_core_gpu,)
