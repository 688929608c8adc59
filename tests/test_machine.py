"""The machine, not your code: recorded step series with injected interference samples.

Other processes' load is planted in the sampler's readings (whole-machine busy share against
this process's own), so nothing here depends on this machine's load or speed.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.analyze import with_run_figures
from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import ProfileWindow, Sample, SampleSeries, StepClockRecord, StepTiming
from gpu_notebook.report.build import build_report
from gpu_notebook.rules import machine
from gpu_notebook.words import worded
from tests.scenarios import synthetic as syn

CORES = 2


def _record(durations: list[float]) -> StepClockRecord:
    rows, t = [], 0.0
    for i, d in enumerate(durations):
        rows.append(StepTiming(i, t, d, 0.0, d * 0.5, d * 0.4, d * 0.1, 1, 1, 32))
        t += d
    return StepClockRecord("optimizer", len(rows), tuple(rows))


def _samples(
    t_end_s: float, others_cores, ours_pct: float = 100.0, every_s: float = 0.25
) -> SampleSeries:
    """Samples every ``every_s`` with the other processes' load given by ``others_cores(t)``."""
    out, t = [], every_s
    while t <= t_end_s + every_s:
        system = min(100.0, (ours_pct / 100.0 + others_cores(t)) / CORES * 100.0)
        out.append(Sample(t, ours_pct, 0.0, system, children=0))
        t += every_s
    return SampleSeries(every_s, every_s, tuple(out))


def _run(durations, others_cores, ours_pct=100.0, threads=None):
    rec = _record(durations)
    end = rec.steps[-1].start_s + rec.steps[-1].duration_s
    run = syn.make_run("", cpu_count=CORES, steps=rec, series=_samples(end, others_cores, ours_pct))
    env = dataclasses.replace(run.env, usable_cores=CORES, torch_threads=threads)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(run, env=env, window=window)


def _analysis(run):
    """A window's analysis with the machine's figures of ``run``, as ``analyze`` gives them."""
    return with_run_figures(run, syn.make_analysis())


def test_a_load_burst_is_not_drift():
    # 10 ms steps; from 3 s on another job takes 1.5 cores and every step takes 20 ms.
    durations, t = [], 0.0
    while t < 6.0:
        d = 0.010 if t < 3.0 else 0.020
        durations.append(d)
        t += d
    run = _run(durations, lambda t: 0.0 if t < 3.0 else 1.5)
    shape = run_shape(run)
    assert shape is not None and shape.busy_steps > 100
    assert shape.busy_slowdown is not None and shape.busy_slowdown > 1.8
    # The whole last fifth ran under load: the slowdown is that of the busy steps.
    assert shape.last_median_s <= 1.25 * shape.busy_slowdown * shape.first_median_s
    ids = {f.rule_id for f in build_report(run).findings}
    assert "run.drift" not in ids and "machine.busy" in ids
    busy = next(f for f in build_report(run).findings if f.rule_id == "machine.busy")
    assert "not your code" in busy.title and "1.00 cores" in " ".join(
        busy.evidence
    )  # the machine is full


def test_the_same_slowdown_on_a_quiet_machine_is_drift():
    durations = [0.010] * 300 + [0.020] * 150
    run = _run(durations, lambda t: 0.0)
    ids = {f.rule_id for f in build_report(run).findings}
    assert "run.drift" in ids and "machine.busy" not in ids


def test_a_drift_whose_machine_wait_was_not_read_is_not_high():
    # A 2x slowdown over the run. Read every quarter second with no wait for a core, it is the
    # code's: high. Read fewer than twice (a short run), the machine's load is unknown: no
    # machine guard could apply, so the drift must not outrank the cell's own findings.
    durations = [0.010] * 300 + [0.020] * 150
    read = _run(durations, lambda t: 0.0)
    samples = tuple(dataclasses.replace(s, run_wait_pct=0.0) for s in read.samples.samples)
    read = dataclasses.replace(read, samples=dataclasses.replace(read.samples, samples=samples))
    drift = next(f for f in build_report(read).findings if f.rule_id == "run.drift")
    assert drift.severity == "high"
    assert "could not be read" not in " ".join(drift.evidence)
    one = samples[:1] + tuple(dataclasses.replace(s, run_wait_pct=None) for s in samples[1:])
    for few in (
        samples[:0] + tuple(dataclasses.replace(s, run_wait_pct=None) for s in samples),
        one,
    ):
        unread = dataclasses.replace(read, samples=dataclasses.replace(read.samples, samples=few))
        drift = next(f for f in build_report(unread).findings if f.rule_id == "run.drift")
        assert drift.severity == "low"
        assert "could not be read" in " ".join(drift.evidence)


def test_more_threads_than_free_cores_is_a_finding_with_its_fix_and_bound():
    run = _run([0.2] * 40, lambda t: 1.0, ours_pct=100.0, threads=2)
    found = worded(machine.oversubscribed(run, _analysis(run), SourceFacts(parsed=False)))
    assert found is not None and "torch.set_num_threads(1)" in found.fix
    assert found.gain_bound is not None and found.gain_bound == 2.0
    assert "1.00 cores" in " ".join(found.evidence)


def test_threads_that_wait_are_not_oversubscribed():
    # The process waits (data, sleep): 20% of a core, whatever the pool's size.
    run = _run([0.2] * 40, lambda t: 1.0, ours_pct=20.0, threads=2)
    assert machine.oversubscribed(run, _analysis(run), SourceFacts(parsed=False)) is None
    # One thread on a busy machine is not oversubscribed either.
    run = _run([0.2] * 40, lambda t: 1.0, ours_pct=100.0, threads=1)
    assert machine.oversubscribed(run, _analysis(run), SourceFacts(parsed=False)) is None


def test_a_machine_busy_throughout_is_named_shared():
    run = _run([0.2] * 40, lambda t: 1.5, ours_pct=50.0, threads=1)
    found = worded(machine.shared_machine(run, _analysis(run), SourceFacts(parsed=False)))
    assert found is not None and "1.50 of 2 cores" in found.evidence[0]
    quiet = _run([0.2] * 40, lambda t: 0.1, ours_pct=50.0, threads=1)
    assert machine.shared_machine(quiet, _analysis(quiet), SourceFacts(parsed=False)) is None


def test_steps_slowed_by_waiting_for_a_core_are_the_machine_not_drift():
    # A machine saturated from start to end (no change in others' load), but from 3 s on the
    # loop's thread waits for a core half of every step (schedstat run-queue wait): 2x steps.
    durations, t = [], 0.0
    while t < 6.0:
        d = 0.010 if t < 3.0 else 0.020
        durations.append(d)
        t += d
    run = _run(durations, lambda t: 1.0)
    samples = tuple(
        dataclasses.replace(s, run_wait_pct=0.0 if s.t_s < 3.0 else 50.0)
        for s in run.samples.samples
    )
    run = dataclasses.replace(run, samples=dataclasses.replace(run.samples, samples=samples))
    ids = {f.rule_id for f in build_report(run).findings}
    assert "run.drift" not in ids
    assert {"machine.slowed", "machine.busy"} & ids
    # The same slowdown with no wait for a core is the code's.
    quiet = _run(durations, lambda t: 1.0)
    samples = tuple(dataclasses.replace(s, run_wait_pct=0.0) for s in quiet.samples.samples)
    quiet = dataclasses.replace(quiet, samples=dataclasses.replace(quiet.samples, samples=samples))
    ids = {f.rule_id for f in build_report(quiet).findings}
    assert "run.drift" in ids and not {"machine.slowed", "machine.busy"} & ids


def test_a_checkpoint_every_40_steps_keeps_its_period_among_random_preemptions():
    import numpy as np

    rng = np.random.default_rng(7)
    durations = [0.0002] * 400
    for i in rng.choice(400, size=30, replace=False):
        durations[int(i)] = 0.010  # the machine preempted these, at random
    for i in range(40, 400, 40):
        durations[i] = 0.050  # the code's own checkpoint
    run = _run(durations, lambda t: 1.0)
    shape = run_shape(run)
    assert shape is not None and shape.stalls is not None
    assert shape.stalls.period_steps == 40


PERIODIC_CELL = """\
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if step % 15 == 0:
        torch.save(model.state_dict(), "ckpt.pt")
"""


def _preempted(run_wait_pct: float, cell: str = ""):
    """Tiny steps on a core shared with a spinning process: the scheduler's time slice makes
    every 15th step wait ~12 ms for the core (seen: syncs and host_tiny_ops under load)."""
    durations = [0.012 if i % 15 == 14 else 0.00025 for i in range(150)]
    run = _run(durations, lambda t: 1.0)
    # Readings every 10 ms over the 0.2 s run (the machine full: ours and a spinner).
    step_end = run.steps.steps[-1].start_s + run.steps.steps[-1].duration_s
    samples = tuple(
        Sample(0.01 * k, 100.0, 0.0, 100.0, children=0, run_wait_pct=run_wait_pct)
        for k in range(1, int(step_end / 0.01) + 2)
    )
    series = dataclasses.replace(run.samples, interval_s=0.01, samples=samples)
    return dataclasses.replace(run, samples=series, cell_source=cell)


def test_regular_preemptions_the_run_queue_wait_covers_are_not_a_periodic_stall():
    run = _preempted(run_wait_pct=75.0)
    shape = run_shape(run)
    assert shape is not None and shape.stalls is not None and shape.stalls.period_steps
    # The stalls' extra time (~75% of the run) is what the thread waited for a core.
    assert shape.run_wait_share is not None and shape.run_wait_share >= 0.7
    ids = {f.rule_id for f in build_report(run).findings}
    assert "run.periodic_stall" not in ids
    # The same steps with no wait for a core: the code stalls every 15 steps.
    quiet = build_report(_preempted(run_wait_pct=0.0))
    stall = next(f for f in quiet.findings if f.rule_id == "run.periodic_stall")
    assert stall.severity == "high" and "Every 15 steps" in stall.title


def test_a_periodic_block_of_the_cell_keeps_its_stall_on_a_busy_machine():
    report = build_report(_preempted(run_wait_pct=75.0, cell=PERIODIC_CELL))
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert "Every 15 steps" in stall.title and stall.line is not None


def _busy_wobble(tail_ms: float, wait: list[float] | None):
    """30 steps of 40 ms, the last 15 at ``tail_ms``; the sampler's run-wait readings every
    0.25 s follow ``wait`` in turn (a busy machine's wobble), or none at all (None: 0%)."""
    durations = [0.040] * 15 + [tail_ms / 1e3] * 15
    run = _run(durations, lambda t: 1.0)
    pattern = wait or [0.0]
    samples = tuple(
        dataclasses.replace(s, run_wait_pct=100.0 * pattern[k % len(pattern)])
        for k, s in enumerate(run.samples.samples)
    )
    return dataclasses.replace(run, samples=dataclasses.replace(run.samples, samples=samples))


def test_a_drift_inside_the_wobble_of_a_busy_threads_wait_is_the_machine():
    # The thread waits for a core 84-90% of the time, the readings a little lower late in the
    # run. The code's own time in a step is a tenth of it: dividing each step by its own
    # reading's (1 - wait) made a 1.5x slowdown a 2.4x drift of the code; the readings around
    # each fifth, widened by their wobble, explain 1.55x.
    wobble = [0.90, 0.90, 0.86, 0.86, 0.84, 0.84, 0.84]
    busy = _busy_wobble(60.0, wobble)
    shape = run_shape(busy)
    assert shape is not None and shape.own_drift is not None and shape.own_drift < 1.5
    assert "run.drift" not in {f.rule_id for f in build_report(busy).findings}
    # The same slowdown on a thread that never waited: the code's.
    quiet = build_report(_busy_wobble(60.0, None))
    assert "run.drift" in {f.rule_id for f in quiet.findings}
    # A slowdown beyond what the wobble explains stays the code's on the busy machine.
    grown = build_report(_busy_wobble(200.0, wobble))
    assert "run.drift" in {f.rule_id for f in grown.findings}


def _wait_after(t_s: float) -> float:
    """The thread's wait for a core (%) read ``t_s`` after the load began (seen: a reading of
    37%, then the readings that followed at 8%: the spinners had found the other core)."""
    return 0.5 if t_s <= 0.0 else 37.0 if t_s <= 0.25 else 8.0


def _busy_halfway(load_changes: bool):
    """600 steps of 8 ms; step 300 sleeps 0.5 s (the harness starts its load then). With
    ``load_changes`` two spinning processes take the cores from there: the other processes'
    load goes from 0.3 to 1.7 cores, the thread waits for a core (``_wait_after``), and every
    5-7th step (seeded, irregular) is preempted for 45-95 ms. Without it the same steps run on
    a machine whose load never changed."""
    import numpy as np

    rng = np.random.default_rng(22)
    durations = [0.008] * 600
    durations[300] = 0.5
    i = 301
    while i < 600:
        durations[i] = float(rng.uniform(0.045, 0.095))
        i += int(rng.integers(5, 8))
    busy_from = sum(durations[:301])
    if load_changes:
        run = _run(durations, lambda t: 1.7 if t > busy_from else 0.3)
        samples = tuple(
            dataclasses.replace(s, run_wait_pct=_wait_after(s.t_s - busy_from))
            for s in run.samples.samples
        )
    else:
        run = _run(durations, lambda t: 0.3)
        samples = tuple(dataclasses.replace(s, run_wait_pct=0.5) for s in run.samples.samples)
    return dataclasses.replace(run, samples=dataclasses.replace(run.samples, samples=samples))


def test_stalls_that_begin_when_the_machine_gets_busy_are_the_machines():
    # Seen on busy_halfway (benchmarks/stability.py): the busy half kept for the drift (it is
    # a whole end of the run), its preemptions read "Every 107 steps a step stalls" [high];
    # the run's median wait (most readings ~0-8%) did not cover them.
    run = _busy_halfway(load_changes=True)
    shape = run_shape(run)
    assert shape is not None and shape.run_wait_share is not None and shape.run_wait_share < 0.2
    assert shape.busy_stalls >= 40 and (shape.busy_stall_share or 0.0) > 0.02
    report = build_report(run)
    code = [
        f
        for f in report.findings
        if f.rule_id == "run.periodic_stall" and f.severity in ("medium", "high")
    ]
    assert not code
    busy = next(f for f in report.findings if f.rule_id == "machine.busy")
    assert "stalled" in busy.title
    # The same steps on a machine whose load never changed: the stalls are the code's to explain.
    quiet = build_report(_busy_halfway(load_changes=False))
    assert "run.periodic_stall" in {f.rule_id for f in quiet.findings}
    assert "machine.busy" not in {f.rule_id for f in quiet.findings}


def test_a_sleeping_stall_that_frees_our_core_to_others_stays_the_codes():
    # 5 ms steps, a 200 ms disk write every 40 steps (no `if step % N` in the cell: it sits
    # in a function). While the loop sleeps, the shared machine's other processes take its
    # core: the reading around each write reads them 0.8 cores busier. One reading is not the
    # machine getting busy; the stalls stay the code's.
    durations = [0.2 if i % 40 == 20 else 0.005 for i in range(600)]
    starts = [sum(durations[:i]) for i in range(600)]
    writes = [(starts[i], starts[i] + 0.2) for i in range(600) if durations[i] == 0.2]

    def others(t: float) -> float:
        return 1.0 if any(a < t - 0.1 <= b for a, b in writes) else 0.2

    run = _run(durations, others)
    shape = run_shape(run)
    assert shape is not None and shape.stalls is not None and shape.stalls.period_steps == 40
    # The readings around the writes do read the others busier; the run has no busy stretch.
    from gpu_notebook.analysis.interference import busy_steps
    from gpu_notebook.analysis.steps import steady_steps

    assert busy_steps(run, steady_steps(run.steps, run.window.warmup_steps))
    assert shape.busy_steps == 0 and shape.busy_stalls == 0
    stall = next(f for f in build_report(run).findings if f.rule_id == "run.periodic_stall")
    assert stall.severity == "high" and "Every 40 steps" in stall.title


def test_busy_steps_stalls_stay_the_codes_when_the_cell_has_a_periodic_block():
    # The same busy half, in a cell with `if step % 15 == 0: torch.save(...)`: its stalls may
    # be the checkpoint's on a busy machine, so they stay the code's and name the line.
    run = dataclasses.replace(_busy_halfway(load_changes=True), cell_source=PERIODIC_CELL)
    report = build_report(run)
    stall = next(f for f in report.findings if f.rule_id == "run.periodic_stall")
    assert stall.line is not None
    busy = next((f for f in report.findings if f.rule_id == "machine.busy"), None)
    assert busy is None or "stalled" not in busy.title


def test_stalls_are_read_against_the_wait_of_the_readings_they_fall_in():
    # A machine busy almost from the start (too few quiet steps for a busy split): the thread
    # waits 2% of the time for 100 steps of 8 ms, 35% for the next 300, then 80% while every
    # 5-7th step is preempted for 100-200 ms (seen: busy_halfway on a shared machine, 44% over
    # the run, 77-82% around the stalls). The run's median wait does not cover the stalls'
    # half of the run; the wait of the readings they fall in does.
    import numpy as np

    rng = np.random.default_rng(5)
    durations = [0.008] * 600
    i = 401
    while i < 600:
        durations[i] = float(rng.uniform(0.1, 0.2))
        i += int(rng.integers(5, 8))
    t100, t400 = sum(durations[:100]), sum(durations[:400])
    run = _run(durations, lambda t: 1.0)
    samples = tuple(
        dataclasses.replace(
            s, run_wait_pct=2.0 if s.t_s <= t100 else 35.0 if s.t_s <= t400 else 80.0
        )
        for s in run.samples.samples
    )
    run = dataclasses.replace(run, samples=dataclasses.replace(run.samples, samples=samples))
    shape = run_shape(run)
    assert shape is not None and shape.stalls is not None and shape.busy_stalls == 0
    assert shape.run_wait_share is not None and shape.stalls.share > 1.25 * shape.run_wait_share
    assert shape.stall_wait_share is not None and shape.stall_wait_share >= 0.7
    assert "run.periodic_stall" not in {f.rule_id for f in build_report(run).findings}


def _readings(run, cores: float):
    """The step clock's spaced CPU readings of the process at ``cores`` while the steps ran."""
    readings = syn.process_cpu(run.steps.steps, cores)
    return dataclasses.replace(run, steps=dataclasses.replace(run.steps, process_cpu=readings))


def test_a_short_loop_whose_pool_computes_is_oversubscribed():
    # 4 torch threads on 2 idle cores, a loop of 0.4 s: the sampler's readings (a quarter second
    # apart) saw the imports and set-up, one core; the step clock's readings saw the pool use
    # 1.45 cores while the steps ran (the rest idle at its barriers).
    run = _readings(_run([0.014] * 30, lambda t: 0.0, ours_pct=100.0, threads=4), 1.45)
    found = worded(machine.oversubscribed(run, _analysis(run), SourceFacts(parsed=False)))
    assert found is not None and "torch.set_num_threads(2)" in found.fix
    assert "this process used 1.45 cores while the steps ran" in found.evidence
    # The same pool in a loop that waits (0.3 cores): nothing competes.
    idle = _readings(_run([0.014] * 30, lambda t: 0.0, ours_pct=100.0, threads=4), 0.3)
    assert machine.oversubscribed(idle, _analysis(idle), SourceFacts(parsed=False)) is None


def test_a_sleep_every_25_steps_keeps_its_period_among_time_slices_on_a_busy_machine():
    # The CI failure of test_cli's stall script, as a series: 70 us steps, a 200 ms sleep every
    # 25 steps (read after the step: no wait for a core in it), two steps of 60 ms lost to
    # another process (read: 60 ms waited), and the other processes took our core while we
    # slept (the sampler reads the machine busier around each sleep).
    durations, waits, sleeps = [], [], []
    for i in range(150):
        if i % 25 == 1 and i > 1:
            durations.append(0.2)
            waits.append(0.0)
            sleeps.append(i)
        elif i in (81, 82):
            durations.append(0.06)
            waits.append(0.0599)
        else:
            durations.append(0.00007)
            waits.append(None)
    # Another job took the machine from the second sleep to the fifth: those sleeps ran "loud".
    starts = [sum(durations[:i]) for i in range(len(durations))]
    busy = (starts[sleeps[1]], starts[sleeps[3]] + 0.25)
    run = _run(durations, lambda t: 1.8 if busy[0] <= t <= busy[1] else 0.0)
    rows = tuple(dataclasses.replace(s, wait_s=waits[s.index]) for s in run.steps.steps)
    run = dataclasses.replace(run, steps=dataclasses.replace(run.steps, steps=rows))
    shape = run_shape(run)
    assert shape is not None and shape.stalls is not None
    assert shape.stalls.period_steps == 25, shape.stalls
    assert 81 not in shape.stalls.steps and 82 not in shape.stalls.steps


def _pool_run(threads: int):
    """The loaded run of stability's oversubscribed loop, as a series: 30 steps whose own time
    (wall less the wait for a core) goes from 7 to 65 ms at step 14 while the loop thread's time
    on a core stays 7-10 ms (it waits, off a core, for pool threads waiting for a core); the
    other processes use 1.5 of the 2 cores."""
    own = [0.007] * 14 + [0.065] * 16
    wait = [0.011] * 14 + [0.055] * 16
    cpu = [0.007] * 14 + [0.0095] * 16
    run = _run([o + w for o, w in zip(own, wait, strict=True)], lambda t: 1.5, threads=threads)
    rows = tuple(
        dataclasses.replace(s, wait_s=wait[s.index], cpu_s=cpu[s.index]) for s in run.steps.steps
    )
    return dataclasses.replace(run, steps=dataclasses.replace(run.steps, steps=rows))


def test_own_time_off_a_core_that_grows_in_an_oversubscribed_pool_is_not_drift():
    ids = [f.rule_id for f in build_report(_pool_run(4)).findings]
    assert "run.drift" not in ids and "machine.oversubscribed" in ids
    # One thread: nothing of ours waits off a core but the code (a sleep, I/O): the code's.
    ids = [f.rule_id for f in build_report(_pool_run(1)).findings]
    assert "run.drift" in ids and "machine.oversubscribed" not in ids


def _read_quiet(durations):
    """``durations`` on a quiet machine whose loop thread's wait for a core was read (0%)."""
    run = _run(durations, lambda t: 0.0)
    samples = tuple(dataclasses.replace(s, run_wait_pct=0.0) for s in run.samples.samples)
    return dataclasses.replace(run, samples=dataclasses.replace(run.samples, samples=samples))


def test_a_slowdown_too_short_to_bound_does_not_outrank_the_cells_causes():
    # 30 steps: 6 ms, then 20 ms from step 13 on (a level shift as torch's two threads on two
    # cores switch modes: 0.6 -> 2 ms seen quiet and loaded). The first fifth (steps 2-7) is
    # mostly the profiled window (2-5 disturbed): too few steps to give the slowdown a range,
    # so it is said, low, with what would bound it. The sampler read the run twice (wait 0%).
    short = _read_quiet([0.006 if i < 13 else 0.02 for i in range(30)])
    shape = run_shape(short)
    assert shape is not None and shape.drift is not None and shape.drift > 3
    assert shape.drift_low is None
    drift = next(f for f in build_report(short).findings if f.rule_id == "run.drift")
    assert drift.severity == "low" and "too few undisturbed steps" in " ".join(drift.evidence)
    # The same shift over 300 steps has its range: the code's, high.
    long = _read_quiet([0.006 if i < 130 else 0.02 for i in range(300)])
    shape = run_shape(long)
    assert shape is not None and shape.drift_low is not None and shape.drift_low > 1
    drift = next(f for f in build_report(long).findings if f.rule_id == "run.drift")
    assert drift.severity == "high" and "too few" not in " ".join(drift.evidence)
