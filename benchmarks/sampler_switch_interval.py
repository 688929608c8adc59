"""Sampler and the GIL: how much of a short pure-Python stretch the thread sampler sees.

A sampler thread that waits the interpreter's default 5 ms switch interval for the GIL samples
the sleep or op after a ~1 ms pure-Python function instead of the function. While it samples,
``StackSampler`` lowers the switch interval (to ``switch_interval_s``, 0.2 ms by default) and
restores it after (``tests/test_stacks.py`` checks that mechanism). This script measures what
the lowering buys, side by side in one run: a worker alternates ~1 ms of pure Python with a
3 ms sleep; its true share of the Python function comes from its own clock, the sampled share
from the sampler, with and without the lowered interval, interleaved.

Printed: the median ratio sampled / true share per variant (1.0 = exact). Without the lowered
interval it was 0.0 on the 2-core VM; with it, most of the share, less on a loaded machine, where
the sampler thread itself waits for a core (0.28x in 1 run of 6 while other tests ran). This is
a measurement, not a test: the figure moves with the machine's load.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Result, emit, interleave, iqr, median, parse_args, write_results

INTERVAL_S = 0.001


def _measure(switch_interval_s: float | None, seconds: float) -> float:
    from gpu_notebook.capture.stacks import StackSampler

    rows = [[float(i) for i in range(256)] for _ in range(128)]  # ~1 ms of pure Python
    took = {"python": 0.0, "all": 0.0}
    done = threading.Event()
    stop = threading.Event()

    def python_transform() -> None:
        for row in rows:
            mean = sum(row) / len(row)
            _ = [(v - mean) * 0.5 for v in row]

    def work() -> None:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t0 = time.perf_counter()
            python_transform()
            took["python"] += time.perf_counter() - t0
            time.sleep(0.003)
        took["all"] = time.perf_counter() - start
        done.set()
        stop.wait()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        with StackSampler(
            thread.ident or 0, INTERVAL_S, root_codes=(), switch_interval_s=switch_interval_s
        ) as sampler:
            done.wait(60)
            raw = sampler.stop()
    finally:
        stop.set()
        thread.join()
    sampled = sum(
        c.total_us
        for c in raw.function_counts
        if raw.functions[c.function].function.endswith("python_transform")
    ) / max(raw.time_us, 1.0)
    return sampled / (took["python"] / took["all"])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", argv)
    seconds = 0.5 if args.quick else 1.5
    rounds = args.rounds or (2 if args.quick else 6)
    runs = interleave(
        {
            "lowered": lambda: _measure(0.0002, seconds),
            "default": lambda: _measure(None, seconds),
        },
        rounds,
    )
    rows: list[Result] = []
    for name, values in runs.items():
        low, high = iqr(values)
        emit(
            Result(
                figure=f"sampler.python_share_seen.{name}",
                label=f"share of a 1 ms pure-Python stretch the thread sampler sees, {name} "
                "switch interval (sampled / true)",
                measured=median(values),
                display=f"{median(values):.2f} (IQR {low:.2f}-{high:.2f})",
                budget="",
                passed=None,
                how=f"median of {rounds} interleaved runs of {seconds} s",
            ),
            rows,
        )
    write_results(args.json_path, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
