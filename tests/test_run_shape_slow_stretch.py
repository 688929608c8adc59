"""A stretch of consecutive slow steps has no period: "every 1 steps" is no schedule.

Seen (issue 26, unseen round 5): a Trainer class reading CSV rows, 2 torch threads on a busy
2-core machine; its first 60 steps ran ~45 ms of their own time each, the rest 0.4 ms. The big
stalls' most common gap was 1 (they follow each other), and the report said "[high] Every 1
steps a step stalls" with "e.g. 9, 10, 11, 12, 13, 14". A period is a gap between stalls that
recur with calm steps between them; consecutive stalls are one slow stretch.
"""

from __future__ import annotations

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.report.build import build_report
from tests.scenarios import synthetic as syn
from tests.test_run_shape_partial_waits import _run, _wobble

N = 1500
SLOW = range(2, 62)


def _slow_start() -> object:
    own = [(0.045 if i in SLOW else 0.0004) * _wobble(i) for i in range(N)]
    wait = [0.05 if i in SLOW else 0.0 for i in range(N)]
    return _run(own, wait, readings=False)


def test_a_slow_stretch_of_consecutive_steps_is_not_a_period_of_one_step():
    run = _slow_start()
    shape = run_shape(run)
    assert shape is not None
    for stalls in (shape.stalls, shape.own.stalls if shape.own is not None else None):
        assert stalls is None or stalls.period_steps != 1
    for f in build_report(run).findings:
        assert not f.title.startswith("Every 1 steps")
        assert "every 1 steps" not in " ".join(f.evidence)


def test_stalls_every_few_steps_keep_their_period():
    # a checkpoint every 20 steps: a period of 20, as before
    own = [(0.03 if i % 20 == 7 else 0.0004) * _wobble(i) for i in range(N)]
    shape = run_shape(_run(own, [0.0] * N, readings=False))
    assert shape is not None and shape.own is not None and shape.own.stalls is not None
    assert shape.own.stalls.period_steps == 20


# REINFORCE on a numpy environment (unseen round 5, load 12-15 on 2 cores): one step an
# episode of 1-50 environment steps, so its own time varies with the episode's length. Recorded
# wall times and waits for a core (s) of its 40 steps.
RL_WALL_S = [4.24, 3.546, 8.337, 6.414, 1.156, 2.133, 2.329, 7.768, 8.616, 8.482, 1.834, 3.646,
             1.73, 2.042, 1.164, 1.422, 2.677, 0.533, 11.841, 7.762, 1.902, 2.696, 2.428, 3.136,
             2.952, 1.722, 2.303, 0.409, 3.822, 3.612, 9.427, 0.923, 0.979, 2.481, 2.819, 0.665,
             0.427, 2.03, 10.417, 2.463]  # fmt: skip
RL_WAIT_S = [0, 3.191, 7.495, 5.644, 0.997, 1.677, 2.028, 6.695, 7.476, 7.105, 1.608, 3.221,
             1.541, 1.72, 1.014, 1.259, 2.369, 0.465, 10.392, 6.757, 1.625, 2.345, 2.102, 2.746,
             2.606, 1.506, 1.995, 0.36, 3.38, 3.233, 8.34, 0.611, 0.481, 1.991, 2.169, 0.376,
             0.167, 1.596, 9.2, 2.096]  # fmt: skip


def test_three_stalls_on_a_schedule_of_four_slots_in_forty_steps_are_chance():
    # Its own-time stalls fell on steps 8, 9, 18, 30, 38 (and 2): 8, 18 and 38 keep a schedule
    # of 10 with 3 of its 4 slots, which some (period, phase) of the ~90 tried keeps by chance
    # among 6 stalls in 40 steps. It read "[low] Every 10 steps a step stalls (logging)", with
    # the cell's `if episode % 10 == 0: print(...)` as the cause.
    own = [w - t for w, t in zip(RL_WALL_S, RL_WAIT_S, strict=True)]
    shape = run_shape(_run(own, RL_WAIT_S, readings=False))
    assert shape is not None and shape.own is not None
    assert shape.own.stalls is None or shape.own.stalls.period_steps is None


# A conv net fed by two persistent workers at load 12-13 (unseen round 5): its 47 steps'
# recorded wall times and waits for a core (s). Slow, faster, slow again: the load, not a trend.
PF_WALL_S = [1.67, 1.38, 1.86, 1.21, 0.78, 1.48, 0.91, 1.54, 1.33, 0.74, 0.86, 1.03, 1.96, 0.95,
             1.56, 1.59, 1.81, 1.32, 1.3, 1.08, 1.2, 1.18, 1.25, 1.46, 1.09, 1.67, 1.51, 1.82,
             1.08, 0.46, 0.98, 0.76, 0.42, 1.13, 0.22, 0.5, 0.56, 0.66, 0.92, 1.0, 0.93, 1.42,
             1.46, 1.44, 1.52, 1.46, 1.48]  # fmt: skip
PF_WAIT_S = [0, 1.22, 1.62, 1.06, 0.64, 1.24, 0.82, 1.34, 1.17, 0.66, 0.79, 0.91, 1.76, 0.84,
             1.45, 1.4, 1.62, 1.18, 1.15, 0.92, 1.04, 1.03, 1.08, 1.29, 0.98, 1.49, 1.32, 1.63,
             0.94, 0.36, 0.87, 0.64, 0.33, 0.93, 0.17, 0.43, 0.45, 0.54, 0.76, 0.85, 0.79, 1.27,
             1.29, 1.27, 1.34, 1.3, 1.31]  # fmt: skip


def test_fifths_apart_with_a_falling_trend_are_no_slowdown():
    # It read "[low] Steps slow down over the run (up to 1.36x)" with "trend: -563888 us more
    # every 100 steps": the first and last fifths apart (1.7x), too few undisturbed steps to
    # give either reading a range, and the run's own trend falling. A slowdown is a trend
    # that rises; fifths apart over a flat or falling one are where the load happened to be.
    import dataclasses

    from gpu_notebook.rules.run_shape import drift

    own = [w - t for w, t in zip(PF_WALL_S, PF_WAIT_S, strict=True)]
    run = _run(own, PF_WAIT_S, readings=False)
    shape = run_shape(run)
    assert shape is not None and shape.own is not None and shape.drift is not None
    assert shape.drift > 1.5 and shape.slope_s_per_step is not None
    assert shape.slope_s_per_step < 0
    unranged = dataclasses.replace(
        shape, drift_low=None, own=dataclasses.replace(shape.own, drift_low=None)
    )
    analysis = dataclasses.replace(syn.make_analysis(), shape=unranged)
    assert drift(run, analysis, None) is None  # type: ignore[arg-type]


def test_stalls_without_a_period_are_not_given_to_a_block_with_a_literal_one():
    # REINFORCE again, rerun at load 5-8: its long episodes stalled with no period, and the
    # finding read "[high] Some steps stall (logging)", from the cell's one periodic block,
    # `if episode % 10 == 0: print(...)`. A block every 10 steps would have stalled every 10.
    from gpu_notebook.cell.scan import scan_source
    from gpu_notebook.rules.run_shape import matching_block

    cell = (
        "for episode in range(40):\n"
        "    loss = run_episode(policy)\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    if episode % 10 == 0:\n"
        "        print(episode, loss.item())\n"
    )
    run = _run([0.001] * 40, [0.0] * 40, readings=False)
    facts = scan_source(cell)
    assert matching_block(run, facts, None, own_time=True) is None
    assert matching_block(run, facts, 10, own_time=True) is not None
    # A block whose period is read at run time still takes period-less stalls; on wall times
    # (no wait for a core read) a busy machine may hide a checkpoint's period: any one block.
    runtime = scan_source(cell.replace("% 10", "% cfg.log_every"))
    assert matching_block(run, runtime, None, own_time=True) is not None
    assert matching_block(run, facts, None) is not None


def test_reinforce_s_own_time_stalls_are_not_its_logging():
    import dataclasses

    cell = (
        "for episode in range(40):\n"
        "    loss = run_episode(policy)\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "    if episode % 10 == 0:\n"
        "        print(episode, loss.item())\n"
    )
    own = [w - t for w, t in zip(RL_WALL_S, RL_WAIT_S, strict=True)]
    run = dataclasses.replace(_run(own, RL_WAIT_S, readings=False), cell_source=cell)
    for f in build_report(run).findings:
        if f.rule_id == "run.periodic_stall":
            assert "logging" not in f.title and f.line is None and f.severity == "low"
