"""What counting each lean step's samples costs: a batch's reading, and a lean step before/after.

``python benchmarks/lean_samples_cost.py [--rounds 9] [--steps 2000] [--base /work/main]``:
lean steps now read each training batch's leading dimension (``stepclock._leading_size``, the
timed steps' reading) and add it to the step's samples (``StepClock._count_samples``). Printed:

* the reading and its bookkeeping alone, per batch, for the shapes loaders yield (a tuple of
  two tensors, a dict of three, a list, a nested pair of dicts): thread CPU, best of 5 x 20,000;
* a tiny lean step over a real DataLoader (a one-layer model, batch 8, the clock installed and
  lean) under this tree and under ``--base`` (the code before the change), each round a fresh
  process of each tree, order alternating; thread CPU inside the loop; the median over rounds of
  the paired difference (us a step) and ratio, and the difference of each tree's least round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def per_batch_ns() -> dict[str, float]:
    import torch

    from gpu_notebook.capture.stepclock import StepClock, _leading_size

    x, y = torch.randn(8, 4), torch.randn(8, 1)
    shapes = {
        "tuple": (x, y),
        "dict": {"input_ids": x, "attention_mask": x, "labels": y},
        "list": [x, y],
        "pair_of_dicts": ({"a": x}, {"b": y}),
    }
    clock = StepClock(time.perf_counter_ns())
    clock.anchor = "optimizer"
    ahead = clock._read_ahead
    out = {}
    for name, batch in shapes.items():

        def count(batch=batch) -> None:  # what a lean read adds (StepClock._wrap_next)
            size = _leading_size(batch, clock._unread)
            ahead.read(1, size)
            clock._samples = (clock._samples or 0) + size if size is not None else None
            clock._samples = None

        best = min(timeit.repeat(count, number=20_000, repeat=5, timer=time.thread_time))
        out[name] = best / 20_000 * 1e9
    return out


def lean_step_us(steps: int) -> float:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        TensorDataset(torch.randn(8 * steps, 4), torch.randn(8 * steps, 1)), batch_size=8
    )
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        it = iter(loader)
        for _ in range(3):  # the optimizer becomes the anchor, then lean (as the session does)
            x, y = next(it)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
        clock.lean()
        start = time.thread_time_ns()
        n = 0
        for x, y in it:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            n += 1
        return (time.thread_time_ns() - start) / n / 1e3
    finally:
        clock.uninstall()


def _worker(tree: Path, steps: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = f"import sys; sys.path.insert(0, {str(HERE)!r} + '/benchmarks'); import lean_samples_cost as m; print(m.lean_step_us({steps}))"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return float(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--base", type=Path, default=None, help="the tree before the change")
    args = parser.parse_args()
    for name, ns in per_batch_ns().items():
        print(
            f"RESULT lean_samples.read.{name}: {ns:.0f} ns a batch (best of 5 x 20,000, thread CPU)"
        )
    if args.base is None:
        return 0
    mine, base = [], []
    for r in range(args.rounds):
        order = [(HERE, mine), (args.base, base)]
        for tree, sink in order if r % 2 == 0 else order[::-1]:
            sink.append(_worker(tree, args.steps))
    diffs = [m - b for m, b in zip(mine, base, strict=True)]
    ratios = [m / b for m, b in zip(mine, base, strict=True)]
    print(
        f"lean step, this tree: {statistics.median(mine):.1f} us; base: {statistics.median(base):.1f} us"
    )
    print(
        f"RESULT lean_samples.step.diff: {statistics.median(diffs):+.2f} us a step (median of {args.rounds} paired rounds; IQR {statistics.quantiles(diffs, n=4)[0]:+.2f}..{statistics.quantiles(diffs, n=4)[2]:+.2f})"
    )
    print(f"RESULT lean_samples.step.ratio: x{statistics.median(ratios):.4f}")
    # Contention only adds thread CPU (preemptions, caches refilled): the least of each tree's
    # rounds is the figure least moved by the machine's load.
    print(
        f"RESULT lean_samples.step.min_diff: {min(mine) - min(base):+.2f} us a step (least of each)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
