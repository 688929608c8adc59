"""By hand: each operator a CPU bfloat16 autocast runs in bfloat16, timed in bfloat16 against
float32 (analysis/cpu_bf16_casts.BF16_SLOWDOWN reads the ratios this prints).

One thread, the process CPU clock (a wait for a core, which lands alike on both dtypes, is not
in it: on a loaded machine the trace's wall times read the bfloat16 matmul only 1.1-1.45x
slower where this clock reads 1.7-1.8x), each op at the shapes of benchmarks/cpu_bf16_ab.py's
784-1024-1024-10 MLP at batch 128 (a 32-channel 3x3 convolution on 32x32 images for the
convolutions), the two dtypes interleaved, ``rounds`` rounds; printed: each op's ratio of the
medians and the pairs' spread. Usage: ``python benchmarks/cpu_bf16_op_factors.py [rounds]``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def _ops(dtype: torch.dtype) -> dict[str, Callable[[], object]]:
    def g(*shape: int) -> torch.Tensor:
        return torch.randn(*shape).to(dtype)

    x, w1, b1 = g(128, 784), g(1024, 784), g(1024)
    h, w2, grad = g(128, 1024), g(1024, 1024), g(128, 1024)
    qa, kb, base = g(16, 128, 64), g(16, 64, 128), g(16, 128, 128)
    img, kernel = g(32, 32, 32, 32), g(32, 32, 3, 3)
    out = F.conv2d(img, kernel, padding=1)
    gout = torch.randn_like(out)
    return {
        "aten::addmm": lambda: torch.addmm(b1, x, w1.t()),  # the forward's linear
        "aten::mm": lambda: torch.mm(grad, w2),  # the backward's grad of the input
        "aten::mm (weight grad)": lambda: torch.mm(grad.t(), h),
        "aten::bmm": lambda: torch.bmm(qa, kb),
        "aten::baddbmm": lambda: torch.baddbmm(base, qa, kb),
        "aten::convolution": lambda: F.conv2d(img, kernel, padding=1),
        "aten::convolution_backward": lambda: aten.convolution_backward(
            gout, img, kernel, [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]
        ),
        "aten::relu": lambda: torch.relu(h),
        "aten::threshold_backward": lambda: aten.threshold_backward(grad, h, 0.0),
        "aten::gelu": lambda: F.gelu(h),
        "aten::gelu_backward": lambda: aten.gelu_backward(grad, h),
        "aten::silu": lambda: F.silu(h),
        "aten::silu_backward": lambda: aten.silu_backward(grad, h),
    }


def _cpu_s(fn: Callable[[], object], reps: int) -> float:
    fn()
    start = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - start) / reps


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    torch.set_num_threads(1)
    torch.manual_seed(0)
    f32, b16 = _ops(torch.float32), _ops(torch.bfloat16)
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in f32}
    for r in range(rounds):
        for name in f32:
            reps = 20 if "mm" in name or "conv" in name else 200
            order = ((0, f32), (1, b16)) if r % 2 == 0 else ((1, b16), (0, f32))
            for k, ops in order:
                times[name][k].append(_cpu_s(ops[name], reps))
    for name, (a, b) in times.items():
        pairs = sorted(y / x for x, y in zip(a, b, strict=True))
        ratio = statistics.median(b) / statistics.median(a)
        print(f"{name:28s} float32 {statistics.median(a) * 1e6:8.1f} us  bfloat16 "
              f"{statistics.median(b) * 1e6:8.1f} us  {ratio:.2f}x (pairs {pairs[0]:.2f}-{pairs[-1]:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
