"""By hand: a CPU loop in float32 against the same loop under bfloat16 autocast (rules/cpu_bf16).

Each variant runs in a fresh process, interleaved (A B, B A, ...), one thread; the loop's wall
time and its process CPU time are printed, and the ratio of medians. Usage:
``python benchmarks/cpu_bf16_ab.py [pairs] [steps]``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CHILD = """
import time, torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
def step():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled={bf16}):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
for _ in range(5):
    step()
wall, cpu = time.perf_counter(), time.process_time()
for _ in range({steps}):
    step()
print(time.perf_counter() - wall, time.process_time() - cpu)
"""


def run(bf16: bool, steps: int) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(bf16=bf16, steps=steps)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        for bf16 in order:
            times[bf16].append(run(bf16, steps))
        f32, b16 = times[False][-1], times[True][-1]
        print(f"pair {i}: float32 {f32[0]:.3f}s (cpu {f32[1]:.3f}s), bf16 {b16[0]:.3f}s "
              f"(cpu {b16[1]:.3f}s): {b16[0] / f32[0]:.2f}x wall, {b16[1] / f32[1]:.2f}x cpu")  # fmt: skip
    for k, name in ((0, "wall"), (1, "cpu")):
        f32 = statistics.median(t[k] for t in times[False])
        b16 = statistics.median(t[k] for t in times[True])
        print(f"median {name}: float32 {f32:.3f}s, bf16 {b16:.3f}s, ratio {b16 / f32:.2f}x")


if __name__ == "__main__":
    main()
