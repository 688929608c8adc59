"""Issue 26: same code, same answer. A phase's share, and so a finding's presence and level, is
read off each step's own time: the step's wait for a core (the step clock's schedstat reading)
is taken off the phases it went to (``analysis.interference.own_phase_split``), not left on
whichever phase the time slice hit.

``benchmarks/stability.py`` at f24ae10, quiet against loaded: host_tiny_ops'
``input.in_memory_batches`` medium 4/4 quiet, low 2 and absent 2 loaded (the run's data wait
18.9-19.9% quiet; 8-58% loaded where a few sub-millisecond steps were held 4-13 ms); the
unfused-optimizer scenario's optimizer share read 0.18-0.74 in a window whose steps waited
68-100% for a core (low, not medium). Seeded step series (no timing): the same steps with
planted waits read the level the quiet steps read.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import numpy as np
import pytest

from gpu_notebook.analysis.analyze import analyze, with_run_figures
from gpu_notebook.analysis.interference import (
    own_phase_split,
    own_time_phases,
    wait_share,
    window_waits,
)
from gpu_notebook.analysis.steps import hook_phases
from gpu_notebook.records import Analysis, PhaseBreakdown, StepPhases, StepTiming
from gpu_notebook.rules.common import WARN, severity_in
from tests.scenarios import synthetic as syn

# One step's split, ms: data (19%, host_tiny_ops' quiet reading), forward, backward, optimizer
# (25%), the rest.
SPLIT_MS = (0.19, 0.28, 0.23, 0.25, 0.05)
PHASES = ("data", "forward", "backward", "optimizer", "other")


def _steps(seed: int, n: int, held: float) -> tuple[StepTiming, ...]:
    """``n`` 1 ms steps of ``SPLIT_MS`` (each phase +-5%, seeded). ``held``: the share of steps
    in which the thread waited ``held_ms`` 4-13 ms for a core inside one phase drawn at random
    (what a busy 2-core machine did to sub-millisecond steps), the step clock reading the wait.
    Every step carries its reading (0 where it did not wait)."""
    rng = random.Random(seed)
    out = []
    t = 0.0
    for i in range(n):
        parts = [ms / 1e3 * rng.uniform(0.95, 1.05) for ms in SPLIT_MS]
        wait = 0.0
        if rng.random() < held:
            wait = rng.uniform(4, 13) / 1e3
            parts[rng.randrange(len(parts))] += wait
        dur = sum(parts)
        out.append(StepTiming(i, t, dur, *parts[:4], batch_size=32, wait_s=wait))
        t += dur
    return tuple(out)


def _run_wide(seed: int, held: float) -> Analysis:
    """The run's figures (``run_data``, ``run_optimizer``) over 60 such steps."""
    steps = _steps(seed, 60, held)
    run = syn.make_run(steps=dataclasses.replace(syn.steps_record(60), steps=steps))
    return with_run_figures(run, syn.make_analysis())


def _optimizer_level(analysis: Analysis) -> str | None:
    """The unfused-optimizer rule's reading: present from 10%, medium where its interval
    clears 20% (rules/launch.unfused_optimizer)."""
    whole = analysis.run_optimizer
    assert whole is not None
    return _unfused(severity_in(analysis, "optimizer", whole.share, low=WARN, medium=0.20,
                                high=0.20))  # fmt: skip


def _unfused(level: str | None) -> str | None:
    """The rule's level from the interval's: "high" (clears 20%) is its medium, else low."""
    return None if level is None else "medium" if level == "high" else "low"


def _data_level(analysis: Analysis) -> str | None:
    """The in-memory-batches rule's reading: low from 5%, medium from 10%, high from 20%
    (rules/input_pipeline.in_memory_batches)."""
    whole = analysis.run_data
    assert whole is not None
    return severity_in(analysis, "data", whole.share)


def test_the_optimizer_level_over_the_run_does_not_move_with_held_steps():
    quiet = {_optimizer_level(_run_wide(seed, 0.0)) for seed in range(8)}
    assert quiet == {"medium"}
    # One step in five held 4-13 ms in a phase drawn at random: on wall times the share
    # moved with where the slices fell and its interval reached under 20% (low).
    loaded = [_optimizer_level(_run_wide(seed, 0.2)) for seed in range(8)]
    assert set(loaded) == {"medium"}, loaded


def test_the_data_level_over_the_run_does_not_move_with_held_steps():
    quiet = {_data_level(_run_wide(seed, 0.0)) for seed in range(8)}
    assert quiet == {"medium"}
    loaded = [_data_level(_run_wide(seed, 0.2)) for seed in range(8)]
    assert set(loaded) == {"medium"}, loaded


def _window_steps(seed: int, saturated: bool) -> tuple[StepTiming, ...]:
    """Ten steps (a 2-step warm-up, an 8-step window) of ``SPLIT_MS`` x 20 (20 ms steps). On a
    saturated machine every step waits 60-95% of its time, the wait spread over its phases in
    one to three time slices."""
    rng = random.Random(seed)
    out = []
    t = 0.0
    for i in range(10):
        parts = [ms * 20 / 1e3 * rng.uniform(0.95, 1.05) for ms in SPLIT_MS]
        wait = 0.0
        if saturated:
            own = sum(parts)
            wait = own * (1 / (1 - rng.uniform(0.6, 0.95)) - 1)
            # One to three time slices, each lost where the thread was: a phase drawn in
            # proportion to the time the code spends in it.
            sizes = [rng.random() for _ in range(rng.randint(1, 3))]
            for size in sizes:
                k = rng.choices(range(len(parts)), weights=SPLIT_MS)[0]
                parts[k] += wait * size / sum(sizes)
        dur = sum(parts)
        out.append(StepTiming(i, t, dur, *parts[:4], batch_size=32, wait_s=wait))
        t += dur
    return tuple(out)


def _window_level(seed: int, saturated: bool) -> str | None:
    steps = _window_steps(seed, saturated)
    run = syn.make_run(steps=dataclasses.replace(syn.steps_record(10), steps=steps))
    analysis = analyze(run)
    assert analysis.run_optimizer is None  # too few steps outside the window: the window reads
    assert analysis.phases is not None
    share = analysis.phases.share("optimizer")
    return _unfused(severity_in(analysis, "optimizer", share, low=WARN, medium=0.20, high=0.20))


def test_the_optimizer_level_of_a_window_of_waiting_steps_is_the_quiet_one():
    quiet = {_window_level(seed, saturated=False) for seed in range(8)}
    assert quiet == {"medium"}
    # Every step waited 60-95% for a core: on wall times the window's optimizer share read
    # wherever the slices fell, its interval reaching under 20%.
    loaded = [_window_level(seed, saturated=True) for seed in range(8)]
    assert set(loaded) == {"medium"}, loaded


def test_a_step_without_a_wait_is_left_as_it_was():
    parts = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    assert np.array_equal(own_phase_split(parts, np.zeros(2)), parts)


def test_the_wait_comes_off_what_each_phase_spent_beyond_its_least():
    # Step 1 held 10 in its last phase: the wait comes off that phase, the split stays 1:2:3.
    parts = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 13.0], [1.1, 2.1, 3.1]])
    own = own_phase_split(parts, np.array([0.0, 10.0, 0.0]))
    assert np.allclose(own[1], [1.0, 2.0, 3.0])
    assert np.allclose(own[[0, 2]], parts[[0, 2]])
    # A wait larger than all the excess (every phase slowed alike) comes off in proportion,
    # never below zero, and never more than the step.
    own = own_phase_split(np.array([[2.0, 4.0], [1.0, 2.0]]), np.array([4.5, 9.0]))
    assert np.allclose(own[0], [0.5, 1.0])
    assert np.allclose(own[1], [0.0, 0.0])


def _preempted_window(wait_us: float) -> PhaseBreakdown:
    """islice_loader's three profiled steps on a loaded machine: 2.2 ms of data, 0.8 ms of
    model and optimizer, and every step's ``wait_us`` for a core landed in its backward (20 ms
    steps, 16 ms of them waiting), taken out as own_time_phases takes it."""
    rows = []
    for i, jitter in zip((2, 3, 4), (0.0, 40.0, -30.0), strict=True):
        parts = {"data": 2200.0 + jitter, "forward": 300.0, "backward": 1000.0 + wait_us,
                 "optimizer": 500.0}  # fmt: skip
        rows.append(StepPhases(i, i * 20_000.0, sum(parts.values()), parts))
    totals = {k: sum(r.phase_us[k] for r in rows) for k in rows[0].phase_us}
    window = PhaseBreakdown("trace", tuple(rows), sum(r.duration_us for r in rows), totals,
                            ("data", "forward", "backward", "optimizer"))  # fmt: skip
    steps = [
        StepTiming(
            r.index,
            r.start_us / 1e6,
            r.duration_us / 1e6,
            0.0022,
            0.0003,
            0.001,
            0.0005,
            1,
            1,
            64,
            wait_s=wait_us / 1e6,
        )
        for r in rows
    ]
    return own_time_phases(window, steps)


def test_a_window_of_preempted_steps_does_not_overrule_the_runs_data_wait_from_below():
    # The same loop read input-bound (64% data) and host-bound (11%) at the same load, by where
    # the time slices of three profiled steps fell; its 139 steps, each less its wait, read 77%.
    from gpu_notebook.analysis.verdict import decide, run_data_overrules
    from gpu_notebook.records import RunPhase
    from tests.scenarios import synthetic as syn

    whole = RunPhase(0.77, 139, 0.00276, 0.0036, 0.74, 0.79)
    preempted = _preempted_window(16_000.0)
    assert preempted.waited_share > 0.7 and (preempted.share("data") or 0.0) < 0.2
    analysis = dataclasses.replace(syn.make_analysis(phase_split=preempted), run_data=whole)
    assert run_data_overrules(analysis, preempted.share("data")) is whole
    assert decide(syn.make_run(""), analysis).category == "input-bound"
    # A window that did not wait keeps its own reading below the run's (as before).
    quiet = _preempted_window(0.0)
    assert quiet.waited_share == 0.0
    calm = dataclasses.replace(syn.make_analysis(phase_split=quiet), run_data=whole)
    assert run_data_overrules(calm, quiet.share("data")) is None


def _shifted_window(seed: int) -> tuple[PhaseBreakdown, list[StepTiming]]:
    """A profiled window of three steps (indices 2-4) of ``SPLIT_MS`` (each phase +-5%), one of
    them (seeded) held 4-50 ms in a phase drawn at random; the step clock read that wait in the
    next step (the one before, for the last): the trace's step spans the clock's only nearly.
    The clock's steps carry the trace's walls otherwise."""
    rng = random.Random(seed)
    held, shift = rng.randrange(3), 1
    rows, waits = [], [0.0, 0.0, 0.0]
    for k in range(3):
        parts = {
            p: ms * 1e3 * rng.uniform(0.95, 1.05) for p, ms in zip(PHASES, SPLIT_MS, strict=True)
        }
        if k == held:
            wait = rng.uniform(4_000.0, 50_000.0)
            parts[rng.choice(PHASES)] += wait
            waits[held + shift if held < 2 else held - shift] = wait
        rows.append(StepPhases(k + 2, k * 60_000.0, sum(parts.values()), parts))
    totals = {p: sum(r.phase_us[p] for r in rows) for p in PHASES}
    window = PhaseBreakdown("trace", tuple(rows), sum(r.duration_us for r in rows), totals, PHASES)
    steps = [
        StepTiming(
            r.index,
            r.start_us / 1e6,
            r.duration_us / 1e6,
            0.0,
            0.0,
            0.0,
            0.0,
            batch_size=4,
            wait_s=w / 1e6,
        )
        for r, w in zip(rows, waits, strict=True)
    ]
    return window, steps


def test_a_wait_the_clock_reads_in_the_next_step_comes_off_the_step_that_held_it() -> None:
    """host_tiny_ops' loaded window (stability.py, 2026-12-05): the clock's 54 ms wait of step
    3 lay in the trace's step 2, which kept 11 ms of optimizer, while the trace's step 3 lost
    98% of itself; the data share read 1.6% (in-memory batches low) against 14-16%. The
    window's waits go where its time exceeds its floors: every seed reads the data share of
    the steps as they ran (19%) within a few points."""
    for seed in range(10):
        window, steps = _shifted_window(seed)
        own = own_time_phases(window, steps)
        assert own.share("data") == pytest.approx(0.19, abs=0.03), (seed, own.share("data"))
        assert own.waited_share > 0.5


# ---- The traced steps' waits read at the window's own step marks (ProfileWindow.step_waits_s)


def _edge_window(
    seed: int, held: int, clock_shift: int
) -> tuple[PhaseBreakdown, list[StepTiming], dict[int, float]]:
    """``_shifted_window``'s three traced steps (indices 2-4) with the trace's step ``held``
    (2-4) held 4-50 ms in a phase drawn at random; the step clock read that wait in its step
    ``held + clock_shift``, which may lie outside the window (step 1 or 5: the clock's step
    boundaries lie up to a time slice from the trace's marks). Returns the window, the clock's
    steps (1-5) and the waits the window read at its own marks (by step index)."""
    rng = random.Random(seed)
    rows, marks = [], {}
    for index in (2, 3, 4):
        parts = {
            p: ms * 1e3 * rng.uniform(0.95, 1.05) for p, ms in zip(PHASES, SPLIT_MS, strict=True)
        }
        marks[index] = 0.0
        if index == held:
            wait_us = rng.uniform(4_000.0, 50_000.0)
            parts[rng.choice(PHASES)] += wait_us
            marks[index] = wait_us / 1e6
        rows.append(StepPhases(index, index * 60_000.0, sum(parts.values()), parts))
    totals = {p: sum(r.phase_us[p] for r in rows) for p in PHASES}
    window = PhaseBreakdown("trace", tuple(rows), sum(r.duration_us for r in rows), totals, PHASES)
    walls = {r.index: r.duration_us / 1e6 for r in rows}
    steps = [
        StepTiming(i, i * 0.06, walls.get(i, 0.001), 0.0, 0.0, 0.0, 0.0, batch_size=4,
                   wait_s=marks[held] if i == held + clock_shift else 0.0)
        for i in range(1, 6)
    ]  # fmt: skip
    return window, steps, marks


@pytest.mark.parametrize(("held", "clock_shift"), [(4, 1), (2, -1), (2, 1), (3, -1)])
def test_a_traced_steps_own_time_is_its_wall_less_the_wait_read_at_its_marks(
    held: int, clock_shift: int
) -> None:
    """The step clock reads a wait at its own step ends, a step off the trace's near the
    window's edges: the last traced step's wait read in the clock's step after the window
    (held 4, read in 5) stayed in the window whole; the first's read in the clock's step
    before it (held 2, read in 1) too. The window's marks read each traced step's own wait:
    its own time is its wall time less that wait, and the data share the steps' as they ran."""
    for seed in range(10):
        window, steps, marks = _edge_window(seed, held, clock_shift)
        own = own_time_phases(window, steps, marks)
        assert [p.index for p in own.steps] == [2, 3, 4]
        for step, wall in zip(own.steps, window.steps, strict=True):
            assert step.duration_us == pytest.approx(wall.duration_us - marks[step.index] * 1e6)
        waited = sum(marks.values()) * 1e6 / window.total_us
        assert own.waited_share == pytest.approx(waited)
        assert own.share("data") == pytest.approx(0.19, abs=0.03), (seed, own.share("data"))


def test_a_window_whose_edge_wait_the_clock_read_outside_it_kept_that_wait_on_the_clock() -> None:
    """What the marks change: the last traced step's wait, read by the clock after the window,
    stays in the clock's own time of the window (the data share read low), and not in the
    marks'."""
    low = 0
    for seed in range(10):
        window, steps, marks = _edge_window(seed, held=4, clock_shift=1)
        clock = own_time_phases(window, steps)
        assert clock.waited_share == 0.0
        low += (clock.share("data") or 0.0) < 0.16
        assert own_time_phases(window, steps, marks).waited_share > 0.0
    assert low >= 5


def _clock_own_phases(window: PhaseBreakdown, steps: Sequence[StepTiming]) -> np.ndarray:
    """The step clock's path, recomputed: each traced step's wait the clock's share of the step
    of the same index, placed over the window (``window_waits``), off what each phase spent
    beyond its least (``own_phase_split``)."""
    names = sorted(PHASES)
    rows = np.array([[p.phase_us[k] for k in names] + [0.0] for p in window.steps])
    share = {s.index: wait_share(s) for s in steps}
    matched = np.array([share.get(p.index, 0.0) * p.duration_us for p in window.steps])
    clock_us = {s.index: (s.wait_s or 0.0) * 1e6 for s in steps}
    waits = window_waits(rows, [p.index for p in window.steps], matched, clock_us)
    return own_phase_split(rows, waits)


@pytest.mark.parametrize(
    "marks",
    [None, {2: 0.01, 3: 0.0}],  # no marks (an older record, no schedstat); some steps unread
)
def test_without_every_traced_step_read_at_its_marks_the_clocks_waits_serve_as_before(
    marks: dict[int, float] | None,
) -> None:
    for seed in range(6):
        window, steps, _ = _edge_window(seed, held=3, clock_shift=1)
        own = own_time_phases(window, steps, marks)
        expected = _clock_own_phases(window, steps)
        assert [p.duration_us for p in own.steps] == pytest.approx(list(expected.sum(axis=1)))
        assert own.waited_share == pytest.approx(1.0 - expected.sum() / window.total_us)


def test_the_hook_timed_split_reads_the_clocks_own_waits_whatever_the_marks() -> None:
    """The hooks' steps are the step clock's own: its readings are theirs exactly."""
    steps = _steps(3, 20, 0.3)
    split = hook_phases(dataclasses.replace(syn.steps_record(20), steps=steps), 0)
    assert split is not None and split.source == "hooks"
    hooks = own_time_phases(split, steps)
    assert hooks.waited_share > 0
    assert own_time_phases(split, steps, {s.index: 0.0005 for s in steps}) == hooks


def _slice_after_mark(spans_ms: Sequence[float]) -> PhaseBreakdown:
    """Traced steps 264-266 of ``spans_ms``, each its least split (``SPLIT_MS`` x 0.5) and the
    rest of its span in the backward (where a time slice hit it)."""
    rows = []
    t = 0.0
    for k, span in enumerate(spans_ms):
        parts = {p: ms * 0.5e3 for p, ms in zip(PHASES, SPLIT_MS, strict=True)}
        parts["backward"] += span * 1e3 - sum(parts.values())
        rows.append(StepPhases(264 + k, t, span * 1e3, parts))
        t += span * 1e3
    totals = {p: sum(r.phase_us[p] for r in rows) for p in PHASES}
    return PhaseBreakdown("trace", tuple(rows), t, totals, PHASES)


def test_a_slice_taken_between_a_mark_and_its_reading_is_the_next_steps() -> None:
    """A tiny-step loop under load (test_run_shape_cells' later window, 2 windows in 12): the
    window read 24 ms of wait in a 0.39 ms step and none in the 25 ms step after it: the slice
    fell after the mark, before its reading. A step cannot wait longer than it lasted: that
    reading is the next step's, and every step keeps its own time (none reads as only waiting
    and drops out of the split)."""
    from gpu_notebook.analysis.interference import marked_step_waits_s

    spans, reads = (1.06, 0.77, 25.23), (0.0, 24.09, 0.0)
    window = _slice_after_mark(spans)
    marks = {264 + k: ms / 1e3 for k, ms in enumerate(reads)}
    assert marked_step_waits_s(window, marks) == pytest.approx({264: 0.0, 265: 0.0, 266: 0.02409})
    own = own_time_phases(window, [], marks)
    assert [p.index for p in own.steps] == [264, 265, 266]
    assert [p.duration_us for p in own.steps] == pytest.approx([1060.0, 770.0, 1140.0])
    # The window's last step read longer than it lasted: the slice fell after the window.
    last = {264: 0.0, 265: 0.0, 266: 0.030}
    assert marked_step_waits_s(window, last) == pytest.approx({264: 0.0, 265: 0.0, 266: 0.0})


def test_a_step_whose_wait_exceeds_its_phases_excess_is_split_as_its_wall_time_holds_it():
    # Each phase's least over these steps held a time slice itself (the second phase in both):
    # main took every excess and then the rest in proportion to the leasts, [0.08, 0.92] of
    # every step whatever its wall time said.
    parts = np.array([[1.0, 31.0], [41.0, 11.0]])
    own = own_phase_split(parts, np.array([30.0, 50.0]))
    assert np.allclose(own[0], parts[0] * 2.0 / 32.0)
    assert np.allclose(own[1], parts[1] * 2.0 / 52.0)


# The unfused-optimizer scenario's profiled window (tests/scenarios/catalog.py), recorded by
# gpucheck at load 24.8 on 2 cores (two spinning loops and seven other sessions): per step
# (index, wall ms, the wait for a core read at the trace's marks in ms, forward, backward and
# optimizer ms). Each step ran ~8 ms of its own in two or three slices; the optimizer's least
# over the steps held one (51 ms). Quiet, the window reads the optimizer at 42% of the step.
_LOADED_WINDOW = (
    (2, 153.8307, 146.3639, 1.5792, 78.5210, 73.3568),
    (3, 118.7615, 110.0438, 8.4267, 45.8968, 64.2407),
    (4, 114.9601, 106.8543, 1.4773, 56.1150, 57.2098),
    (5, 125.4048, 117.7780, 24.9201, 2.4324, 97.9254),
    (6, 163.1404, 154.9069, 1.5169, 70.9608, 90.4895),
    (7, 89.7652, 81.7203, 4.2217, 2.7220, 82.6913),
    (8, 129.6780, 121.4070, 1.6755, 46.9950, 80.7600),
    (9, 105.7680, 97.7021, 1.6019, 52.5553, 51.4197),
)


def test_a_window_whose_every_step_waited_past_its_excess_reads_near_the_quiet_split():
    rows, marked, t = [], {}, 0.0
    for index, wall_ms, wait_ms, fwd, bwd, opt in _LOADED_WINDOW:
        split = {"forward": fwd * 1e3, "backward": bwd * 1e3, "optimizer": opt * 1e3}
        split["other"] = wall_ms * 1e3 - sum(split.values())
        rows.append(StepPhases(index, t, wall_ms * 1e3, split))
        marked[index] = wait_ms / 1e3
        t += wall_ms * 1e3
    totals = {k: sum(r.phase_us[k] for r in rows) for k in rows[0].phase_us}
    window = PhaseBreakdown("trace", tuple(rows), sum(r.duration_us for r in rows), totals,
                            ("data", "forward", "backward", "optimizer"))  # fmt: skip
    own = own_time_phases(window, (), marked)
    share = own.share("optimizer")
    wall = own.wall_share("optimizer")
    # main: 93% (the leasts' split: the optimizer's held a slice, the backward's did not); the
    # same scenario's run at load 20.5 read 2.7% there, the other way round, and lost its
    # finding. Read as the wall time holds the wait: between the quiet 42% and the wall's 60%.
    assert share is not None and wall is not None
    assert 0.37 <= share <= max(0.42, wall) + 0.05, share
    analysis = dataclasses.replace(syn.make_analysis(), phases=own)
    assert _unfused(severity_in(analysis, "optimizer", share, low=WARN, medium=0.20,
                                high=0.20)) == "medium"  # fmt: skip
