"""heads_modulelist's step part by part: the optimizer's three Adam implementations, and what a
batch 8x bigger does to each part (issue 26).

The ledger read heads_modulelist's fused Adam fix undecided near-quiet (rounds 0.57x-2.68x) and
0.34x-0.43x under load, and its bigger batch 1.96x under a 2.11x low end (3.04x by hand, one
torch thread). The model: 48 ``nn.Linear(128, 1)`` heads in a ``ModuleList`` (98 parameter
tensors, 10k parameters). Two tables, every figure a median over interleaved rounds:

* ``opt``: ``opt.step()`` alone over the model's parameters, Adam as torch picks it on the CPU
  (the for-loop: torch's foreach default holds for CUDA tensors only), ``foreach=True`` and
  ``fused=True``, at one and at two intra-op threads, on the loop thread's CPU clock and on the
  wall clock.
* ``parts``: one training step at batch 128 and at 1024, part by part (the loader's next batch,
  the forward with the loss, backward, ``zero_grad`` + ``opt.step()``), per sample: how much
  of each part a bigger batch shares out.
* ``fit``: at one thread, the fused step's kept fraction against the for-loop and against the
  foreach step, over heads_modulelist's tensors and a few others (``analysis.fused_update``).

``--busy K`` runs K spinning processes beside the measurement (a busy machine); 0: as the
machine is. Prints ``/proc/loadavg`` before and after.

    python benchmarks/heads_step_parts.py [--rounds 7] [--steps 30] [--busy 0] [--only opt|parts|fit]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

TASKS = 48


class MultiHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(32, 128), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(128, 1) for _ in range(TASKS)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.trunk(x)
        return torch.cat([head(h) for head in self.heads], dim=1)


def _spin() -> None:
    while True:
        pass


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()
    except OSError:
        return "?"


def _timed(fn: Callable[[], None], steps: int) -> tuple[float, float]:
    """(thread CPU us, wall us) a call, over ``steps`` calls."""
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(steps):
        fn()
    return (time.thread_time_ns() - c0) / steps / 1e3, (time.perf_counter_ns() - w0) / steps / 1e3


def optimizers(rounds: int, steps: int) -> None:
    impls = {"for-loop (default)": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}
    x, y = torch.randn(128, 32), (torch.rand(128, TASKS) > 0.5).float()
    print("opt.step() alone, Adam over heads_modulelist's 98 tensors (us a step: median of rounds)")
    print("threads | impl | CPU | wall | CPU vs for-loop | wall vs for-loop")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        opts = {}
        for name, kw in impls.items():
            torch.manual_seed(0)
            model = MultiHead()
            nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
            opts[name] = torch.optim.Adam(model.parameters(), lr=1e-3, **kw)
            opts[name].step()
        cpu: dict[str, list[float]] = {k: [] for k in impls}
        wall: dict[str, list[float]] = {k: [] for k in impls}
        names = list(impls)
        for r in range(rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                _timed(opts[name].step, 3)
                c, w = _timed(opts[name].step, steps)
                cpu[name].append(c)
                wall[name].append(w)
        base_c, base_w = statistics.median(cpu[names[0]]), statistics.median(wall[names[0]])
        for name in names:
            c, w = statistics.median(cpu[name]), statistics.median(wall[name])
            print(f"{threads} | {name} | {c:.0f} | {w:.0f} | {base_c / c:.2f}x | {base_w / w:.2f}x")
            print(f"RESULT opt threads={threads} impl={name} cpu_us={c:.1f} wall_us={w:.1f}")


HEADS = [(128, 32), (128,)] + [(1, 128), (1,)] * 48
FIT_SHAPES = [
    ("heads_modulelist", HEADS),
    ("1 x 128", [(128,)]),
    ("10 x 128", [(128,)] * 10),
    ("60 x 128", [(128,)] * 60),
    ("6 x 50k", [(50_000,)] * 6),
]


def fit(rounds: int, steps: int) -> None:
    """Kept fractions, one thread: fused/for-loop and fused/foreach (``opt.step()`` alone, the
    implementations interleaved in each round; ``analysis.fused_update`` fits on them)."""
    torch.set_num_threads(1)
    print("Kept fractions, one thread (opt.step() alone, us a step, median of rounds)")
    print("class | tensors | for-loop | foreach | fused | fused/for-loop | fused/foreach")
    impls = {"loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
    for cls in ("Adam", "AdamW"):
        for label, shapes in FIT_SHAPES:
            opts = {}
            for name, kw in impls.items():
                params = [torch.zeros(s, requires_grad=True) for s in shapes]
                for p in params:
                    p.grad = torch.randn(p.shape)
                opts[name] = getattr(torch.optim, cls)(params, lr=1e-3, **kw)
                opts[name].step()
            got: dict[str, list[float]] = {k: [] for k in impls}
            names = list(impls)
            for r in range(rounds):
                for name in names[r % 3 :] + names[: r % 3]:
                    got[name].append(_timed(opts[name].step, steps)[0])
            loop, each, fused = (statistics.median(got[k]) for k in names)
            print(f"{cls} | {label} | {loop:.0f} | {each:.0f} | {fused:.0f} | "
                  f"{fused / loop:.2f} | {fused / each:.2f}")  # fmt: skip
            print(f"RESULT fit cls={cls} shapes={label.replace(' ', '')} loop_us={loop:.1f} "
                  f"foreach_us={each:.1f} fused_us={fused:.1f}")  # fmt: skip


def parts(rounds: int, steps: int) -> None:
    print("One step by part, batch 128 vs 1024 (us a step, median of rounds; per sample: x8 / 8)")
    print(
        "threads | part | b128 CPU | b1024 CPU | per-sample gain CPU | b128 wall | b1024 wall | gain wall"
    )
    data = TensorDataset(torch.randn(16384, 32), (torch.rand(16384, TASKS) > 0.5).float())
    keys = ("data", "forward", "backward", "optimizer", "step")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        runs = {}
        for batch in (128, 1024):
            torch.manual_seed(0)
            model = MultiHead()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            loader = DataLoader(data, batch_size=batch, shuffle=True)
            runs[batch] = (model, opt, loader, [iter(loader)])
        got: dict[int, dict[str, tuple[list[float], list[float]]]] = {
            b: {k: ([], []) for k in keys} for b in runs
        }

        def one(batch: int, runs: dict = runs) -> dict[str, tuple[float, float]]:
            model, opt, loader, it = runs[batch]
            clocks = (time.thread_time_ns, time.perf_counter_ns)
            marks = [tuple(c() for c in clocks)]
            try:
                x, y = next(it[0])
            except StopIteration:
                it[0] = iter(loader)
                x, y = next(it[0])
            marks.append(tuple(c() for c in clocks))
            loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
            marks.append(tuple(c() for c in clocks))
            opt.zero_grad()
            loss.backward()
            marks.append(tuple(c() for c in clocks))
            opt.step()
            marks.append(tuple(c() for c in clocks))
            out = {
                k: tuple((marks[i + 1][j] - marks[i][j]) / 1e3 for j in (0, 1))
                for i, k in enumerate(keys[:4])
            }
            out["step"] = tuple((marks[4][j] - marks[0][j]) / 1e3 for j in (0, 1))
            return out  # type: ignore[return-value]

        for r in range(rounds):
            for batch in (128, 1024) if r % 2 == 0 else (1024, 128):
                for _ in range(3):
                    one(batch)
                each = [one(batch) for _ in range(steps)]
                for k in keys:
                    got[batch][k][0].append(statistics.median(e[k][0] for e in each))
                    got[batch][k][1].append(statistics.median(e[k][1] for e in each))
        for k in keys:
            s_c, b_c = (statistics.median(got[b][k][0]) for b in (128, 1024))
            s_w, b_w = (statistics.median(got[b][k][1]) for b in (128, 1024))
            print(f"{threads} | {k} | {s_c:.0f} | {b_c:.0f} | {8 * s_c / b_c:.2f}x | "
                  f"{s_w:.0f} | {b_w:.0f} | {8 * s_w / b_w:.2f}x")  # fmt: skip
            print(f"RESULT parts threads={threads} part={k} b128_cpu_us={s_c:.1f} "
                  f"b1024_cpu_us={b_c:.1f} b128_wall_us={s_w:.1f} b1024_wall_us={b_w:.1f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--busy", type=int, default=0, help="spinning processes beside the run")
    ap.add_argument("--only", choices=("opt", "parts", "fit"))
    ap.add_argument("--quick", action="store_true", help="2 rounds of 5 steps")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.steps = 2, 5
    spinners = [mp.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        print(f"loadavg before {_loadavg()}, {args.busy} spinning processes beside")
        if args.only in (None, "opt"):
            optimizers(args.rounds, args.steps)
        if args.only in (None, "parts"):
            parts(args.rounds, args.steps)
        if args.only in (None, "fit"):
            fit(args.rounds, args.steps)
        print(f"loadavg after {_loadavg()}")
    finally:
        for p in spinners:
            p.terminate()
            p.join()


if __name__ == "__main__":
    main()
