"""Measure what the stack sampler costs a CPU training loop: wall-time ratio with/without it.

Runs the same loop without a sampler, with each design of
:class:`~gpu_notebook.capture.stacks.StackSampler` sampling the main thread, and with the floor
of each design: a "null" thread that only wakes at the same rate, and a "noop-signal" timer whose
SIGALRM handler does nothing. All interleaved in rounds of short runs so drift in machine load
hits all of them alike. The loop is timed alone; starting and stopping the sampler (once a cell)
is reported apart:

* ``signal``: the default on the main thread: an ITIMER_REAL timer and a SIGALRM handler that
  samples the interrupted frame (no thread, no GIL hand-over, switch interval untouched);
* ``thread``: the fallback: a sampler thread, switch interval lowered to 0.2 ms while sampling.

Reports, side by side, the median of the per-round ratios (target: <= 1.02), the ratio of
medians and of minimums, and what a sample costs (for ``signal``, the handler's time on the
main thread). Two loops: a small MLP whose step is mostly Python and dispatcher work (the worst
case: a sampler thread competes for the GIL), and a larger one whose step is mostly matmuls
(the GIL is released; a sampler thread only costs CPU).

Usage: ``python benchmarks/stack_sampler_overhead.py [--pairs 40] [--interval 0.005]``
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

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
        nn.Linear(d_in, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 1),
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
    Workload("small MLP (host-bound)", 500, lambda: _loop(64, 128, 32, 500)),
    # ~40 ms a step: matmuls dominate and release the GIL.
    Workload("large MLP (compute-bound)", 20, lambda: _loop(512, 1024, 128, 20)),
)


class TimedSampler(StackSampler):
    """The real sampler, timing each sample (thread: while it holds the GIL, the main thread
    cannot run Python; signal: it runs *on* the main thread): rate x hold time is the overhead
    a host-bound loop must pay, whatever else loads the machine."""

    hold_ns: ClassVar[dict[str, list[int]]] = {"signal": [], "thread": []}

    def _sample_frame(
        self, top: Any, late_ns: int, now_ns: int, weight_us: int | None = None
    ) -> None:
        t0 = time.perf_counter_ns()
        super()._sample_frame(top, late_ns, now_ns, weight_us)
        TimedSampler.hold_ns["thread"].append(time.perf_counter_ns() - t0)


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


def _noop_handler(signum: int, frame: Any) -> None:
    pass


# The SIGALRM design was removed (it cannot coexist with the user's alarms, pause() or EINTR):
# the thread sampler is the one measured; the no-op signal floor stays as the reference figure.
SAMPLERS = ("thread",)
FLOORS = ("null", "noop-signal")
MODES = ("plain", *SAMPLERS, *FLOORS)
COLUMNS = (*SAMPLERS, *FLOORS)


def timed(
    run: Callable[[], None], mode: str, interval_s: float
) -> tuple[float, float, float, RawStacks | None]:
    """Wall and main-thread CPU time of ``run()`` alone, and the wall time of starting plus
    stopping the sampler around it (a cost paid once a cell, not a step)."""
    raw: RawStacks | None = None
    c0 = time.thread_time()
    t0 = time.perf_counter()
    if mode in SAMPLERS:
        sampler = TimedSampler(threading.get_ident(), interval_s)
        sampler.start()
        t1 = time.perf_counter()
        try:
            run()
        finally:
            t2 = time.perf_counter()
            raw = sampler.stop()
    elif mode == "null":
        null = NullSampler(interval_s)
        null.start()
        t1 = time.perf_counter()
        try:
            run()
        finally:
            t2 = time.perf_counter()
            null.stop()
    elif mode == "noop-signal":  # the floor of a signal sampler: delivery and a Python call
        signal.signal(signal.SIGALRM, _noop_handler)
        signal.setitimer(signal.ITIMER_REAL, interval_s, interval_s)
        t1 = time.perf_counter()
        try:
            run()
        finally:
            t2 = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
    else:
        t1 = time.perf_counter()
        run()
        t2 = time.perf_counter()
    # The CPU time includes start/stop (thread_time can not be read at t1/t2 without adding
    # to it); for "signal" it holds every cost (the handler runs on this thread), for "thread"
    # only the GIL hand-overs' share (the sampler's own CPU is on the other core).
    return t2 - t1, (t1 - t0) + (time.perf_counter() - t2), time.thread_time() - c0, raw


def measure(work: Workload, pairs: int, interval_s: float) -> dict[str, float]:
    """Median of paired ratios per sampler design, printed side by side."""
    run = work.make()
    run()  # warm-up: lazy init, allocator, first optimizer step
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    fixed: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpus: dict[str, list[float]] = {mode: [] for mode in MODES}
    raws: dict[str, list[RawStacks]] = {mode: [] for mode in SAMPLERS}
    for r in range(pairs):
        # Rotate the order so no mode always runs first (caches) or last (drift).
        k = r % len(MODES)
        for mode in MODES[k:] + MODES[:k]:
            wall_s, fixed_s, cpu_s, raw = timed(run, mode, interval_s)
            walls[mode].append(wall_s)
            cpus[mode].append(cpu_s)
            fixed[mode].append(fixed_s)
            if raw is not None:
                raws[mode].append(raw)
    plain = walls["plain"]
    print(
        f"{work.name}: {work.steps} steps a run, {pairs} interleaved rounds, "
        f"plain median {statistics.median(plain):.3f} s"
    )
    print(f"  {'':<36}" + "".join(f"{m:>13}" for m in COLUMNS))

    def row(label: str, values: dict[str, str]) -> None:
        print(f"  {label:<36}" + "".join(f"{values.get(m, ''):>13}" for m in COLUMNS))

    medians: dict[str, float] = {}
    paired: dict[str, str] = {}
    iqr: dict[str, str] = {}
    of_medians: dict[str, str] = {}
    of_mins: dict[str, str] = {}
    for mode in COLUMNS:
        ratios = sorted(s / p for s, p in zip(walls[mode], plain, strict=True))
        q1, med, q3 = statistics.quantiles(ratios, n=4)
        medians[mode] = med
        paired[mode] = f"{med:.3f}"
        iqr[mode] = f"{q1:.3f}-{q3:.3f}"
        of_medians[mode] = f"{statistics.median(walls[mode]) / statistics.median(plain):.3f}"
        of_mins[mode] = f"{min(walls[mode]) / min(plain):.3f}"
    row("loop: median paired ratio (<= 1.02)", paired)
    row("  IQR", iqr)
    row("loop: ratio of medians", of_medians)
    row("loop: ratio of minimums", of_mins)
    row(
        "main-thread CPU: median paired ratio",
        {
            m: f"{statistics.median(c / p for c, p in zip(cpus[m], cpus['plain'], strict=True)):.3f}"
            for m in COLUMNS
        },
    )
    row(
        "start + stop (once a cell), median",
        {m: f"{statistics.median(fixed[m]) * 1e3:.2f} ms" for m in COLUMNS},
    )
    rates, per_sample, holds, estimates, depths = {}, {}, {}, {}, {}
    for mode in SAMPLERS:
        rs = raws[mode]
        samples = sum(r.samples + r.own_samples + r.missed_samples + r.outside_samples for r in rs)
        active_s = sum(r.duration_s for r in rs)
        cpu_s = sum(r.sampler_cpu_s for r in rs)
        rate = samples / active_s if active_s else 0.0
        hold_us = (
            statistics.median(TimedSampler.hold_ns[mode]) / 1e3
            if TimedSampler.hold_ns[mode]
            else 0.0
        )
        rates[mode] = f"{rate:.0f}/s"
        per_sample[mode] = f"{cpu_s / max(samples, 1) * 1e6:.1f} us"
        holds[mode] = f"{hold_us:.1f} us"
        estimates[mode] = f"x{1 + rate * hold_us * 1e-6:.4f}"
        depths[mode] = (
            f"{statistics.mean(len(s.frames) for r in rs for s in r.stacks):.0f}" if rs else ""
        )
        TimedSampler.hold_ns[mode].clear()
    row(f"samples (requested {1 / interval_s:.0f}/s)", rates)
    row("CPU a sample (thread: incl. wake-up)", per_sample)
    row("stack walk a sample (median)", holds)
    row("rate x walk (load-independent)", estimates)
    row("mean stack depth (frames)", depths)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40, help="rounds of the five modes")
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
