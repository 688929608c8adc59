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
from gpu_notebook.records import Run, StepTiming
from tests.scenarios import synthetic as syn

# The code's own split of a step (s): a data wait of 22%, over the 20% input line by 2 points.
DATA_S, FORWARD_S, BACKWARD_S, OPTIMIZER_S = 0.0022, 0.003, 0.003, 0.0018
STEPS = 14


def _run(wait_s: float, data_s: float = DATA_S, *, in_data: bool = False) -> Run:
    """``STEPS`` steps of the split above, each held ``wait_s`` by other programs: the time slices
    land in the forward of odd steps and the backward of even ones, or (``in_data``) in the data
    wait of each (a loader that computes waits for a core as the model does); the phase timers
    count them where they fell, the step clock reads the wait at the step's end."""
    rows = []
    start = 0.0
    model_wait = 0.0 if in_data else wait_s
    data_s += wait_s if in_data else 0.0
    for i in range(STEPS):
        forward = FORWARD_S + (model_wait if i % 2 else 0.0)
        backward = BACKWARD_S + (0.0 if i % 2 else model_wait)
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

    return word_verdict(syn.verdict(run, analyze(run)))


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
    assert syn.verdict(quiet, analyze(quiet)) == verdict


def test_a_heavy_wait_that_cannot_move_the_share_across_keeps_the_verdict_and_says_the_wait():
    # The data phase holds 89% of the wall time, the wait 59%: were all of that wait in the
    # data phase, it would still read 72% of the own time. The verdict stands; the wait is said
    # beside it.
    verdict = _verdict(_run(0.04, data_s=0.02, in_data=True))
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
    heavy = syn.verdict(run, _window_beside_the_run(0.93))
    assert heavy.category == "unknown" and heavy.core_wait is not None
    assert heavy.core_wait.low < 0.20 <= heavy.core_wait.high and heavy.core_wait.steps == 55
    # The same figures read from steps that mostly ran: judged, no wait said. The window's 17%
    # lies within what two runs differ by of the 20% line (the next run of this loop read
    # input-bound): it decides as the line, said as near it (analysis.verdict_near_line).
    light = syn.verdict(run, _window_beside_the_run(0.1))
    assert light.category == "input-bound" and light.core_wait is None
    assert light.confidence == "low" and any("across the 20% line" in e for e in light.evidence)


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
    data phase 62% of the wall time, its fifths ``low``-``high``; every step waited half its
    time (had all of it fallen in the data phase, the data wait would read 24%)."""
    from gpu_notebook.records import RunPhase

    window = dataclasses.replace(
        syn.phases({"data": 0.24}),
        waited_share=0.5,
        wall_phase_total_us={"data": 49_600.0, "forward": 30_400.0},
        wall_total_us=80_000.0,
    )
    whole = RunPhase(
        0.24, 55, 0.0015, 0.0062, 0.22, 0.26, wait_share=0.5, wall_share=0.62,
        fifths_low=low, fifths_high=high,
    )  # fmt: skip
    return dataclasses.replace(syn.make_analysis(phase_split=window), run_data=whole)


def test_a_run_whose_fifths_hold_the_line_is_too_busy_when_heavy():
    run = syn.make_run("")
    verdict = syn.verdict(run, _window_beside_a_run_with_fifths(0.15, 0.31))
    assert verdict.category == "unknown" and verdict.core_wait is not None
    assert verdict.core_wait.low == 0.15 and not verdict.core_wait.judged
    # Fifths that stay over the line: the verdict stands, the wait said beside it.
    kept = syn.verdict(run, _window_beside_a_run_with_fifths(0.21, 0.27))
    assert kept.category == "input-bound" and kept.core_wait is not None and kept.core_wait.judged


def _recorded(name: str):
    """A recorded run of the bundled input-bound example (``gpucheck run``, 2 cores, torch's 2
    threads; a 60 ms sleep a batch, 85% of its steps' own time) and its analysis, as the report
    carried them (stacks left out)."""
    import json
    from pathlib import Path

    from gpu_notebook.records import Analysis, from_jsonable

    path = Path(__file__).parent / "data" / "core_wait" / f"{name}.report.json"
    data = json.loads(path.read_text())
    return from_jsonable(Run, data["run"]), from_jsonable(Analysis, data["analysis"])


def test_the_bundled_example_reads_its_bound_quiet_and_no_other_bound_under_load():
    # Quiet (load 3 on 2 cores, 5% of the window's steps waiting): input-bound. Under two busy
    # loops and the other sessions' work, the window's steps waited 77% (load 16) and 93% (the
    # loops' session at weight -10, load 19) of their time; the wait was taken out of every
    # phase alike, the sleep's included, and the data wait read 22% (input-bound, 21%-22% as
    # spread) and 9% (host-bound). Where a time slice fell is not read: with the wait all
    # outside the data wait, it would read 91% and 100%. No bound is named; both are.
    from gpu_notebook.words.verdict import word_verdict

    run, analysis = _recorded("demo_quiet")
    assert syn.verdict(run, analysis).category == "input-bound"
    read = {}
    for name in ("demo_loaded_input", "demo_loaded_host"):
        run, analysis = _recorded(name)
        verdict = word_verdict(syn.verdict(run, analysis))
        wait = verdict.core_wait
        assert verdict.category == "unknown" and wait is not None and not wait.judged, verdict
        assert wait.wait_share >= 0.5 and wait.phase == "data" and wait.low < 0.2 <= wait.high
        assert {wait.found, wait.other} == {"input-bound", "host-bound"}, wait
        read[name] = wait.found
        # The words name the figure and both verdicts.
        assert f"As read they would give {wait.found}" in verdict.headline
        assert f"between it and {wait.other}" in verdict.headline
    assert read == {"demo_loaded_input": "input-bound", "demo_loaded_host": "host-bound"}


def test_a_split_that_kept_its_wall_time_beside_steps_that_mostly_waited_is_too_busy():
    # `gpucheck demo` at load 20 on 2 cores: the whole run's split from hook timings (no wait
    # taken out) read the data wait at 14% and host-bound, while the step clock read its 15
    # steps waiting 90% of their time for a core; nothing said the wait.
    from gpu_notebook.records import RunPhase

    split = syn.phases({"data": 0.14}, source="hooks")
    whole = RunPhase(0.14, 15, 0.074, 0.53, 0.12, 0.16, wait_share=0.9)
    analysis = dataclasses.replace(syn.make_analysis(phase_split=split), run_data=whole)
    verdict = syn.verdict(syn.make_run(""), analysis)
    wait = verdict.core_wait
    assert verdict.category == "unknown" and wait is not None and not wait.judged, verdict
    assert wait.wait_share == 0.9 and wait.low < 0.2 <= wait.high
    # The same split beside steps that mostly ran keeps its verdict.
    light = dataclasses.replace(analysis, run_data=dataclasses.replace(whole, wait_share=0.1))
    assert syn.verdict(syn.make_run(""), light).category not in ("unknown", "input-bound")


def test_a_cpu_run_whose_op_times_hold_other_threads_waits_names_no_compute_bound():
    # An in-memory MLP of 8-sample batches, torch's 2 threads on 2 cores, two busy loops
    # beside it (load 17-20), 94-95% of the steps waiting for a core, twice
    # (/work/unseen_keep/toobusy/in_memory_near_line.py): the heaviest matmul's call floor read
    # 17 us (ops too small: host-bound, overhead 61%) in one run and 33 ms (cpu-only,
    # overhead 2%) in the next. A parallel region ends when every thread's part is done: the
    # other thread's wait for a core stays in the loop thread's op time.
    from gpu_notebook.report.build import decided
    from gpu_notebook.rules import cell_facts
    from gpu_notebook.words.verdict import word_verdict

    run, analysis = _recorded("in_memory_mlp_loaded_cpu")
    facts = cell_facts(run.cell_source, None)
    verdict = word_verdict(decided(run, analysis, facts))
    wait = verdict.core_wait
    assert verdict.category == "unknown" and wait is not None and not wait.judged, verdict
    assert (wait.found, wait.other, wait.phase) == ("cpu-only", "host-bound", "ops")
    assert wait.wait_share >= 0.5 and wait.low < wait.line <= wait.high
    assert "between it and host-bound" in verdict.headline
    # The overhead read over its line stands: such waits only lower it.
    run_h, analysis_h = _recorded("in_memory_mlp_loaded_host")
    kept = decided(run_h, analysis_h, cell_facts(run_h.cell_source, None))
    assert kept.category == "host-bound"
    # One intra-op thread: no other thread's wait in the loop thread's ops; the verdict stands.
    one = dataclasses.replace(run, env=dataclasses.replace(run.env, torch_threads=1))
    assert decided(one, analysis, facts).category == "cpu-only"
