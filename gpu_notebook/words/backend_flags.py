"""Words of the backend flag rules (rules/backend_flags.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain
from gpu_notebook.rules.backend_flags import CudnnBenchmarkOff, Tf32Off
from gpu_notebook.words.common import Words, window_share, worder, words

_GUIDE = "PyTorch performance tuning guide (cuDNN auto-tuner for fixed sizes; TF32 on Ampere)"


@worder(CudnnBenchmarkOff)
def cudnn_benchmark_off(s: CudnnBenchmarkOff) -> Words:
    evidence = [
        "convolutions run with torch.backends.cudnn.benchmark = False",
        f"input batch sizes seen: {list(s.sizes) or 'not measured'} (fixed shapes: tuning pays once)",
    ]
    if s.conv is not None:
        evidence.append(
            "convolution kernels (top kernels): "
            f"{window_share(s.conv, s.conv_high, s.unclocked_events, 'the GPU window')}; "
            f"gain {fmt_gain(s.bound)} if they took no time"
        )
    return words(
        "cuDNN picks convolution algorithms without timing them",
        evidence,
        "Set torch.backends.cudnn.benchmark = True before the loop (shapes stay fixed).",
        _GUIDE,
    )


@worder(Tf32Off)
def tf32_off(s: Tf32Off) -> Words:
    return words(
        "float32 matmuls skip the TF32 tensor cores",
        [
            f"compute capability {s.cc:.1f} supports TF32",
            "TF32 for matmuls is off"
            if s.known is False
            else "TF32 setting not known (torch flags not readable)",
            "float32 GEMM/convolution kernels without tensor cores (top kernels): "
            f"{window_share(s.eligible, s.eligible_high, s.unclocked_events, 'the GPU window')}; "
            f"gain {fmt_gain(s.bound)} if they took no time",
        ],
        "Set torch.backends.cuda.matmul.allow_tf32 = True (and cudnn.allow_tf32), or "
        "torch.set_float32_matmul_precision('high'): ~10 mantissa bits, fine for training.",
        _GUIDE,
    )
