"""A run whose steps carry their wait for a core only in part: drift and stalls on own time.

The step clock reads a step's wait for a core at every step end only while steps are long
enough to pay for it (capture/session.py, ``WAIT_MIN_STEP_S``); shorter steps are read only
after a slow one (its wait since the last reading), and which mode holds is looked at again as
the run goes. A run then has steps with a wait and steps without one. Seeded series: a busy
stretch of other processes at the end of the run (each slow step's wait read) is the machine's,
not "the code slows down"; the code's own growth and its own periodic stall stay the code's.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.records import (
    Finding,
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
READ_LEVEL_S = 0.001  # capture/stepclock.py's _STALL_READ_NS: slower steps carry their wait


def _wobble(i: int) -> float:
    """A deterministic +-4% wobble (a healthy run is never perfectly flat)."""
    return 1.0 + 0.04 * (((i * 7919) % 17) / 8.0 - 1.0)


def _run(own_s: list[float], wait_s: list[float], readings: bool = True) -> Run:
    """Steps of ``own + wait`` seconds; a step carries its wait where it is at least the read
    level (a slow step, read after it), else none. ``readings``: the sampler's (every 0.25 s)
    read the thread's wait as the share of each interval it waited, the other processes as busy
    as that; without them (a short cell, a sampler starved on a loaded machine), none."""
    rows, t = [], 0.0
    for i, (own, wait) in enumerate(zip(own_s, wait_s, strict=True)):
        d = own + wait
        read = wait if d >= READ_LEVEL_S else None
        rows.append(
            StepTiming(i, t, d, 0.0, own * 0.5, own * 0.4, own * 0.1, 1, 1, 32, wait_s=read)
        )
        t += d
    samples, at = [], 0.25
    while readings and at <= t + 0.25:
        waited = sum(w for r, w in zip(rows, wait_s, strict=True) if at - 0.25 <= r.start_s < at)
        pct = min(100.0, 100.0 * waited / 0.25)
        samples.append(Sample(at, 100.0 - pct, 0.0, 100.0, children=0, run_wait_pct=pct))
        at += 0.25
    record = StepClockRecord("optimizer", len(rows), tuple(rows))
    run = syn.make_run("", cpu_count=CORES, steps=record)
    window = ProfileWindow("recorded", 2, 3, first_step=2, recorded_steps=3)
    return dataclasses.replace(
        run,
        env=dataclasses.replace(run.env, usable_cores=CORES),
        window=window,
        samples=SampleSeries(0.25, 0.25, tuple(samples)),
    )


def _report(run: Run) -> dict[str, Finding]:
    return {f.rule_id: f for f in build_report(run).findings}


N = 400
BUSY_FROM = N * 4 // 5  # the last fifth


def _busy_end(readings: bool = False) -> Run:
    """0.8 ms steps (too short to read at every end); from the last fifth on, other processes
    take the core: each step waits 8 ms for it, read after the step (it is slow)."""
    own = [0.0008 * _wobble(i) for i in range(N)]
    wait = [0.008 if i >= BUSY_FROM else 0.0 for i in range(N)]
    return _run(own, wait, readings)


def _growing(wait_every: int = 0) -> Run:
    """The code's own time grows from 0.8 ms to 8 ms a step over the run (a list it walks that
    grows); ``wait_every``: every so many steps also lose a 3 ms time slice (read)."""
    own = [0.0008 * _wobble(i) * (1 + 9 * i / N) for i in range(N)]
    wait = [0.003 if wait_every and i % wait_every == 1 else 0.0 for i in range(N)]
    return _run(own, wait, readings=False)


def test_a_busy_stretch_at_the_end_read_on_its_slow_steps_is_no_slowdown():
    # iter_gen_dict (unseen round 3) as a notebook cell at load 12: ~1 ms steps, the last two
    # tenths slow, "[high] Steps slow down over the run (up to 9.63x)". Without the sampler's
    # readings of the wait (a short cell), the steps' own waits alone say it was the machine.
    run = _busy_end()
    shape = run_shape(run)
    assert shape is not None and shape.drift is not None and shape.drift > 5  # on the wall
    assert shape.own is not None and shape.own.drift is not None and shape.own.drift < 1.2
    assert shape.own.every_step is False
    found = _report(run)
    assert "run.drift" not in found
    slowed = found["machine.slowed"]
    assert "read after every slow step" in " ".join(slowed.evidence)


def test_a_busy_stretch_with_the_samplers_readings_is_no_slowdown_either():
    assert "run.drift" not in _report(_busy_end(readings=True))


def test_the_codes_own_growth_is_a_slowdown_with_or_without_time_slices():
    for run in (_growing(), _growing(wait_every=5)):
        shape = run_shape(run)
        assert shape is not None and shape.own is not None and shape.own.drift is not None
        assert shape.own.drift > 4
        drift = _report(run)["run.drift"]
        assert drift.severity == "high"
        assert "the code's own time grew" in " ".join(drift.evidence)


def test_a_run_whose_unread_steps_are_slow_is_not_read_on_own_time():
    # A slow step without a wait was not left unread for being short (no schedstat for it):
    # nothing says what its wait was, so the run is not read on own time.
    run = _busy_end()
    rows = tuple(
        dataclasses.replace(s, wait_s=None) if s.index == N - 1 else s for s in run.steps.steps
    )
    run = dataclasses.replace(run, steps=dataclasses.replace(run.steps, steps=rows))
    shape = run_shape(run)
    assert shape is not None and shape.own is None


def test_a_checkpoint_among_short_steps_stays_the_codes_stall_in_a_busy_stretch():
    # 0.8 ms steps, a 40 ms write every 50 steps (its own time: no wait in it), and the last
    # fifth busy (every step waits 8 ms): the write's period stays, the busy steps are no stall.
    own = [0.040 if i % 50 == 7 else 0.0008 * _wobble(i) for i in range(N)]
    wait = [0.008 if i >= BUSY_FROM and i % 50 != 7 else 0.0 for i in range(N)]
    run = _run(own, wait, readings=False)
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    assert shape.own.stalls.period_steps == 50
    assert set(shape.own.stalls.steps) == {i for i in range(N) if i % 50 == 7}
    found = _report(run)
    assert "run.drift" not in found
    assert "Every 50 steps" in found["run.periodic_stall"].title
