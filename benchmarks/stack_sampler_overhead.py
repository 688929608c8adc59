"""Measure what the stack sampler costs a CPU training loop: wall-time ratio with/without it.

Runs the same loop without a sampler, with a :class:`~gpu_notebook.capture.stacks.StackSampler`
on the main thread (as shipped: switch interval lowered to 0.2 ms while sampling; and keeping
the interpreter's 5 ms, the less exact setting), and with a "null" thread that only wakes at the
same rate (the floor of any in-process sampler), interleaved in rounds of short runs so drift
in machine load hits all of them alike. Reports the median of the per-round ratios (target: <= 1.02), the ratio of medians and of
minimums, and what a sample costs the sampler thread. Two loops: a small MLP whose step is mostly
Python and dispatcher work (the worst case: the sampler competes for the GIL), and a larger one
whose step is mostly matmuls (the GIL is released; the sampler only costs CPU).

Usage: ``python benchmarks/stack_sampler_overhead.py [--pairs 40] [--interval 0.005]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from gpu_notebook.capture.stacks import RawStacks, StackSampler


@dataclass(frozen=True)
class Workload:
    name: str
    steps: int
    make: Callable[[], Callable[[], None]]  # builds the model, returns "run steps"


def _loop(d_in: int, hidden: int, batch: int, steps: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    xs = torch.randn(steps, batch, d_in)
    ys = torch.randn(steps, batch, 1)

    def run() -> None:
        for i in range(steps):
            loss = loss_fn(model(xs[i]), ys[i])
            opt.zero_grad()
            loss.backward()
            opt.step()

    return run


# Short runs (~0.2-0.4 s on an idle core), many of them: on a shared machine the load drifts
# within seconds, and only a run and its neighbour see the same load.
WORKLOADS = (
    # ~1 ms a step: Python, autograd and the dispatcher dominate (the sampler competes for the GIL).
    Workload("small MLP (host-bound)", 200, lambda: _loop(64, 128, 32, 200)),
    # ~40 ms a step: matmuls dominate and release the GIL.
    Workload("large MLP (compute-bound)", 8, lambda: _loop(512, 1024, 128, 8)),
)


class TimedSampler(StackSampler):
    """The real sampler, timing each sample: the main thread cannot run Python meanwhile (the
    sampler holds the GIL), so rate x hold time is the overhead a host-bound loop must pay,
    whatever else loads the machine."""

    hold_ns: list[int] = []

    def _sample(self, late_ns: int = 0) -> None:
        t0 = time.perf_counter_ns()
        super()._sample(late_ns)
        TimedSampler.hold_ns.append(time.perf_counter_ns() - t0)


class NullSampler:
    """A thread that wakes like the sampler and takes the GIL, but reads nothing: the floor any
    in-process sampler pays (thread wake-ups and GIL hand-overs)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            time.sleep(self.interval_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def timed(run: Callable[[], None], mode: str, interval_s: float) -> tuple[float, RawStacks | None]:
    t0 = time.perf_counter()
    raw: RawStacks | None = None
    if mode in ("sampler", "sampler-5ms-switch"):
        switch = None if mode == "sampler-5ms-switch" else 0.0002  # None: leave the interpreter's
        sampler = TimedSampler(threading.get_ident(), interval_s, switch_interval_s=switch)
        sampler.start()
        try:
            run()
        finally:
            raw = sampler.stop()
    elif mode == "null":
        null = NullSampler(interval_s)
        null.start()
        try:
            run()
        finally:
            null.stop()
    else:
        run()
    return time.perf_counter() - t0, raw


def measure(work: Workload, pairs: int, interval_s: float) -> float:
    run = work.make()
    run()  # warm-up: lazy init, allocator, first optimizer step
    modes = ("plain", "sampler", "sampler-5ms-switch", "null")
    walls: dict[str, list[float]] = {mode: [] for mode in modes}
    raws: list[RawStacks] = []
    for r in range(pairs):
        # Rotate the order so no mode always runs first (caches) or last (drift).
        k = r % len(modes)
        for mode in modes[k:] + modes[:k]:
            wall_s, raw = timed(run, mode, interval_s)
            walls[mode].append(wall_s)
            if raw is not None and mode == "sampler":
                raws.append(raw)
    plain = walls["plain"]
    ratios = sorted(s / p for s, p in zip(walls["sampler"], plain))
    null_ratios = sorted(s / p for s, p in zip(walls["null"], plain))
    plain_switch = sorted(s / p for s, p in zip(walls["sampler-5ms-switch"], plain))
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    samples = sum(r.samples + r.own_samples + r.missed_samples for r in raws)
    cpu_s = sum(r.sampler_cpu_s for r in raws)
    active_s = sum(r.duration_s for r in raws)
    depth = statistics.mean(len(s.frames) for r in raws for s in r.stacks) if raws else 0.0
    hold_us = statistics.median(TimedSampler.hold_ns) / 1e3
    TimedSampler.hold_ns.clear()
    rate = samples / active_s
    print(f"{work.name}: {work.steps} steps a run, {pairs} interleaved rounds")
    print(
        f"  median run: plain {statistics.median(plain):.3f} s, "
        f"sampler {statistics.median(walls['sampler']):.3f} s, "
        f"null thread {statistics.median(walls['null']):.3f} s"
    )
    print(
        f"  sampler/plain, median of paired ratios {median:.3f} (IQR {q1:.3f}-{q3:.3f}); "
        f"ratio of medians {statistics.median(walls['sampler']) / statistics.median(plain):.3f}; "
        f"ratio of minimums {min(walls['sampler']) / min(plain):.3f}"
    )
    print(
        f"  sampler keeping the 5 ms switch interval/plain: median of paired ratios "
        f"{statistics.median(plain_switch):.3f}; ratio of medians "
        f"{statistics.median(walls['sampler-5ms-switch']) / statistics.median(plain):.3f}; "
        f"ratio of minimums {min(walls['sampler-5ms-switch']) / min(plain):.3f}"
    )
    print(f"  null-thread/plain, median of paired ratios {statistics.median(null_ratios):.3f}")
    print(
        f"  sampler: {rate:.0f} samples/s (requested {1 / interval_s:.0f}), "
        f"{cpu_s / max(samples, 1) * 1e6:.1f} us CPU a sample (incl. its wake-up), "
        f"{100 * cpu_s / active_s:.2f}% of one core, mean stack depth {depth:.0f} frames"
    )
    print(
        f"  GIL held per sample: median {hold_us:.1f} us -> load-independent estimate "
        f"x{1 + rate * hold_us * 1e-6:.4f} (+ the null thread's hand-over cost)"
    )
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40, help="rounds of the four modes")
    parser.add_argument("--interval", type=float, default=0.005, help="sampler interval, seconds")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"torch {torch.__version__}, {args.threads} intra-op thread(s), "
        f"interval {args.interval * 1e3:.0f} ms, {os.cpu_count()} cores, load average {load}"
    )
    for work in WORKLOADS:
        measure(work, args.pairs, args.interval)


if __name__ == "__main__":
    main()
