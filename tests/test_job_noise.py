"""Stragglers beyond the ranks' own spread; a saturated shared host is said, not blamed on a rank."""

from __future__ import annotations

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
