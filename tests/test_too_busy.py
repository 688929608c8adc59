"""Too busy to judge: a verdict read from steps that mostly waited for a core names no bound
where that wait moves the deciding share across its line (issue 26: an unseen CPU loop read
host-bound in one run and input-bound in the next at load 3-7x the cores).

The runs are the step clock's records, built by hand: every step spends the same time in each
phase (the code's split: 22% data wait), and each carries its thread's recorded wait for a core
(schedstat run_delay) landing in its forward or its backward. The whole pipeline from the
recorded steps runs (analysis.analyze, the verdict, its words); no clock is read.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.analyze import analyze
from gpu_notebook.analysis.verdict import decide
from gpu_notebook.records import Run, StepTiming
from tests.scenarios import synthetic as syn

# The code's own split of a step (s): a data wait of 22%, over the 20% input line by 2 points.
DATA_S, FORWARD_S, BACKWARD_S, OPTIMIZER_S = 0.0022, 0.003, 0.003, 0.0018
STEPS = 14


def _run(wait_s: float, data_s: float = DATA_S) -> Run:
    """``STEPS`` steps of the split above, each held ``wait_s`` by other programs: the time slices
    land in the forward of odd steps and the backward of even ones (the phase timers count them
    where they fell; the step clock reads the wait at the step's end)."""
    rows = []
    start = 0.0
    for i in range(STEPS):
        forward = FORWARD_S + (wait_s if i % 2 else 0.0)
        backward = BACKWARD_S + (0.0 if i % 2 else wait_s)
        duration = data_s + forward + backward + OPTIMIZER_S
        rows.append(
            StepTiming(
                index=i,
                start_s=start,
                duration_s=duration,
                data_s=data_s,
                forward_s=forward,
                backward_s=backward,
                optimizer_s=OPTIMIZER_S,
                forward_calls=1,
                backward_calls=1,
                batch_size=32,
                wait_s=wait_s,
            )
        )
        start += duration
    steps = dataclasses.replace(syn.steps_record(STEPS), steps=tuple(rows))
    run = syn.make_run("for x, y in loader:\n    step(x, y)\n", steps=steps)
    return dataclasses.replace(run, window=dataclasses.replace(run.window, trace_path=None))


def _verdict(run: Run):
    from gpu_notebook.words.verdict import word_verdict

    return word_verdict(decide(run, analyze(run)))


def test_a_heavy_wait_that_moves_the_data_share_across_its_line_names_no_bound():
    # Each step waited 15 ms of its 25 ms (60%): the split less the wait reads the code's 22%,
    # the same wait spread over the phases 9%; the 20% line lies between.
    verdict = _verdict(_run(0.015))
    assert verdict.category == "unknown", verdict
    assert verdict.confidence == "low"
    wait = verdict.core_wait
    assert wait is not None and not wait.judged
    assert abs(wait.wait_share - 0.6) < 0.01
    assert wait.phase == "data" and wait.found == "input-bound"
    assert wait.low < 0.20 <= wait.high
    assert abs(wait.share - 0.22) < 0.01  # the split as read is still the code's
    # The words say what was measured, and what to do.
    assert verdict.headline.startswith("Too busy to judge")
    assert "waited 60% of their time for a core" in verdict.headline
    assert any("other programs held the CPU" in line for line in verdict.evidence)
    assert "quieter machine" in verdict.more_gpus


def test_a_light_wait_keeps_the_verdict_the_shares_give():
    # 0.5 ms of a 10.5 ms step (5%): spread or taken where it fell, the data wait stays over
    # its line; no word on the machine.
    verdict = _verdict(_run(0.0005))
    assert verdict.category == "input-bound", verdict
    assert verdict.core_wait is None
    assert not any("for a core" in line for line in verdict.evidence)


def test_no_wait_read_is_the_quiet_verdict():
    quiet = _run(0.0)
    verdict = _verdict(quiet)
    assert verdict.category == "input-bound"
    assert verdict.core_wait is None
    # The words change nothing of a verdict without a wait.
    assert decide(quiet, analyze(quiet)) == verdict


def test_a_heavy_wait_that_cannot_move_the_share_across_keeps_the_verdict_and_says_the_wait():
    # The data wait is most of the step (72% of the own time): wherever 59% of the wall time
    # went, it stays over its line. The verdict stands; the wait is said beside it.
    verdict = _verdict(_run(0.04, data_s=0.02))
    assert verdict.category == "input-bound", verdict
    wait = verdict.core_wait
    assert wait is not None and wait.judged and wait.low >= 0.20
    assert any(
        "waited 59% of their time for a core" in line and "over its 20% line" in line
        for line in verdict.evidence
    )
    # Worded once: a report read back and worded again keeps one line.
    from gpu_notebook.words.verdict import word_verdict

    assert word_verdict(verdict) == verdict


def _window_beside_the_run(wait: float):
    """A profiled window of 8 steps whose data wait reads 17% less its wait, clear of the 20%
    line (10% with the wait spread), beside the run's 55 steps reading 21% (16%-26%); the
    window's and the run's steps waited ``wait`` of their time (stability.py's augment line
    loop at load 24 on 2 cores read these figures, and host-bound, where the next run read
    input-bound)."""
    from gpu_notebook.records import RunPhase

    window = dataclasses.replace(
        syn.phases({"data": 0.17}),
        waited_share=wait,
        wall_phase_total_us={"data": 8_000.0, "forward": 72_000.0},
        wall_total_us=80_000.0,
    )
    whole = RunPhase(0.21, 55, 0.0013, 0.0062, 0.16, 0.26, wait_share=wait, wall_share=0.18)
    return dataclasses.replace(syn.make_analysis(phase_split=window), run_data=whole)


def test_a_window_clear_of_the_line_beside_a_run_whose_range_holds_it_is_too_busy_when_heavy():
    run = syn.make_run("")
    heavy = decide(run, _window_beside_the_run(0.93))
    assert heavy.category == "unknown" and heavy.core_wait is not None
    assert heavy.core_wait.low < 0.20 <= heavy.core_wait.high and heavy.core_wait.steps == 55
    # The same figures read from steps that mostly ran: the window's verdict stands.
    light = decide(run, _window_beside_the_run(0.1))
    assert light.category not in ("unknown", "input-bound") and light.core_wait is None


def test_the_runs_data_share_is_read_over_each_fifth_of_its_steps():
    # 40 steps of 10 ms: the first 20 wait 3 ms for data, the last 20 1.5 ms (a load that
    # came and went moves a share so, stretch by stretch).
    from gpu_notebook.analysis.steps import run_phase

    run = _run(0.0)
    rows = tuple(
        dataclasses.replace(s, index=i, start_s=i * 0.01, duration_s=0.01, data_s=d, wait_s=0.0)
        for i, d in enumerate([0.003] * 20 + [0.0015] * 20)
        for s in run.steps.steps[:1]
    )
    whole = run_phase(dataclasses.replace(run.steps, steps=rows, step_count=40), 0, "data")
    assert whole is not None
    assert abs(whole.fifths_high - 0.30) < 1e-6 and abs(whole.fifths_low - 0.15) < 1e-6
    assert whole.wait_share == 0.0 and abs(whole.wall_share - whole.share) < 1e-9


def _window_beside_a_run_with_fifths(low: float, high: float):
    """A window reading 24% data wait beside a run of 55 steps reading 24% (22%-26%), the wait
    spread 22%, its fifths ``low``-``high``; every step waited 90% of its time."""
    from gpu_notebook.records import RunPhase

    window = dataclasses.replace(
        syn.phases({"data": 0.24}),
        waited_share=0.9,
        wall_phase_total_us={"data": 17_600.0, "forward": 62_400.0},
        wall_total_us=80_000.0,
    )
    whole = RunPhase(
        0.24, 55, 0.0015, 0.0062, 0.22, 0.26, wait_share=0.9, wall_share=0.22,
        fifths_low=low, fifths_high=high,
    )  # fmt: skip
    return dataclasses.replace(syn.make_analysis(phase_split=window), run_data=whole)


def test_a_run_whose_fifths_hold_the_line_is_too_busy_when_heavy():
    run = syn.make_run("")
    verdict = decide(run, _window_beside_a_run_with_fifths(0.15, 0.31))
    assert verdict.category == "unknown" and verdict.core_wait is not None
    assert verdict.core_wait.low == 0.15 and not verdict.core_wait.judged
    # Fifths that stay over the line: the verdict stands, the wait said beside it.
    kept = decide(run, _window_beside_a_run_with_fifths(0.21, 0.27))
    assert kept.category == "input-bound" and kept.core_wait is not None and kept.core_wait.judged
