"""The sparse stack sampling over the rest of a run (issue 26): its cost, side by side.

A host-bound tiny-step loop (64-128-1 MLP, batch 1, AdamW, 10,000 steps, ~0.2 ms a step), run
as a default ``%%gpucheck`` cell two ways, interleaved: ``trickle`` (after the steps it follows
the window with, a second sampler goes on at ``CaptureOptions.trickle_stack_interval_s`` at the
program's own switch interval) and ``off`` (no second sampler, as before:
``CaptureSession._start_trickle`` does nothing). Figure: median of the paired ratios of the
loop's process CPU time.
``--framework``: sample as under a framework's loop (a jittered clock, the switch interval lowered
around each sample; the session does so when Lightning or transformers is imported).
``python benchmarks/stack_trickle_overhead.py [--steps N] [--rounds R] [--interval S] [--framework]``
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

from IPython.testing import globalipapp

from gpu_notebook.capture import session as se

SETUP = """
import torch, time
from torch import nn
torch.set_num_threads(1); torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
opt = torch.optim.AdamW(net.parameters())
X = torch.randn(2000, 64); Y = torch.randn(2000, 1)
"""
CELL = """%%gpucheck -q
t0 = time.process_time()
for i in range({steps}):
    x, y = X[i % 2000:i % 2000 + 1], Y[i % 2000:i % 2000 + 1]
    loss = ((net(x) - y) ** 2).mean(); opt.zero_grad(); loss.backward(); opt.step()
_cpu = time.process_time() - t0
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--interval", type=float, default=None, help="the sparse interval (s) to try")
    ap.add_argument("--framework", action="store_true", help="the clocked sampler, lowered briefly")
    args = ap.parse_args()
    if args.framework:
        se._FRAMEWORK_MODULES = ("sys",)  # always imported: as under Lightning or transformers
    ip = globalipapp.get_ipython()
    ip.run_cell("%load_ext gpu_notebook")
    ip.run_cell(SETUP)
    cell = CELL.format(steps=args.steps)
    trickle = se.CaptureSession._start_trickle
    tried = trickle
    if args.interval is not None:
        interval_s = args.interval

        def tried(self: se.CaptureSession) -> None:
            self.options = dataclasses.replace(self.options, trickle_stack_interval_s=interval_s)
            trickle(self)

    def off(self: se.CaptureSession) -> None:
        pass  # no sampler after the dense span, as before

    res: dict[str, list[float]] = {"trickle": [], "off": []}
    ip.run_cell(cell)  # warm
    for r in range(args.rounds):
        for name in ("trickle", "off") if r % 2 == 0 else ("off", "trickle"):
            se.CaptureSession._start_trickle = tried if name == "trickle" else off  # type: ignore[method-assign]
            ip.run_cell(cell)
            res[name].append(ip.user_ns["_cpu"])
    se.CaptureSession._start_trickle = trickle  # type: ignore[method-assign]
    ratios = sorted(a / b for a, b in zip(res["trickle"], res["off"], strict=True))
    print({k: [round(v, 3) for v in vs] for k, vs in res.items()})
    print(f"trickle/off loop CPU: median x{statistics.median(ratios):.3f} "
          f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
