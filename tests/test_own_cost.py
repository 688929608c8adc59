"""Our own cost is ours: steps we disturbed are marked, left out, or corrected.

The step clock runs on a fake clock (its ``time`` module replaced), so a planted 1.4 s profiler
start is exactly 1.4 s and nothing depends on this machine's speed.
"""

from __future__ import annotations

import dataclasses
import types

import torch
from torch.utils.data import DataLoader, TensorDataset

from gpu_notebook.analysis.own_cost import disturbed_steps
from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.analysis.steps import hook_phases
from gpu_notebook.capture import stepclock
from gpu_notebook.records import ProfileWindow, StepClockRecord, StepTiming
from tests.scenarios import synthetic as syn


class FakeClock:
    """perf_counter_ns that advances 1 us a call, plus whatever a test adds."""

    def __init__(self) -> None:
        self.ns = 0

    def perf_counter_ns(self) -> int:
        self.ns += 1_000
        return self.ns


def test_a_profiler_start_at_a_boundary_is_ours_not_the_loaders(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(
        stepclock, "time", types.SimpleNamespace(perf_counter_ns=fake.perf_counter_ns)
    )
    clock = stepclock.StepClock(0)

    def listener(index: int) -> None:
        if index == 3:
            fake.ns += 1_400_000_000  # torch.profiler starting: 1.4 s of ours

    clock.boundary_listener = listener
    loader = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=1)
    clock.install()
    try:
        for _ in loader:
            pass
    finally:
        clock.uninstall()
    steps = {s.index: s for s in clock.record().steps}
    assert clock.anchor == "dataloader"
    assert steps[3].ours_s >= 1.4 and steps[3].data_s < 0.01
    assert all(s.ours_s == 0 for i, s in steps.items() if i != 3)
    # The hook-timed split takes our time out of the step: data is a share of the code's step.
    record = clock.record()
    phases = hook_phases(record, 0)
    assert phases is not None
    assert max(p.duration_us for p in phases.steps) < 10_000


def _steps(durations: list[float], ours: dict[int, float] | None = None) -> StepClockRecord:
    rows, t = [], 0.0
    for i, d in enumerate(durations):
        rows.append(
            StepTiming(
                i,
                t,
                d,
                d * 0.1,
                d * 0.4,
                d * 0.4,
                d * 0.1,
                1,
                1,
                32,
                ours_s=(ours or {}).get(i, 0.0),
            )
        )
        t += d
    return StepClockRecord("optimizer", len(rows), tuple(rows))


def test_profiled_steps_and_the_step_after_are_never_stalls():
    # Every 50 steps a later window: its 3 steps and the stop step take 8x (the profiler's cost).
    durations = [0.005] * 400
    windows = [(2, 3)] + [(k, 3) for k in range(50, 400, 50)]
    for first, n in windows:
        for i in range(first, first + n + 1):
            durations[i] = 0.040
    run = syn.make_run("", steps=_steps(durations, ours={first: 0.03 for first, _ in windows}))
    run = dataclasses.replace(
        run,
        window=ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3),
        more_windows=tuple(
            ProfileWindow("recorded", f, 3, first_step=f, recorded_steps=n) for f, n in windows[1:]
        ),
    )
    mine = disturbed_steps(run)
    assert {2, 3, 4, 5, 50, 53} <= mine and 6 not in mine and 54 not in mine
    shape = run_shape(run)
    assert shape is not None and shape.stalls is None
    assert shape.jitter < 1.2 and abs(shape.median_s - 0.005) < 1e-9


def test_a_real_stall_is_still_found_beside_our_windows():
    durations = [0.005] * 400
    for i in range(30, 400, 40):
        durations[i] = 0.050  # the code's own checkpoint
    run = syn.make_run("", steps=_steps(durations))
    run = dataclasses.replace(
        run, window=ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    )
    shape = run_shape(run)
    assert shape is not None and shape.stalls is not None
    assert shape.stalls.period_steps == 40 and not set(shape.stalls.steps) & disturbed_steps(run)
