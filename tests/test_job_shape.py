"""The run's shape in the job report: each rank's drift, stalls and memory creep over the whole
run, and a job line when one rank differs from the others or when every rank shares a pattern.

The ranks' reports are built from synthetic step records with planted shapes (the scenarios of
tests/test_run_shape.py); the job report is read from their real summaries, never from timing.
"""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from gpu_notebook.records import (
    JobReport,
    RankFacts,
    RankInfo,
    RankShape,
    Report,
    StepMemory,
    from_jsonable,
    to_jsonable,
)
from gpu_notebook.report.build import build_report
from gpu_notebook.report.job import job_report, rank_facts
from gpu_notebook.views.job_text import render_job
from tests.test_run_shape import CHECKPOINT_CELL, KEEPS_LOSSES, _wobble, make_run, record, step

MIB = 2**20
SHAPE_LINES = ("slow down over the run", "stalls every", "stall at", "memory grows")


def steady() -> Report:
    return build_report(make_run(record([step(10 * _wobble(i)) for i in range(400)])))


def drifting() -> Report:
    """10 ms steps, then the cell's own work grows from step 100: 18 ms a step by the end."""
    grow = [8.0 * max(0, i - 100) / 300 for i in range(400)]
    return build_report(make_run(record([step(10 * _wobble(i) + g, other=g) for i, g in enumerate(grow)])))  # fmt: skip


def stalling(phase: str = "other") -> Report:
    """Every 50th step takes 190 ms more, in ``phase``: a checkpoint (other) or a wait (backward)."""
    parts = [
        step(10 * _wobble(i) + 190.0, **{phase: 190.0}) if i % 50 == 0 else step(10 * _wobble(i))
        for i in range(500)
    ]
    return build_report(make_run(record(parts), CHECKPOINT_CELL))


def creeping() -> Report:
    """RSS grows 300 KiB a step: losses kept with their graphs."""
    parts = [step(10 * _wobble(i)) for i in range(400)]
    memory = tuple(StepMemory(i, 400 * MIB + i * 300 * 1024) for i in range(0, 400, 4))
    return build_report(make_run(record(parts, memory), KEEPS_LOSSES))


def job(*reports: Report) -> JobReport:
    world = len(reports)
    facts = [
        rank_facts(r, RankInfo(rank=i, world_size=world, local_rank=i, host="node0"))
        for i, r in enumerate(reports)
    ]
    return job_report(facts, world, source="run")


def over_the_run(text: str) -> list[str]:
    return text.split("Over the run")[1].splitlines()[1:]


def test_rank_facts_carry_the_run_shape_of_the_ranks_report():
    report = stalling()
    shape = report.analysis.shape
    assert shape is not None and shape.stalls is not None
    facts = rank_facts(report, RankInfo(rank=1, world_size=2))
    s = facts.shape
    assert s is not None
    # Steps 50, 100 ... 450: step 0 is in the warm-up.
    assert (s.stalls, s.stall_period_steps, s.stall_phase) == (9, 50, "other")
    assert s.stall_share == pytest.approx(shape.stalls.share, rel=1e-3)
    assert s.first_s == pytest.approx(shape.first_median_s, rel=1e-3)
    assert s.last_s == pytest.approx(shape.last_median_s, rel=1e-3)
    assert s.jitter == pytest.approx(shape.jitter, rel=1e-3)
    assert s.represents is True and s.rss_bytes_per_step is None and s.gpu_bytes_per_step is None


def test_memory_is_carried_only_where_it_creeps_by_the_single_rank_rules_level():
    creep = rank_facts(creeping(), None).shape
    assert creep is not None and creep.rss_bytes_per_step is not None
    assert creep.rss_bytes_per_step == pytest.approx(300 * 1024, rel=0.01)
    assert creep.gpu_bytes_per_step is None
    flat = rank_facts(steady(), None).shape
    assert flat is not None and flat.rss_bytes_per_step is None and flat.stalls == 0


def test_a_run_too_short_for_a_shape_sends_none_and_the_report_says_not_measured():
    short = build_report(make_run(record([step(10.0) for _ in range(12)])))
    assert rank_facts(short, None).shape is None
    text = render_job(job(steady(), short))
    assert "rank 1: not measured (a run's shape needs 20 steps after the warm-up)" in text
    assert not any(line in text for line in SHAPE_LINES)


def test_a_summary_with_a_shape_stays_well_under_a_kilobyte():
    report = stalling()
    info = RankInfo(rank=999, world_size=1000, local_rank=7, host="node124.cluster.example")
    facts = rank_facts(report, info, ("out/r999.json", "out/trace.rank999.json.gz"))
    assert facts.shape is not None
    size = len(msgspec.json.encode(to_jsonable(facts)))
    without = len(msgspec.json.encode(to_jsonable(dataclasses.replace(facts, shape=None))))
    assert size - without < 256 and size < 1024


def test_one_rank_that_drifts_while_the_others_keep_their_pace():
    text = render_job(job(steady(), drifting(), steady()))
    rows = over_the_run(text)
    assert rows[0].startswith("  rank 0:") and rows[0].endswith(": steady")
    # The last fifth's median step is that of step ~360: 10 + 8 * 260 / 300 ms.
    assert rows[1].startswith("  rank 1: 10.0 ms -> 16.9 ms a step") and "slows 1.7x" in rows[1]
    line = next(r for r in rows if "slow down over the run" in r)
    assert line.startswith("  rank 1's steps slow down over the run: 10.0 ms -> 16.9 ms a step;")
    assert "the other ranks' do not" in line and "In lockstep the whole job slows with it" in line


def test_every_rank_that_stalls_every_50_steps_points_at_work_all_ranks_do():
    text = render_job(job(stalling(), stalling(), stalling()))
    rows = over_the_run(text)
    assert all("stalls every 50 steps (" in rows[i] for i in range(3))
    line = next(r for r in rows if r.startswith("  every rank stalls"))
    assert "every rank stalls every 50 steps (" in line
    assert "look at what runs every 50 steps, e.g. validation or checkpoints on all ranks" in line


def test_a_stall_one_rank_starts_and_the_others_wait_through_in_backward():
    # Rank 0 saves a checkpoint (its own work, "other"); ranks 1 and 2 wait for it in backward.
    j = job(stalling("other"), stalling("backward"), stalling("backward"))
    stall = next(p for p in j.shapes if p.kind == "stall")
    assert stall.ranks == (0, 1, 2) and stall.period_steps == 50 and stall.origin == (0,)
    text = render_job(j)
    assert "every rank stalls every 50 steps" in text and "it starts on rank 0" in text
    assert "on rank 0 only" in text


def test_memory_creep_on_one_rank_only():
    text = render_job(job(steady(), steady(), creeping()))
    rows = over_the_run(text)
    assert "RSS +29.3 MiB/100 steps" in rows[2]
    line = next(r for r in rows if "memory grows" in r)
    assert line.startswith(
        "  rank 2's memory grows step after step (RSS +29.3 MiB every 100 steps)"
    )
    assert "the other ranks' does not" in line and "what only rank 2 keeps" in line


def test_a_steady_job_gets_no_shape_line():
    j = job(steady(), steady(), steady())
    assert j.shapes == ()
    rows = over_the_run(render_job(j))
    assert len(rows) == 3 and all(r.endswith(": steady") for r in rows)
    assert not any(line in "\n".join(rows) for line in SHAPE_LINES)


def test_the_job_line_uses_the_single_rank_levels():
    # 1.4x is under the drift finding's 1.5x; a 1% stall share is under its 2%.
    base = RankShape(first_s=0.010, last_s=0.010, jitter=1.1)
    under = [
        base,
        dataclasses.replace(base, last_s=0.014),
        dataclasses.replace(base, stalls=4, stall_period_steps=50, stall_share=0.01),
    ]
    facts = [
        RankFacts(rank=i, world_size=3, local_rank=i, host="h", status="ok", error=None,
                  steps=400, step_s=0.01, comm_s=None, shape=s)
        for i, s in enumerate(under)
    ]  # fmt: skip
    j = job_report(facts, 3, source="run")
    assert j.shapes == ()
    assert not any(line in render_job(j) for line in SHAPE_LINES)


def test_a_job_report_with_shapes_round_trips_and_an_older_summary_still_decodes():
    j = job(steady(), drifting(), creeping())
    assert {p.kind for p in j.shapes} == {"drift", "memory"}
    assert from_jsonable(JobReport, to_jsonable(j)) == j
    old = to_jsonable(j.ranks[0])
    del old["shape"]  # a rank running a gpucheck from before the shape
    facts = msgspec.json.decode(msgspec.json.encode(old), type=RankFacts, strict=False)
    assert facts.shape is None and facts.rank == 0
