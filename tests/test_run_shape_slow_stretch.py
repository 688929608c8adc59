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
