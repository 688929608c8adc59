"""What the per-step wait reading costs: one schedstat read, and a lean step with and without it.

``python benchmarks/step_wait_cost.py [--rounds 7] [--steps 2000]``: the step clock reads the
loop thread's ``/proc/thread-self/schedstat`` at every step end (one ``pread`` of a kept
descriptor and a parse). Printed: that read alone (thread CPU, best of 5 x 2000), and the
thread CPU a tiny lean step costs with ``read_waits`` on and off (a one-layer model, the clock
installed and lean; rounds interleaved, medians), side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import timeit


def read_cost_us() -> float | None:
    try:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:

        def read() -> tuple[int, int]:
            cpu, wait = os.pread(fd, 64, 0).split()[:2]
            return int(cpu), int(wait)

        timer = time.thread_time
        best = min(timeit.repeat(read, number=2000, repeat=5, timer=timer))
        return best / 2000 * 1e6
    finally:
        os.close(fd)


def lean_step_us(steps: int, read_waits: bool) -> float:
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(2, 4)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    clock.lean()
    clock.read_waits = read_waits
    try:
        start = time.thread_time_ns()
        for _ in range(steps):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        return (time.thread_time_ns() - start) / steps / 1e3
    finally:
        clock.uninstall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print(f"one schedstat read + parse: {read_cost_us() or float('nan'):.2f} us (thread CPU)")
    lean_step_us(200, True)  # warm-up
    on, off = [], []
    for _ in range(args.rounds):
        off.append(lean_step_us(args.steps, False))
        on.append(lean_step_us(args.steps, True))
    a, b = statistics.median(off), statistics.median(on)
    print(f"tiny lean step, thread CPU, median of {args.rounds} interleaved rounds of "
          f"{args.steps}: without the reading {a:.1f} us, with it {b:.1f} us "
          f"(+{b - a:.2f} us, x{b / a:.3f}); load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
