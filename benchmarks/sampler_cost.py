"""Sampler cost: the background sampler at its default interval must use <= 1% of one core.

Two measurements of ``gpu_notebook.capture.sampler.Sampler(interval_s=0.25)``, idle process:

1. its own account, ``Sampler.tick_cost()``: the sampler thread's CPU time per tick
   (``thread_time`` around each tick), mean tick / interval = share of one core;
2. from outside: the process CPU time (``time.process_time``, all threads) over windows of
   idle time with the sampler running vs without it, windows interleaved; the difference per
   second of wall time is the share of one core, start and stop of the thread included.

Only what this machine has is sampled: psutil for the process, its children and the cores. NVML
is absent here (no GPU), so the per-GPU queries a GPU machine adds are not in these figures.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Result,
    emit,
    interleave,
    iqr,
    median,
    parse_args,
    write_results,
)

BUDGET_PCT = 1.0
INTERVAL_S = 0.25


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", argv)
    from gpu_notebook.capture import nvml
    from gpu_notebook.capture.sampler import Sampler

    window_s = 1.0 if args.quick else 5.0
    rounds = args.rounds or (2 if args.quick else 4)
    rows: list[Result] = []
    costs: list[float] = []
    ticks: list[int] = []

    def with_sampler() -> float:
        c0, w0 = time.process_time(), time.perf_counter()
        sampler = Sampler(interval_s=INTERVAL_S)
        sampler.start()
        time.sleep(window_s)
        sampler.stop()
        cost = sampler.tick_cost()
        if cost is not None:
            costs.append(cost.core_pct)
            ticks.append(cost.ticks)
        return 100.0 * (time.process_time() - c0) / (time.perf_counter() - w0)

    def without() -> float:
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(window_s)
        return 100.0 * (time.process_time() - c0) / (time.perf_counter() - w0)

    with_sampler()  # first start: imports, NVML probe, psutil caches
    costs.clear()
    ticks.clear()
    runs = interleave({"sampler": with_sampler, "idle": without}, rounds)
    gpus = nvml.status()
    print(
        f"# NVML: {'available, ' + str(gpus.gpu_count) + ' GPU(s)' if gpus.available else 'not available (' + str(gpus.message) + ')'}",
        flush=True,
    )
    print(
        f"# process CPU % of one core, with sampler {[round(v, 3) for v in runs['sampler']]}, "
        f"idle {[round(v, 3) for v in runs['idle']]}",
        flush=True,
    )
    tick_pct = median(costs)
    emit(
        Result(
            "sampler.tick_cost_pct",
            "sampler's own tick cost (tick_cost().core_pct), 0.25 s interval",
            tick_pct,
            f"{tick_pct:.3f}% of a core ({sum(ticks)} ticks)",
            f"<= {BUDGET_PCT:.0f}%",
            tick_pct <= BUDGET_PCT,
            f"mean thread CPU per tick / interval, median over {len(costs)} runs of {window_s:.0f} s",
        ),
        rows,
    )
    diffs = [a - b for a, b in zip(runs["sampler"], runs["idle"], strict=True)]
    d = median(diffs)
    lo, hi = iqr(diffs)
    emit(
        Result(
            "sampler.process_cpu_pct",
            "process CPU with sampler minus without, idle process",
            d,
            f"{d:.3f}% of a core (IQR {lo:.3f}-{hi:.3f})",
            f"<= {BUDGET_PCT:.0f}%",
            d <= BUDGET_PCT,
            f"process_time over {rounds} interleaved pairs of {window_s:.0f} s windows "
            f"({rounds * window_s:.0f} s with the sampler), thread start/stop included",
        ),
        rows,
    )
    write_results(args.json_path, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
