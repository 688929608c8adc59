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
