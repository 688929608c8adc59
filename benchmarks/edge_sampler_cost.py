"""The edge sampler's cost (issue 26): sampling through the steps (before) against taking no
sample between the optimizer's step marks (after, ``stacks._StepGate``), and no edge sampler.

A host-bound tiny-step loop (64-128-1 MLP, batch 1, AdamW, ~0.2 ms a step on an idle core),
run as a default ``%%gpucheck -q`` cell three ways, interleaved (the order rotates each round):
``off`` (no edge sampler: ``CaptureSession`` gets a stand-in that samples nothing), ``before``
(``StackSampler(gate_steps=False)``: a sample every interval, those in the steps dropped) and
``after`` (the default). The cell times each step itself (``perf_counter_ns``).

Figures, each the median over rounds of the paired ratio variant/off: the median step time (what
the brief asked for; a step that no sample hit is the median step once samples are rarer than
steps), the mean step time (the loop's wall time over its steps: every sample's cost in it),
and the loop's process CPU time (the sampler thread's CPU included); with the edge sampler's own
counters (samples taken, looks the gate turned away) and its thread's CPU time. ``--interval``
tries another rate (0.005: ten times the default, so that the cost stands above the noise).

``python benchmarks/edge_sampler_cost.py [--steps N] [--rounds R] [--interval S]``
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
from typing import Any

from IPython.testing import globalipapp

from gpu_notebook.capture import session as se
from gpu_notebook.capture.stacks import StackSampler

SETUP = """
import torch, time
from torch import nn
torch.set_num_threads(1); torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
opt = torch.optim.AdamW(net.parameters())
X = torch.randn(2000, 64); Y = torch.randn(2000, 1)
"""
CELL = """%%gpucheck -q
_ends = [0] * {steps}
_cpu0 = time.process_time(); _t0 = time.perf_counter_ns()
for i in range({steps}):
    x, y = X[i % 2000:i % 2000 + 1], Y[i % 2000:i % 2000 + 1]
    loss = ((net(x) - y) ** 2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    _ends[i] = time.perf_counter_ns()
_cpu = time.process_time() - _cpu0
"""
VARIANTS = ("off", "before", "after")


class _NoEdges:
    """Stands in for the edge sampler where there is none (``off``): the session's calls, no thread."""

    active = True

    def start(self, *, paused: bool = False) -> _NoEdges:
        return self

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def follow(self, thread_id: int) -> None: ...

    def stop(self) -> None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--interval", type=float, default=None, help="the edge interval (s) to try")
    args = ap.parse_args()
    real = se.StackSampler
    variant = ["off"]
    made: list[StackSampler] = []

    def sampler(*a: Any, **kw: Any) -> Any:
        if kw.get("segment_provider") is None:
            return real(*a, **kw)
        if variant[0] == "off":
            return _NoEdges()
        if args.interval is not None:
            a = (a[0], args.interval, *a[2:])
        made.append(real(*a, gate_steps=variant[0] == "after", **kw))
        return made[-1]

    se.StackSampler = sampler  # type: ignore[misc]
    ip = globalipapp.get_ipython()
    ip.run_cell("%load_ext gpu_notebook")
    ip.run_cell(SETUP)
    cell = CELL.format(steps=args.steps)
    res: dict[str, dict[str, list[float]]] = {
        v: {"median": [], "mean": [], "cpu": []} for v in VARIANTS
    }
    counters: dict[str, list[tuple[int, int, float]]] = {v: [] for v in VARIANTS}
    print(f"load before: {os.getloadavg()}")
    for name in VARIANTS:  # warm each once
        variant[0] = name
        ip.run_cell(cell)
    for r in range(args.rounds):
        for name in VARIANTS[r % 3 :] + VARIANTS[: r % 3]:
            variant[0] = name
            made.clear()
            result = ip.run_cell(cell)
            assert result.success, result.error_in_exec
            ends = ip.user_ns["_ends"]
            steps = [(b - a) / 1e3 for a, b in itertools.pairwise(ends)]
            res[name]["median"].append(statistics.median(steps))
            res[name]["mean"].append((ends[-1] - ends[0]) / 1e3 / (len(ends) - 1))
            res[name]["cpu"].append(ip.user_ns["_cpu"])
            if made:
                edges = made[0]
                counters[name].append((edges.samples_taken, edges.gated_looks, edges._cpu_s))
    se.StackSampler = real  # type: ignore[misc]
    print(f"load after: {os.getloadavg()}")
    interval = (
        args.interval if args.interval is not None else se.CaptureOptions().edge_stack_interval_s
    )
    print(f"edge interval {interval * 1e3:g} ms, {args.steps} steps x {args.rounds} rounds")
    for name in VARIANTS:
        med = statistics.median(res[name]["median"])
        mean = statistics.median(res[name]["mean"])
        line = f"{name:7s} median step {med:7.1f} us, mean step {mean:7.1f} us"
        if counters[name]:
            taken = statistics.median(c[0] for c in counters[name])
            gated = statistics.median(c[1] for c in counters[name])
            cpu_ms = statistics.median(c[2] for c in counters[name]) * 1e3
            line += f"; samples {taken:g}, gated looks {gated:g}, sampler CPU {cpu_ms:.1f} ms"
        print(line)
    for name in ("before", "after"):
        parts = []
        for fig in ("median", "mean", "cpu"):
            ratios = sorted(a / b for a, b in zip(res[name][fig], res["off"][fig], strict=True))
            parts.append(
                f"{fig} x{statistics.median(ratios):.4f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]"
            )
        print(f"{name}/off: " + ", ".join(parts))


if __name__ == "__main__":
    main()
