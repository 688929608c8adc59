"""Stragglers beyond the ranks' own spread; a saturated shared host is said, not blamed on a rank."""

from __future__ import annotations

import pytest

from gpu_notebook.records import RankFacts
from gpu_notebook.report.job import find_straggler, job_report
from gpu_notebook.views.job_text import render_job


def _rank(rank: int, comm_s: float, p10: float, p90: float, busy: float = 0.5) -> RankFacts:
    return RankFacts(
        rank=rank,
        world_size=2,
        local_rank=rank,
        host="box",
        status="ok",
        error=None,
        steps=40,
        step_s=0.030,
        comm_s=comm_s,
        phase_s={"forward": 0.02, "comm": comm_s},
        comm_p10_s=p10,
        comm_p90_s=p90,
        step_p10_s=0.025,
        step_p90_s=0.040,
        host_busy_share=busy,
    )


def test_two_equal_ranks_under_a_noisy_host_produce_no_straggler():
    # The median waits differ by 4 ms (over 10% of the 30 ms step), but each rank's own steps
    # spread from ~1 ms to ~12 ms of waiting: which rank waited less in the window is noise.
    ranks = [_rank(0, 0.008, 0.001, 0.012, busy=1.0), _rank(1, 0.004, 0.0005, 0.011, busy=1.0)]
    assert find_straggler(ranks) is None
    job = job_report(ranks, 2, source="run")
    assert job.straggler is None
    (host,) = job.saturated_hosts
    assert host.host == "box" and host.ranks == (0, 1) and host.busy_share == 1.0
    assert "share host box" in render_job(job) and "100% busy" in render_job(job)


def test_a_rank_that_never_waits_while_the_other_always_does_is_the_straggler():
    ranks = [_rank(0, 0.020, 0.018, 0.022), _rank(1, 0.0005, 0.0, 0.001)]
    found = find_straggler(ranks)
    assert found is not None and found.rank == 1 and found.reason == "waits-least"
    assert not job_report(ranks, 2, source="run").saturated_hosts  # a host at 50%: nothing to say


def test_summaries_without_a_spread_keep_the_level_rule():
    ranks = [_rank(0, 0.020, 0.0, 0.0), _rank(1, 0.0005, 0.0, 0.0)]
    ranks = [
        RankFacts(**{**r.__dict__, "comm_p10_s": None, "comm_p90_s": None})  # type: ignore[arg-type]
        for r in ranks
    ]
    found = find_straggler(ranks)
    assert found is not None and found.rank == 1


def test_a_rank_held_back_by_waiting_for_a_core_is_the_machine_not_a_straggler():
    # Rank 0's thread waited for a core 40% of its 30 ms step, rank 1's 5%: the 8 ms gap in
    # their waits is the machine's (rank 1 waits for rank 0 because rank 0 got fewer turns).
    import dataclasses

    ranks = [
        dataclasses.replace(_rank(0, 0.0005, 0.0, 0.001), run_wait_share=0.4),
        dataclasses.replace(_rank(1, 0.009, 0.008, 0.010), run_wait_share=0.05),
    ]
    assert find_straggler(ranks) is None
    ranks[0] = dataclasses.replace(ranks[0], run_wait_share=0.05)
    found = find_straggler(ranks)
    assert found is not None and found.rank == 0


def test_a_comm_gap_inside_the_ranks_step_spread_over_the_run_names_no_straggler():
    import dataclasses

    # No straggler planted, a busy host: over its 3 profiled steps rank 0 waited 1 ms, rank 1
    # 5 ms, each a tight range; over the whole run each rank's steps spread from 20 to 40 ms.
    # The 4 ms gap is inside what any rank's steps do anyway.
    ranks = [
        dataclasses.replace(_rank(0, 0.001, 0.0008, 0.0012), step_p10_s=0.020, step_p90_s=0.040),
        dataclasses.replace(_rank(1, 0.005, 0.0048, 0.0052), step_p10_s=0.021, step_p90_s=0.041),
    ]
    assert find_straggler(ranks) is None
    # The same gap when the ranks' steps keep within a millisecond: rank 0 is late every step.
    tight = [dataclasses.replace(r, step_p10_s=0.0295, step_p90_s=0.0305) for r in ranks]
    found = find_straggler(tight)
    assert found is not None and found.rank == 0 and found.reason == "waits-least"


def test_a_ranks_step_spread_is_read_from_every_step_its_clock_timed():
    import numpy as np

    from gpu_notebook.analysis.own_cost import disturbed_steps
    from gpu_notebook.report.build import build_report
    from gpu_notebook.report.job import rank_facts
    from tests.test_run_shape import make_run, record, step

    # Seeded step times from 5 to 45 ms: the profiled steps 2-4 are three of them.
    rng = np.random.default_rng(3)
    ms = [5.0 + 40.0 * float(x) for x in rng.random(60)]
    report = build_report(make_run(record([step(m) for m in ms])))
    facts = rank_facts(report, None)
    ours = disturbed_steps(report.run)
    clock = sorted(m / 1e3 for i, m in enumerate(ms) if i >= 2 and i not in ours)
    k10, k90 = round(0.1 * (len(clock) - 1)), round(0.9 * (len(clock) - 1))
    assert facts.step_p10_s == pytest.approx(clock[k10], rel=1e-3)
    assert facts.step_p90_s == pytest.approx(clock[k90], rel=1e-3)


def test_a_comm_gap_longer_than_the_runs_steps_is_the_windows_not_a_straggler():
    import dataclasses

    # Seen under load, no straggler planted: in the profiled window rank 0 waited 11.3 ms a
    # step and rank 1 2.1 ms, while every unprofiled step of both ranks took 1.8 ms.
    ranks = [
        dataclasses.replace(
            _rank(0, 0.0113, 0.0087, 0.0147),
            run_step_s=0.0018,
            step_p10_s=0.0018,
            step_p90_s=0.0023,
        ),
        dataclasses.replace(
            _rank(1, 0.0021, 0.0, 0.0037), run_step_s=0.0018, step_p10_s=0.0018, step_p90_s=0.0023
        ),
    ]
    assert find_straggler(ranks) is None
    # A delay paid every step makes every step of the run at least that long: named.
    slow_run = [dataclasses.replace(r, run_step_s=0.012) for r in ranks]
    found = find_straggler(slow_run)
    assert found is not None and found.rank == 1 and found.reason == "waits-least"


def test_profiled_step_medians_that_differ_in_lockstep_name_no_slowest_rank():
    import dataclasses

    # No comm gap; the profiled steps' medians 4.3 ms and 2.75 ms (the profiler, a busy
    # core), the run's steps 1.8 ms on both ranks with a 0.2 ms spread.
    ranks = [
        dataclasses.replace(
            _rank(r, 0.0028, 0.002, 0.0034),
            step_s=s,
            run_step_s=0.0018,
            step_p10_s=0.0016,
            step_p90_s=0.0018,
        )
        for r, s in ((0, 0.0043), (1, 0.00275))
    ]
    assert find_straggler(ranks) is None
    # Older summaries without the run's step: the profiled medians decide, as before.
    older = [dataclasses.replace(r, run_step_s=None) for r in ranks]
    found = find_straggler(older)
    assert found is not None and found.rank == 0 and found.reason == "slowest-step"


def test_the_table_s_step_times_are_each_rank_s_run_median_when_every_rank_has_one():
    # Unseen round 14 (benchmarks/unseen_programs/ddp_allreduce_log.py): rank 0's phases came
    # from its three profiled steps (26.35 ms, preempted), rank 1's from its hooks over the run
    # (3.68 ms); the table showed both and "spread 151%", while over the run the ranks' medians
    # were 3.53 ms and 3.39 ms (the straggler rule already reads those).
    window, run = _rank(0, 0.019, 0.001, 0.02), _rank(1, 0.0, 0.0, 0.001)
    ranks = [
        RankFacts(**{**window.__dict__, "step_s": 0.02635, "run_step_s": 0.00353}),  # type: ignore[arg-type]
        RankFacts(**{**run.__dict__, "step_s": 0.00368, "run_step_s": 0.00339}),  # type: ignore[arg-type]
    ]
    text = render_job(job_report(ranks, 2, source="run"))
    assert "26.35 ms" not in text and "3.53 ms" in text and "3.39 ms" in text, text
    assert "spread 4.0%" in text, text  # main: "spread 151.0%"
    # A rank without a run median (an older gpucheck): every row keeps its profiled steps.
    old = RankFacts(**{**ranks[1].__dict__, "run_step_s": None})  # type: ignore[arg-type]
    text = render_job(job_report([ranks[0], old], 2, source="run"))
    assert "26.35 ms" in text and "3.68 ms" in text, text
