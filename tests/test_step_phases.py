"""Hook-timed phases (no trace): a closure optimizer's forward and backward are not counted twice."""

from __future__ import annotations

import pytest

from gpu_notebook.analysis.steps import hook_phases
from gpu_notebook.records import StepClockRecord, StepTiming


def _record(*steps: tuple[float, float, float, float, float]) -> StepClockRecord:
    rows = tuple(
        StepTiming(
            index=i,
            start_s=float(i),
            duration_s=d,
            data_s=a,
            forward_s=f,
            backward_s=b,
            optimizer_s=o,
        )
        for i, (d, a, f, b, o) in enumerate(steps)
    )
    return StepClockRecord(anchor="optimizer", step_count=len(rows), steps=rows)


def test_forward_and_backward_inside_the_optimizer_span_come_off_the_optimizer() -> None:
    # opt.step(closure): the optimizer hook spans 9 ms of which forward 4 and backward 4 ran
    # inside it; the update itself is 1 ms. Naively: 0.5 + 4 + 4 + 9 = 17.5 ms of a 10 ms step.
    result = hook_phases(_record((0.010, 0.0005, 0.004, 0.004, 0.009)), warmup_steps=0)
    assert result is not None
    step = result.steps[0]
    assert step.phase_us["optimizer"] == pytest.approx(1500.0)
    assert step.phase_us["forward"] == pytest.approx(4000.0)
    assert sum(step.phase_us.values()) == pytest.approx(step.duration_us)


@pytest.mark.parametrize(
    "step",
    [
        (0.010, 0.001, 0.003, 0.004, 0.001),  # a plain loop: untouched
        (0.010, 0.0, 0.006, 0.006, 0.0),  # hooks that saw a nested call twice
        (0.0, 0.0, 0.001, 0.0, 0.0),  # a zero-length step
        (0.010, 0.002, 0.004, 0.004, 0.009),
    ],
)
def test_hook_phases_never_sum_past_the_step(
    step: tuple[float, float, float, float, float],
) -> None:
    result = hook_phases(_record(step, step), warmup_steps=0)
    assert result is not None
    for s in result.steps:
        assert all(v >= 0 for v in s.phase_us.values())
        assert sum(s.phase_us.values()) <= s.duration_us + 1e-6
    assert sum(result.phase_total_us.values()) <= result.total_us + 1e-6
    if step[0] and sum(step[1:]) <= step[0]:
        assert result.steps[0].phase_us["forward"] == pytest.approx(step[2] * 1e6)
