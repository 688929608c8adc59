"""Issue 26: the fused update's bound counts the page faults the unfused update makes.

An unfused CPU Adam over a 1M-parameter MLP (save_every_step) makes full-size temporaries a
tensor; each gets fresh pages from the allocator, zeroed on first touch, and the heap they leave
trimmed makes the next step's gradients fault again. A fused step makes no such temporaries, so
its gain (1.21x measured) ran over the high end that kept ``kept`` of the update's time, faults
included (1.16x). The step clock counts the loop thread's minor faults inside each class's steps
and outside the updates, one training step in eight, and prices one fault on this machine; the
high end takes the update's faults whole and the step's other faults up to as many. Mechanisms
only: a real loop whose optimizer faults fresh pages is counted, fake records with given faults
give the bounds; no timing is asserted.
"""

from __future__ import annotations

import dataclasses
import mmap
import random
import sys
import time
from typing import Any

import pytest

from gpu_notebook.analysis.analyze import with_run_figures
from gpu_notebook.analysis.fused_update import fused_cpu_kept, fused_removed_high, update_faults
from gpu_notebook.analysis.steps import run_phase
from gpu_notebook.records import Finding, StepClockRecord, StepTiming
from gpu_notebook.rules import run_rules
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn
from tests.test_fix_bounds import ADAM_CELL, _series

RULE = "launch.unfused_optimizer"
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread rusage")


def _record(inside: int = 0, outside: int = 0, *, steps: int = 10, cost_s: float | None = 3e-6,
            cpu_s: float = 5e-3) -> StepClockRecord:  # fmt: skip
    """A seeded run whose Adam steps took ``cpu_s`` of CPU each and faulted ``inside`` pages a
    step in its update and ``outside`` elsewhere, over ``steps`` sampled steps."""
    return dataclasses.replace(
        _series(0.27),
        grad_tensors=6,
        grad_bytes=4_200_000,
        optimizer_cpu={"Adam": (cpu_s * 100, 100)},
        optimizer_faults={"Adam": (inside * steps, steps)} if inside or outside else {},
        rest_faults=(outside * steps, steps),
        fault_cost_s=cost_s,
    )


def _finding(record: StepClockRecord) -> Finding:
    run = syn.make_run(ADAM_CELL, steps=record)
    analysis = with_run_figures(run, syn.make_analysis({"optimizer": 0.30}))
    found = {f.rule_id: f for f in word_findings(run_rules(run, analysis, syn.VERDICT))}
    return found[RULE]


def test_an_updates_faults_are_read_as_a_part_of_its_cpu_time_priced_here():
    f = update_faults(_record(1000, 200), ["Adam"])
    assert f is not None
    assert f.inside == 1000 and f.outside == 200 and f.fault_us == pytest.approx(3.0)
    assert f.inside_part == pytest.approx(0.6)  # 1000 x 3 us of a 5 ms update
    assert f.outside_part == pytest.approx(0.12)
    # The step's faults outside the update count up to the update's own: more are the step's.
    assert update_faults(_record(100, 5000), ["Adam"]).outside == 100  # type: ignore[union-attr]
    # The fault time never exceeds the update's time.
    assert update_faults(_record(10_000), ["Adam"]).inside_part == 1.0  # type: ignore[union-attr]


def test_no_fault_reading_means_no_fault_term():
    assert update_faults(_record(), ["Adam"]) is None  # none counted
    assert update_faults(_record(1000, cost_s=None), ["Adam"]) is None  # not priced
    assert update_faults(_record(1000, steps=1), ["Adam"]) is None  # one step read: too few
    assert update_faults(_record(1000), ["SGD"]) is None  # a class not read
    assert fused_removed_high(0.4, None) == pytest.approx(0.6)


def test_an_update_that_faults_gets_a_higher_high_end_and_the_same_low_end():
    plain, faulting = _finding(_record()), _finding(_record(1000, 200))
    assert plain.fix_id == faulting.fix_id == "foreach_fused_optimizer"
    assert plain.gain_bound is not None and faulting.gain_bound is not None
    assert faulting.gain_bound > plain.gain_bound
    # The low end is the model's: faults move with the allocator's state.
    assert faulting.gain_low == pytest.approx(plain.gain_low)
    # Amdahl's removed share: the update's faults whole and the step's outside it, added to
    # all but ``kept`` of the rest.
    removed = [1 - 1 / f.gain_bound for f in (plain, faulting)]  # type: ignore[operator]
    kept = fused_cpu_kept("Adam", 6, 4_200_000)
    assert kept is not None
    share = removed[0] / fused_removed_high(kept, None, "Adam")
    # (Adam's temporaries' cost outside the update, ``outside_part``, where larger than the
    # faults outside it.)
    outside = max(0.12, 1 - kept)
    assert removed[1] == pytest.approx(share * (1 - kept * 0.4 + outside), rel=1e-6)
    text = " ".join(faulting.evidence)
    assert "page faults" in text and "1000 fresh pages" in text and "200 more outside" in text
    assert "page faults" not in " ".join(plain.evidence)


def _faulting_optimizer() -> Any:
    """An optimizer whose step writes ``PAGES`` fresh anonymous pages (as an unfused update's
    temporaries past the mmap threshold do), built lazily (torch imported inside the test)."""
    import torch

    class Faulty(torch.optim.Optimizer):
        # Its own step, not SGD's through super(): torch hooks each class's step, so a step
        # calling another hooked one would be two steps of one optimizer.
        PAGES = 64

        def __init__(self, params: Any, lr: float) -> None:
            super().__init__(params, {"lr": lr})

        @torch.no_grad()
        def step(self, closure: Any = None) -> Any:
            if self.PAGES:
                buf = mmap.mmap(-1, self.PAGES * mmap.PAGESIZE)
                for i in range(0, self.PAGES * mmap.PAGESIZE, mmap.PAGESIZE):
                    buf[i] = 1
                buf.close()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])
            return None

    return Faulty


@linux
def test_the_step_clock_counts_each_classs_faults_one_step_in_eight_and_prices_one():
    import torch

    from gpu_notebook.capture.stepclock import _FAULTS_EVERY, StepClock

    model = torch.nn.Linear(8, 1)
    opt = _faulting_optimizer()(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    clock = StepClock(time.perf_counter_ns())
    clock.read_waits = False  # steps under 1 ms: one in eight read
    clock.install()
    try:
        for _ in range(50):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    finally:
        clock.uninstall()
    record = clock.record()
    faults, read = record.optimizer_faults["Faulty"]
    assert 50 // _FAULTS_EVERY - 1 <= read <= 50 // _FAULTS_EVERY + 1
    assert faults >= 64 * read  # every read step wrote its 64 fresh pages
    assert record.rest_faults[1] >= read - 1
    assert record.fault_cost_s is not None and record.fault_cost_s > 0
    term = update_faults(record, ["Faulty"])
    assert term is not None and term.inside >= 64


@linux
def test_an_update_that_makes_no_fresh_pages_is_not_priced():
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(40):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    finally:
        clock.uninstall()
    record = clock.record()
    assert record.optimizer_faults["SGD"][1] >= 3
    # A 9-element update allocates nothing fresh: no fault to price, no term.
    if record.optimizer_faults["SGD"][0] == 0:
        assert record.fault_cost_s is None and update_faults(record, ["SGD"]) is None


# ------------------------------------------------------------------ the update's share on the CPU


def _loaded(update_s: float = 0.002, *, n: int = 200) -> StepClockRecord:
    """A seeded run on a loaded core: every step is 10 ms of its own (the update ``update_s``
    of it), then waits 20-60 ms for a core, which its wall time holds. The wait is read at the
    step's end, not where it fell."""
    rng = random.Random(26)
    rows, t = [], 0.0
    for i in range(n):
        wait = 0.020 + 0.040 * rng.random()
        hit = rng.random()  # where the slices fell: the update or the forward
        opt = update_s + wait * (hit if hit < 0.2 else 0.0)
        fwd = 0.010 - update_s + wait - (opt - update_s)
        d = fwd + opt
        rows.append(StepTiming(i, t, d, 0.0, fwd, 0.0, opt, 1, 1, 32, timed=i < 12, wait_s=wait))
        t += d
    return StepClockRecord(
        "optimizer",
        n,
        tuple(rows),
        event_counts={"optimizer": n, "forward": n, "backward": n},
        lean_optimizer=True,
        grad_tensors=6,
        grad_bytes=4_200_000,
        optimizer_cpu={"Adam": (update_s * (n - 1), n - 1)},
    )


def test_the_updates_cpu_share_is_its_cpu_clock_over_the_steps_own_time():
    record = _loaded()
    whole = run_phase(record, 2, "optimizer", cpu_clock=True)
    assert whole is not None and whole.cpu_share is not None
    assert whole.cpu_share == pytest.approx(0.2, rel=1e-6)  # 2 ms of every 10 ms of its own
    assert whole.cpu_low_share is not None and whole.cpu_high_share is not None
    assert whole.cpu_low_share <= whole.cpu_share <= whole.cpu_high_share
    # The wait spread by the phases' excess reads the update otherwise.
    assert abs(whole.share - 0.2) > 0.02
    # Two optimizers a step (a GAN's G and D, one class): twice the calls, twice the update.
    gan = dataclasses.replace(
        record,
        optimizer_cpu={"Adam": (0.001 * 2 * (200 - 1), 2 * (200 - 1))},
        event_counts={"optimizer": 400, "forward": 200, "backward": 200},
    )
    assert run_phase(gan, 2, "optimizer", cpu_clock=True).cpu_share == pytest.approx(0.2)  # type: ignore[union-attr]
    # Not asked (a GPU run, the data wait): not read.
    assert run_phase(record, 2, "optimizer").cpu_share is None  # type: ignore[union-attr]
    assert run_phase(record, 2, "data", cpu_clock=True) is None or (
        run_phase(record, 2, "data", cpu_clock=True).cpu_share is None  # type: ignore[union-attr]
    )


def test_on_the_cpu_the_fused_bound_rests_on_the_updates_cpu_share():
    record = _loaded()
    run = syn.make_run(ADAM_CELL, steps=record)
    analysis = with_run_figures(run, syn.make_analysis({"optimizer": 0.30}))
    assert analysis.run_optimizer is not None and analysis.run_optimizer.cpu_share is not None
    f = {x.rule_id: x for x in word_findings(run_rules(run, analysis, syn.VERDICT))}[RULE]
    kept = fused_cpu_kept("Adam", 6, 4_200_000)
    assert kept is not None and f.gain_bound is not None
    # (Its high end: the update's own part and as much again outside it, ``outside_part``.)
    assert 1 - 1 / f.gain_bound == pytest.approx(0.2 * 2 * (1 - kept), rel=1e-6)
    assert "loop thread's CPU clock over the steps' own time" in " ".join(f.evidence)


# ------------------------------------------------------------- faults read over the whole run


def _streaky_optimizer(streak: int) -> Any:
    """The faulting optimizer, whose steps fault their 64 pages in streaks: ``streak`` steps
    that fault, then ``streak`` that do not (zip_two_loaders' AdamW at load 25, unprofiled:
    runs of 5-40 steps of 0 and of 300-700 pages)."""
    base = _faulting_optimizer()

    class Streaky(base):  # type: ignore[misc, valid-type]
        steps = 0

        def step(self, closure: Any = None) -> Any:
            Streaky.steps += 1
            self.PAGES = 64 if (Streaky.steps // streak) % 2 == 0 else 0
            return super().step(closure)

    return Streaky


def _clocked(make: Any, steps: int, *, long_steps: bool) -> StepClockRecord:
    """``steps`` training steps of a tiny model stepped by ``make``'s optimizer under a step
    clock; ``long_steps``: what the session sets where steps take 1 ms or more (``read_waits``)."""
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    model = torch.nn.Linear(8, 1)
    opt, batch = make(model.parameters(), lr=0.1), torch.randn(4, 8)
    clock = StepClock(time.perf_counter_ns())
    clock.read_waits = long_steps
    clock.install()
    try:
        for _ in range(steps):
            opt.zero_grad()
            model(batch).sum().backward()
            opt.step()
    finally:
        clock.uninstall()
    return clock.record()


@linux
def test_where_steps_are_long_every_step_is_read_so_a_streak_is_not_the_reading():
    from gpu_notebook.capture.stepclock import _FAULTS_EVERY

    steps = 12 * _FAULTS_EVERY
    # Streaks as long as the sampling period: one step in eight reads only faulting steps or
    # only quiet ones; every step reads half of each.
    record = _clocked(_streaky_optimizer(_FAULTS_EVERY), steps, long_steps=True)
    faults, read = record.optimizer_faults["Streaky"]
    assert read >= steps - 3
    assert 0.35 * 64 <= faults / read <= 0.65 * 64 + 2


@linux
def test_where_steps_are_short_one_step_in_eight_is_read():
    from gpu_notebook.capture.stepclock import _FAULTS_EVERY

    record = _clocked(_faulting_optimizer(), 10 * _FAULTS_EVERY, long_steps=False)
    faults, read = record.optimizer_faults["Faulty"]
    assert 10 - 2 <= read <= 10 + 1
    assert faults >= 64 * read


@linux
def test_the_session_tells_the_clock_of_each_window_it_starts(monkeypatch):
    import torch

    from gpu_notebook.capture.profiler import WindowSchedule
    from gpu_notebook.capture.session import CaptureOptions, CaptureSession
    from gpu_notebook.capture.stepclock import StepClock

    starts: list[int] = []
    original = StepClock.window_starts

    def noted(self: StepClock) -> None:
        starts.append(self.step_count)
        original(self)

    monkeypatch.setattr(StepClock, "window_starts", noted)
    # A later window due at step 40, whatever the machine's speed (the schedule's time budget).
    # One, done well before the loop ends (a window the cell's end cuts short is another path).
    monkeypatch.setattr(WindowSchedule, "due", lambda self, step, elapsed: step == 40)
    monkeypatch.setattr(
        WindowSchedule,
        "next_due_step",
        lambda self, step, elapsed, step_ns: 40 if step < 40 else None,
    )
    net = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    sgd = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    with CaptureSession(CaptureOptions(lines="off"), "loop") as session:
        for batch in torch.randn(60, 5, 6):
            net(batch).abs().sum().backward()
            sgd.step()
            sgd.zero_grad(set_to_none=True)
    session.finish("ok", None)
    assert len(starts) >= 2 and starts[0] <= 3 and any(s >= 40 for s in starts[1:])
