"""A burst of stalls in a row at every start of a loader (its N workers' first batches), among the
random stalls of a loaded machine: one event of a schedule, whose period and cost are read.

Recorded step times with planted bursts, planted random stalls and planted steps of ours (the
capture's look every ``RETIME_EVERY_STEPS``): the period and the cost are checked against the
plant, never against timing. Unseen ``loader_per_epoch`` (a new 2-worker DataLoader each epoch of
16 steps) at load 2-5: its stalls at 16, 17, 32, 33, 48, 49, ... and at 50, 55-58, 90, 116, ...
from the load held no period, and building the loader once measured 4.00x while its finding
read no cost (info, unbounded)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.capture.session import RETIME_EVERY_STEPS
from gpu_notebook.records import ProfileWindow, Run, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn

EPOCH = 16  # batches an epoch: each epoch's new loader stalls its first WORKERS steps
WORKERS = 2
N = 12 * EPOCH
LOOKS = set(range(0, N, RETIME_EVERY_STEPS))  # the capture's look at the run: steps of ours
BASE_S = 2e-3
# Each new loader's first batch waits for the workers' start-up (their fork, the first
# worker's first batch), the next one for the second worker's first batch: the extra ms of
# each epoch's first two steps as loader_per_epoch recorded them at load 2-5 (its steps ~2 ms).
FIRST_MS = (59.0, 104.0, 90.0, 77.0, 89.0, 91.0, 97.0, 96.0, 95.0, 95.0, 104.0)
NEXT_MS = (38.0, 14.0, 4.5, 6.0, 8.0, 10.0, 6.0, 9.6, 4.5, 20.0, 5.0)

LOADER_CELL = """\
ds = Noisy(512)
for epoch in range(12):
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _load_stalls(seed: int, count: int = 20) -> dict[int, tuple[float, float]]:
    """``count`` random stalls of a loaded machine off the bursts, some in a row (a busy
    stretch): each with its extra time and the part of it that waited for a core."""
    rng = random.Random(seed)
    starts = [i for i in range(3, N) if i % EPOCH not in range(WORKERS) and i not in LOOKS]
    out: dict[int, tuple[float, float]] = {}
    while len(out) < count:
        i = rng.choice(starts)
        for j in range(i, min(N, i + rng.choice((1, 1, 2, 4)))):
            if j % EPOCH not in range(WORKERS) and j not in LOOKS:
                extra = rng.uniform(4e-3, 7e-3)
                out[j] = (extra, extra * rng.choice((0.2, 0.9)))
    return out


def _steps(load: dict[int, tuple[float, float]], bursts: bool = True) -> StepClockRecord:
    """``N`` steps of ~2 ms (a deterministic wobble); each epoch's first ``WORKERS`` steps
    stalled (``bursts``), the ``load`` stalls; the steps of ``LOOKS`` carry our 0.3 ms."""
    rows, t = [], 0.0
    for i in range(N):
        base = BASE_S * (1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0))
        extra, wait = load.get(i, (0.0, 0.0))
        if bursts and i >= EPOCH and i % EPOCH < WORKERS:
            extra = (FIRST_MS if i % EPOCH == 0 else NEXT_MS)[i // EPOCH - 1] / 1e3
            wait = 0.0
        ours = 3e-4 if i in LOOKS else 0.0
        dur = base + extra + ours
        part = 0.2 * base
        timing = StepTiming(i, t, dur, part + extra - wait, part, part, part, 1, 1, 32)
        rows.append(dataclasses.replace(timing, ours_s=ours, wait_s=wait, cpu_s=dur - wait))
        t += dur
    return StepClockRecord("optimizer", N, tuple(rows), loader_num_workers=WORKERS)


def _run(steps: StepClockRecord, cell: str = LOADER_CELL) -> Run:
    run = syn.make_run(cell, steps=steps)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(run, window=window, first_line=2)


@pytest.mark.parametrize("seed", range(8))
def test_a_burst_of_stalls_at_every_new_loader_keeps_its_period_among_random_stalls(seed: int):
    assert RETIME_EVERY_STEPS % EPOCH == 0, "the case under test: some epochs start on our look"
    shape = run_shape(_run(_steps(_load_stalls(seed))))
    assert shape is not None and shape.stalls is not None
    for stalls in (shape.stalls, shape.own.stalls if shape.own else None):
        assert stalls is not None
        # main: no period (each burst's two stalls counted apart, the schedule's phase held
        # under half of the stalls around it).
        assert stalls.period_steps == EPOCH
        starts = list(range(EPOCH, N, EPOCH))
        # The examples are the bursts' first steps, ours among them: their stalls, less our
        # work, are the code's and count in the cost.
        assert list(stalls.steps[: len(starts)]) == starts


def test_the_loader_finding_reads_the_bursts_cost_and_bounds_it():
    run = _run(_steps(_load_stalls(0)))
    report = build_report(run)
    f = next(f for f in report.findings if f.rule_id == "input.remade_loader")
    assert report.analysis.shape is not None and report.analysis.shape.stalls is not None
    share = report.analysis.shape.stalls.share
    # Every epoch's start-up (the looked-at ones too) and the random stalls around them.
    steps = run.steps.steps
    median = sorted(s.duration_s for s in steps[2:])[len(steps[2:]) // 2]
    start_up = sum(
        s.duration_s - s.ours_s - median
        for s in steps
        if s.index >= EPOCH and s.index % EPOCH < WORKERS
    )
    assert share * sum(s.duration_s for s in steps[2:]) >= 0.9 * start_up
    assert f.severity == "high" and f.fix_id == "persistent_loader"
    # The same time is not said again as a periodic stall to make "cheaper or rarer".
    assert "run.periodic_stall" not in {g.rule_id for g in report.findings}
    assert f.gain_bound == pytest.approx(1.0 / (1.0 - share), rel=1e-6)


@pytest.mark.parametrize("seed", range(8))
def test_random_stalls_in_bursts_of_a_loaded_machine_keep_no_period(seed: int):
    # The same runs without the loaders' start-ups: the load's stalls, some in a row, read
    # as events, hold no schedule (``_by_chance`` over the events, not the stalls).
    shape = run_shape(_run(_steps(_load_stalls(seed, count=30), bursts=False)))
    assert shape is not None and shape.stalls is not None
    assert shape.stalls.period_steps is None
