"""Issue 26: each step keeps the work it did, lean or timed.

A lean step times no phase and counts no forward or backward, but steps of one run may do
different work the same in every run (LBFGS's closure called 5 times a step until its line
search converges, then once; accumulation cycles of 1 then 4 micro-batches). The run's margin is
read between steps of one work (``analysis.analyze._margin_steps``): the step clock keeps, for
every step, the calls of an optimizer's closure and the DataLoader batches read in it. Real
loops under the real step clock; counts, no timing.
"""

from __future__ import annotations

import time
from typing import Any

from gpu_notebook.records import StepClockRecord


def _lbfgs(steps: int, lean_after: int) -> tuple[StepClockRecord, list[int]]:
    """A real tiny LBFGS loop (``max_iter=4``: its closure runs 4 times a step, then 2, then
    once as it converges: seeded) under the real step clock, lean from ``lean_after``."""
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    calls: list[int] = []

    def closure() -> Any:
        calls[-1] += 1
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for i in range(steps):
            if i == lean_after:
                clock.lean()
            calls.append(0)
            opt.step(closure)
    finally:
        clock.uninstall()
    return clock.record(), calls


def test_lean_steps_keep_their_closures_calls() -> None:
    record, calls = _lbfgs(steps=40, lean_after=6)
    lean = [s for s in record.steps if not s.timed]
    timed = [s for s in record.steps if s.timed]
    assert len(lean) >= 30 and timed
    # Each step after the first (where the anchor changed: its calls counted at backward).
    for s in record.steps[1:]:
        assert s.closure_calls == calls[s.index], (s, calls[s.index])
    # The run does steps of more than one work, lean as timed: a margin can tell them apart.
    assert len({s.closure_calls for s in lean}) >= 2, calls


def _accumulating(cycles: list[int], lean_after: int) -> StepClockRecord:
    """A real loop over a DataLoader that accumulates ``cycles[i]`` micro-batches before its
    ``i``-th optimizer step (a curriculum: 1, then 3), lean from cycle ``lean_after``."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(4 * sum(cycles), 8), torch.randn(4 * sum(cycles), 1))
    batches = iter(DataLoader(data, batch_size=4))
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for i, k in enumerate(cycles):
            if i == lean_after:
                clock.lean()
            for _ in range(k):
                x, y = next(batches)
                torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    finally:
        clock.uninstall()
    return clock.record()


def test_lean_steps_keep_their_loader_reads() -> None:
    cycles = [1] * 12 + [3] * 12
    record = _accumulating(cycles, lean_after=4)
    assert record.anchor == "optimizer"
    lean = [s for s in record.steps if not s.timed]
    assert len(lean) >= 16
    # Each step after the first (where the anchor changed) read its own cycle's batches.
    for s in record.steps[1:]:
        assert s.loader_reads == cycles[s.index], (s, cycles[s.index])
