"""Each step's own wait for a core: drift and stalls judged on the part the machine did not take.

Seeded step series: each step's wall time is its own time plus the time its thread waited for
a core (the step clock's schedstat reading at every step end), the sampler's 0.25 s readings
planted beside them. Nothing here depends on this machine's load or speed; the one real loop
checks that the readings are there, not what they read.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from gpu_notebook.analysis.run_trend import combine_windows, run_shape
from gpu_notebook.records import (
    ProfileWindow,
    Run,
    Sample,
    SampleSeries,
    StepClockRecord,
    StepTiming,
)
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn

CORES = 2


def _wobble(i: int) -> float:
    """A deterministic +-4% wobble (a healthy run is never perfectly flat)."""
    return 1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0)


def _run(own_s: list[float], wait_s: list[float], reading_pct: float, cell: str = "") -> Run:
    """Steps of ``own + wait`` seconds, each carrying its wait; the sampler read the thread's
    wait as ``reading_pct`` of the time every 0.25 s, a spinner on the other core throughout."""
    rows, t = [], 0.0
    for i, (own, wait) in enumerate(zip(own_s, wait_s, strict=True)):
        d = own + wait
        rows.append(
            StepTiming(i, t, d, 0.0, own * 0.5, own * 0.4, own * 0.1, 1, 1, 32, wait_s=wait)
        )
        t += d
    samples, at = [], 0.25
    while at <= t + 0.25:
        samples.append(Sample(at, 100.0, 0.0, 100.0, children=0, run_wait_pct=reading_pct))
        at += 0.25
    record = StepClockRecord("optimizer", len(rows), tuple(rows))
    run = syn.make_run(cell, cpu_count=CORES, steps=record)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(
        run,
        env=dataclasses.replace(run.env, usable_cores=CORES),
        window=window,
        samples=SampleSeries(0.25, 0.25, tuple(samples)),
    )


def _unread(run: Run) -> Run:
    """The same steps as a record without per-step waits (an older one, or no schedstat)."""
    steps = tuple(dataclasses.replace(s, wait_s=None) for s in run.steps.steps)
    return dataclasses.replace(run, steps=dataclasses.replace(run.steps, steps=steps))


def _ids(run: Run) -> set[str]:
    return {f.rule_id for f in build_report(run).findings}


def _time_slices_every_7_steps() -> Run:
    """8 ms steps on a core shared with a spinner: every 7th step waits 30 ms for the core (a
    time slice). The sampler's readings say 22%: the stalls' extra time (36% of the run) is
    over 1.25x that, so those readings alone cannot give the stalls to the machine (seen:
    syncs and grad_accumulation loaded, "Every 7 / 2 steps a step stalls")."""
    own = [0.008 * _wobble(i) for i in range(40)]
    wait = [0.030 if i % 7 == 6 else 0.0 for i in range(40)]
    return _run(own, wait, reading_pct=22.0)


def test_time_slices_every_7_steps_are_no_stall_once_each_step_knows_its_wait():
    run = _time_slices_every_7_steps()
    # The sampler's readings alone: a stall every 7 steps, the code's (today's fallback).
    assert "run.periodic_stall" in _ids(_unread(run))
    shape = run_shape(run)
    assert shape is not None and shape.own is not None
    assert shape.stalls is not None and shape.stalls.period_steps == 7  # on the wall clock
    assert shape.own.stalls is None  # the steps' own time never stalled
    assert 0.3 < shape.own.wait_share < 0.4  # 6 time slices of 30 ms in ~0.5 s of steps
    assert "run.periodic_stall" not in _ids(run)


def test_a_slowdown_that_is_the_steps_wait_for_a_core_is_not_drift():
    # 40 ms of own work every step; the thread waits 10 ms a step, then 50 ms (the spinner got
    # more of the cores): 1.8x slower on the wall. The readings stayed at 30% throughout.
    own = [0.040 * _wobble(i) for i in range(30)]
    wait = [0.010 if i < 15 else 0.050 for i in range(30)]
    run = _run(own, wait, reading_pct=30.0)
    assert "run.drift" in _ids(_unread(run))
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.drift is not None
    assert shape.drift > 1.7 and shape.own.drift is not None and shape.own.drift < 1.1
    report = build_report(run)
    ids = {f.rule_id for f in report.findings}
    assert "run.drift" not in ids
    slowed = next(f for f in report.findings if f.rule_id == "machine.slowed")
    assert "read at every step end" in " ".join(slowed.evidence)


def test_steps_whose_own_time_grows_still_drift_under_a_steady_wait():
    # The code slows down (40 -> 80 ms of its own) on a machine that takes 20 ms of every step
    # (60 steps: each fifth holds enough undisturbed steps to give the slowdown a range).
    own = [0.040 * _wobble(i) if i < 30 else 0.080 * _wobble(i) for i in range(60)]
    run = _run(own, [0.020] * 60, reading_pct=30.0)
    drift = next(f for f in build_report(run).findings if f.rule_id == "run.drift")
    assert drift.severity == "high"
    assert "the code's own time grew" in " ".join(drift.evidence)


def test_a_real_stall_with_no_wait_is_found_among_preempted_steps():
    # A checkpoint every 10 steps (50 ms of the step's own, no wait), and a spinner's time
    # slices on every 3rd step: on the wall clock both stall; on own time only the checkpoint.
    own = [0.050 if i % 10 == 9 else 0.008 * _wobble(i) for i in range(60)]
    wait = [0.030 if i % 3 == 1 and i % 10 != 9 else 0.0 for i in range(60)]
    run = _run(own, wait, reading_pct=40.0)
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    assert shape.own.stalls.period_steps == 10
    assert set(shape.own.stalls.steps) == {i for i in range(2, 60) if i % 10 == 9}
    stall = next(f for f in build_report(run).findings if f.rule_id == "run.periodic_stall")
    assert "Every 10 steps" in stall.title and stall.severity == "high"
    assert "less its wait for a core" in " ".join(stall.evidence)


def test_a_record_without_per_step_waits_is_read_as_before():
    run = _unread(_time_slices_every_7_steps())
    shape = run_shape(run)
    assert shape is not None and shape.own is None and shape.run_wait_share == 0.22


def _train(steps: int, read_waits: bool, read_stalls: bool = True) -> StepClockRecord:
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    clock = StepClock(time.perf_counter_ns())
    clock.read_waits = read_waits
    clock.read_stalls = read_stalls
    clock.install()
    try:
        for _ in range(steps):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    finally:
        clock.uninstall()
    return clock.record()


def test_the_step_clock_reads_each_steps_wait_and_cpu_where_schedstat_is():
    import os

    record = _train(6, read_waits=True)
    if not os.path.exists("/proc/thread-self/schedstat"):  # not Linux: no reading, as before
        assert all(s.wait_s is None for s in record.steps)
        return
    # The first step has no reading at its start; every later one has both figures.
    assert record.steps[0].wait_s is None
    assert all(s.wait_s is not None and s.wait_s >= 0 for s in record.steps[1:])
    assert all(s.cpu_s is not None and s.cpu_s >= 0 for s in record.steps[1:])
    assert all(s.wait_s is None and s.cpu_s is None for s in _train(6, False, False).steps)
    # Per-step readings off, slow steps read: a wait where a step took over a millisecond only.
    assert all(
        s.cpu_s is None and (s.wait_s is None or s.duration_s >= 0.001)
        for s in _train(6, False).steps
    )


def test_the_step_clock_reads_the_process_cpu_at_spaced_steps():
    # Steps 0-4 each, then each reading a quarter of its index further on: a few dozen over any
    # run, increasing CPU time (all threads), ending at the step it was read after.
    record = _train(40, read_waits=False)
    idx = [r.index for r in record.process_cpu]
    assert idx == [0, 1, 2, 3, 4, 6, 8, 11, 14, 18, 23, 29, 37]
    cpu = [r.process_cpu_s for r in record.process_cpu]
    assert cpu == sorted(cpu) and cpu[-1] > cpu[0]
    ends = {s.index: s.start_s + s.duration_s for s in record.steps}
    assert all(abs(r.end_s - ends[r.index]) < 1e-6 for r in record.process_cpu)


def test_a_ranks_preempted_steps_neither_drift_nor_stall_in_the_job_report():
    from gpu_notebook.report.job import drift_factor, rank_shape, stalls_matter

    shape = run_shape(_time_slices_every_7_steps())
    rank = rank_shape(shape)
    assert rank is not None and not stalls_matter(rank) and drift_factor(rank) is None
    walls = rank_shape(run_shape(_unread(_time_slices_every_7_steps())))
    assert walls is not None and stalls_matter(walls)  # the wall clock alone: stalls


def _random_own_stalls(wait_each_s: float) -> Run:
    """3 ms steps, 4 of them at 15-24 ms of their own at random (no period, no block in the
    cell), every step waiting ``wait_each_s`` for a core (seen: syncs loaded, 92% waiting)."""
    own = [0.003 * _wobble(i) for i in range(40)]
    for i, extra in ((17, 0.012), (18, 0.019), (24, 0.021), (34, 0.012)):
        own[i] += extra
    return _run(own, [wait_each_s] * 40, reading_pct=90.0 if wait_each_s else 0.0)


def test_own_time_stalls_at_random_on_a_thread_that_mostly_waits_are_the_machines():
    busy = _random_own_stalls(0.040)
    shape = run_shape(busy)
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    assert shape.own.stalls.period_steps is None and shape.own.wait_share > 0.8
    assert "run.periodic_stall" not in _ids(busy)
    # The same steps with no wait for a core: said, low, as stalls at random are.
    quiet = build_report(_random_own_stalls(0.0))
    stall = next(f for f in quiet.findings if f.rule_id == "run.periodic_stall")
    assert stall.title == "Some steps stall" and stall.severity == "low"


def _window_then_rest(rest_own_s: float, window_wait_s: float, rest_wait_s: float) -> Run:
    """12 steps of 1.7 ms of their own (the profiled window among them: steps 2-4), then 48 of
    ``rest_own_s``, each step waiting for a core as given. When the rest is slower, its extra
    time is in the loader: 4 ms for each batch (input-bound)."""
    own = [(0.0017 if i < 12 else rest_own_s) * _wobble(i) for i in range(60)]
    wait = [window_wait_s if i < 12 else rest_wait_s for i in range(60)]
    run = _run(own, wait, reading_pct=50.0)
    if rest_own_s < 0.004:
        return run
    rows = tuple(
        dataclasses.replace(
            s, data_s=0.004, forward_s=0.0012, backward_s=0.0009, optimizer_s=0.0002
        )
        if s.index >= 12
        else s
        for s in run.steps.steps
    )
    return dataclasses.replace(run, steps=dataclasses.replace(run.steps, steps=rows))


def test_a_window_alike_on_the_wall_but_unlike_the_run_in_own_time_does_not_decide():
    # Under heavy preemption the cached steps wait 4.6 ms for a core, the slow ones 0.2 ms:
    # 6.3 against 6.5 ms on the wall, 1.7 against 6.3 ms of their own (cached_then_slow, loaded).
    run = _window_then_rest(0.0063, window_wait_s=0.0046, rest_wait_s=0.0002)
    walls = run_shape(_unread(run))
    assert walls is not None and walls.represents is True  # the wall clock: alike
    shape = run_shape(run)
    assert shape is not None and shape.represents is False
    assert shape.window_median_s is not None and shape.window_median_s < 0.002
    report = build_report(run)
    unlike = next(f for f in report.findings if f.rule_id == "run.window_unrepresentative")
    assert "less its wait for a core" in " ".join(unlike.evidence)
    # The run decides: every step's data wait, not the cached window.
    assert report.verdict.category == "input-bound"
    assert report.verdict.evidence[0].startswith("the profiled window does not represent")


def test_a_window_unlike_the_run_on_the_wall_only_by_its_wait_for_a_core_represents_it():
    # The same 1.7 ms of own work throughout; the steps after the window wait 4.6 ms a step for
    # a core (the machine got busy): 1.8 against 6.3 ms on the wall.
    run = _window_then_rest(0.0017, window_wait_s=0.0001, rest_wait_s=0.0046)
    walls = run_shape(_unread(run))
    assert walls is not None and walls.represents is False  # the wall clock: unlike
    shape = run_shape(run)
    assert shape is not None and shape.represents is True
    assert "run.window_unrepresentative" not in _ids(run)


def test_each_step_stands_with_the_window_of_its_own_pace_under_load():
    from gpu_notebook.analysis.run_trend import combine_windows

    # A cached window (1.7 ms own, 24 ms waiting for a core) and one in the slow part (6.3 ms
    # own, 4 ms of it data); the slow steps wait 25 ms, the few after the second window 14 ms.
    # On the wall the slow steps (31 ms) are nearer the cached window's 26 ms than the second
    # window's 20 ms (seen: cached_then_slow loaded, data 7% of the combined split).
    own = [0.0017 * _wobble(i) if i < 20 else 0.0063 * _wobble(i) for i in range(80)]
    wait = [0.024 if i < 20 else 0.014 if 43 <= i < 48 else 0.025 for i in range(80)]
    record = _run(own, wait, reading_pct=80.0).steps
    cached = syn.phases({"data": 0.01, "backward": 0.6}, steps=3)
    slow = syn.phases({"data": 0.65, "backward": 0.2}, steps=3)
    windows = [(2, 3, cached), (40, 3, slow)]
    walls = combine_windows(_unread(_run(own, wait, 80.0)).steps, 2, windows)
    assert walls is not None and (walls.share("data") or 0.0) < 0.2  # the wall clock's pick
    combined = combine_windows(record, 2, windows)
    assert combined is not None and (combined.share("data") or 0.0) > 0.5


def test_several_windows_give_the_run_s_step_on_the_windows_own_clock():
    from gpu_notebook.analysis.interference import own_time_phases

    # 12 ms of its own a step, 110 ms waiting for a core (a loaded machine: 90% waited), two
    # profiled windows each taken to own time as the first is (analyze._whole_run). Their
    # combination read the step as the wall's 122 ms: the estimate on a GPU came out 61.5x
    # from this figure, 7.4x from the same code's one-window run (unseen round 11).
    own = [0.012 * _wobble(i) for i in range(100)]
    wait = [0.110] * 100
    record = _run(own, wait, reading_pct=90.0).steps
    windows = []
    for first in (2, 66):
        trace = syn.phases({"backward": 0.6}, steps=3, step_us=122_000.0)
        trace = dataclasses.replace(
            trace, steps=tuple(dataclasses.replace(s, index=first + s.index) for s in trace.steps)
        )
        windows.append((first, 3, own_time_phases(trace, record.steps)))
    combined = combine_windows(record, 2, windows)
    assert combined is not None
    step_us = combined.total_us / len(combined.steps)
    assert step_us == pytest.approx(12_000.0, rel=0.05)
    assert combined.waited_share == pytest.approx(110 / 122, abs=0.02)  # the wait, read once


def test_stalls_of_own_time_are_a_share_of_the_steps_own_time():
    # 12 ms of its own a step, 150 ms more every 10th (an evaluation), each step waiting 110
    # ms for a core. The stalls are half the code's time; read against the wall (the wait in
    # it) they were 10%, and 6% / under the stall line in two loaded runs of an HF Trainer
    # evaluating every 10 steps (unseen round 11): the finding came and went.
    own = [0.012 * _wobble(i) + (0.150 if i and i % 10 == 0 else 0.0) for i in range(120)]
    run = _run(own, [0.110] * 120, reading_pct=90.0)
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    stalls = shape.own.stalls
    assert stalls.period_steps == 10
    assert stalls.share == pytest.approx(stalls.excess_s / sum(own), rel=0.05)  # read steps
    assert stalls.share > 0.45


def _tiny_steps_with_slices(slice_wait_s: float | None) -> Run:
    """A tiny-op loop (130 us steps, too short for per-step readings) with a 4.2 ms step every
    28 steps: another process's time slice (its wait read after the slow step) or, with no wait
    in it, the code's own stall."""
    own = [0.00013 * _wobble(i) for i in range(300)]
    wait = [0.0] * 300
    for i in range(37, 300, 28):
        own[i] = 0.0042 - (slice_wait_s or 0.0)
        wait[i] = slice_wait_s or 0.0
    run = _run(own, wait, 0.0)
    rows = tuple(
        dataclasses.replace(s, wait_s=wait[s.index] if wait[s.index] > 0 else None)
        for s in run.steps.steps
    )
    if slice_wait_s is None:  # the slow steps were read too, and waited for nothing
        rows = tuple(
            dataclasses.replace(s, wait_s=0.0) if s.duration_s > 0.001 else s for s in rows
        )
    return dataclasses.replace(run, steps=dataclasses.replace(run.steps, steps=rows))


def test_tiny_steps_that_lost_a_time_slice_are_no_stall():
    machine = _tiny_steps_with_slices(0.0041)
    shape = run_shape(machine)
    assert shape is not None and shape.stalls is None, shape.stalls
    assert "run.periodic_stall" not in {f.rule_id for f in build_report(machine).findings}
    # The same slow steps with no wait for a core in them: the code's, every 28 steps.
    code = _tiny_steps_with_slices(None)
    shape = run_shape(code)
    assert shape is not None and shape.stalls is not None and shape.stalls.period_steps == 28
    assert "run.periodic_stall" in {f.rule_id for f in build_report(code).findings}


def test_the_step_clock_reads_a_slow_steps_wait_when_steps_are_too_short_to_read():
    import os

    import torch

    from gpu_notebook.capture.stepclock import StepClock

    if not os.path.exists("/proc/thread-self/schedstat"):
        return
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    clock = StepClock(time.perf_counter_ns())
    clock.read_waits = False  # the session's choice for steps under WAIT_MIN_STEP_S
    clock.install()
    try:
        for i in range(60):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            if i in (20, 45):
                time.sleep(0.003)  # a slow step: its wait is read (here: none to speak of)
            opt.step()
    finally:
        clock.uninstall()
    record = clock.record()
    read = {s.index for s in record.steps if s.wait_s is not None}
    assert {20, 45} <= read  # both slow steps, whatever the machine's load
    slow = {s.index for s in record.steps if s.duration_s >= 0.001}
    assert read <= slow  # no fast step carries a reading
    assert all(s.cpu_s is None for s in record.steps)  # a reading spans several steps' CPU


def _session_steps(monkeypatch, median_s: float, slow: set[int]) -> tuple[StepTiming, ...]:
    """A tiny optimizer loop under a capture session whose step clock reports ``median_s`` as
    the steps' median (the session's choice of readings rests on it, whatever the machine's
    load); the steps in ``slow`` sleep 3 ms."""
    import torch

    from gpu_notebook.capture.session import CaptureOptions, CaptureSession
    from gpu_notebook.capture.stepclock import StepClock

    monkeypatch.setattr(StepClock, "median_step_s", lambda self, last=50: median_s)
    torch.manual_seed(0)
    with CaptureSession(CaptureOptions(more_windows=False, lines="off"), "loop") as session:
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(4, 8)
        for i in range(200):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            if i in slow:
                time.sleep(0.003)
            opt.step()
    run = session.finish("ok", None)
    return run.steps.steps


def test_steps_too_short_to_pay_for_a_reading_each_carry_a_wait_only_where_slow(monkeypatch):
    import os

    from gpu_notebook.capture.session import WAIT_MIN_STEP_S

    if not os.path.exists("/proc/thread-self/schedstat"):
        return
    # 0.7 ms steps: a schedstat read at each end costs ~9 us of such a step inside a real loop
    # (benchmarks/README.md), so after the first window they are read after a slow step only.
    steps = _session_steps(monkeypatch, 0.0007, slow={150, 170})
    late = [s for s in steps if s.index >= 100]
    assert late and all(s.cpu_s is None for s in late)
    assert {150, 170} <= {s.index for s in late if s.wait_s is not None}
    assert all(s.wait_s is None for s in late if s.duration_s < 0.001)
    # Long steps keep a reading at each end: every step its own wait and time on a core.
    steps = _session_steps(monkeypatch, 2 * WAIT_MIN_STEP_S, slow={150, 170})
    late = [s for s in steps if s.index >= 100]
    assert late and all(s.wait_s is not None and s.cpu_s is not None for s in late)


def _two_optimizer_loop(iterations: int, order: list[str]):
    """A GAN-shaped loop under the real step clock: per batch, the optimizers named in
    ``order`` step ("d", "g"); its record."""
    import time as _time

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    loader = DataLoader(TensorDataset(torch.randn(iterations * 4, 2)), batch_size=4)
    d, g = torch.nn.Linear(2, 1), torch.nn.Linear(2, 2)
    opts = {
        "d": torch.optim.SGD(d.parameters(), lr=0.01),
        "g": torch.optim.SGD(g.parameters(), lr=0.01),
    }
    clock = StepClock(_time.perf_counter_ns())
    clock.install()
    try:
        for (x,) in loader:
            for name in order:
                (d(g(x)).sum() if name == "g" else d(x).sum()).backward()
                opts[name].step()
    finally:
        clock.uninstall()
    return clock.record()


def test_two_optimizers_stepping_in_one_iteration_make_one_step():
    # A GAN steps D and G once a batch: on main each optimizer step ended a step (twice the
    # steps, half the step time, twice the samples/s).
    record = _two_optimizer_loop(12, ["d", "g"])
    assert record.event_counts["optimizer"] == 24
    # One a batch from the first: the first batch's G steps with no batch read since D ended a
    # step, so its step joins D's (it was a step of its own: 13 for 12 batches, unseen round 13).
    assert record.step_count == 12
    assert all(s.batch_size == 4 for s in record.steps)
    # One optimizer still ends every step; a critic stepping 3 times a G step is one step a batch
    # with it (the cycle d, d, d, g: 18-20 steps for 6 batches before).
    assert _two_optimizer_loop(12, ["d"]).step_count == 12
    critic = _two_optimizer_loop(6, ["d", "d", "d", "g"])
    assert critic.event_counts["optimizer"] == 24 and critic.step_count == 6


def test_a_validation_loaders_batches_are_not_the_training_steps_data():
    # Issue 26: validation every N steps over its own DataLoader, under torch.no_grad, counted
    # its batches' wait as the training step's data wait (the run read 41% data against the
    # window's 10%: an in-memory finding at 'high') and its samples as the step's. A loader read
    # with autograd off while the loop trains is the step's other work.
    import time as _time

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    train = DataLoader(TensorDataset(torch.randn(48, 2)), batch_size=4)
    val = DataLoader(TensorDataset(torch.randn(16, 2)), batch_size=8)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clock = StepClock(_time.perf_counter_ns())
    clock.install()
    try:
        for step, (x,) in enumerate(train):
            model(x).sum().backward()
            opt.step()
            if step % 3 == 0:
                with torch.no_grad():
                    for (vx,) in val:
                        model(vx)
    finally:
        clock.uninstall()
    record = clock.record()
    assert record.step_count >= 10
    # Every step took one training batch of 4, validation steps included (on main: 4 + 16).
    assert {s.batch_size for s in record.steps[1:]} == {4}


def _timing(i: int, d_ms: float, w_ms: float | None) -> StepTiming:
    d = d_ms / 1e3
    return StepTiming(i, i * 0.01, d, 0.0, d * 0.4, d * 0.4, d * 0.2, 1, 1, 32,
                      wait_s=None if w_ms is None else w_ms / 1e3)  # fmt: skip


def test_a_wait_read_across_a_step_end_is_the_next_steps():
    from gpu_notebook.analysis.interference import in_step_waits, own_step_times

    # Step 1 (0.37 ms) read 7.5 ms of wait, step 2 (8.2 ms) none: the wait fell between the
    # clock's read and schedstat's, in step 2's wall time. Each step's own time is then its
    # pace (main: 0 and 8.2 ms).
    steps = [
        _timing(0, 0.4, 0.0),
        _timing(1, 0.37, 7.5),
        _timing(2, 8.2, 0.0),
        _timing(3, 0.4, 0.0),
    ]
    assert [round(w * 1e3, 2) for w in in_step_waits(steps)] == [0.0, 0.0, 7.5, 0.0]
    own = own_step_times(steps)
    assert own is not None and [round(x * 1e3, 2) for x in own] == [0.4, 0.37, 0.7, 0.4]
    # A next step too short to hold it, one not read, or one not next: the reading stays.
    for after in (_timing(2, 5.0, 0.0), _timing(2, 8.2, None), _timing(3, 8.2, 0.0)):
        kept = in_step_waits([steps[0], steps[1], after])
        assert round(kept[1] * 1e3, 2) == 7.5


def test_a_real_loaded_run_whose_waits_crossed_step_ends_is_read_at_its_pace():
    # A real run recorded on 2 cores where others held ~1.8 (tests/data): two of the window's
    # neighbours read more wait than their wall time, the steps after them none; main read
    # their own time 0 us and the window 'unlike' the run ('unknown').
    from tests.recorded_steps import recorded_run

    run = recorded_run("loaded_crossed_waits_steps.json")
    shape = run_shape(run)
    assert shape is not None and shape.window_median_s is not None
    assert shape.window_median_s > 1e-4  # no step of the loop reads 0 us of its own
    assert shape.represents is True
