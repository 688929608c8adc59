"""The job report on partial rank traces (report/job.py): a rank's comm wait is a range.

On a partial GPU timeline computation no clocked event shows may have overlapped the exposed
collectives, and collectives no clock places may have run exposed in an idle gap: the rank's
comm wait a step lies between ``comm_low_s`` and ``comm_s``, and the job's communication share,
straggler and roles are read at both ends. The rank is the recorded ResNet-50 DDP rank 0 (2
A100s, tests/test_whatif.py) with every second kernel unclocked, as
tests/test_recorded_no_gpu_clock.py synthesises it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpu_notebook.records import RankFacts
from gpu_notebook.report.from_trace import report_from_trace
from gpu_notebook.report.job import job_report, rank_facts
from gpu_notebook.views.job_text import render_job
from gpu_notebook.views.text import render_text
from tests.test_recorded_no_gpu_clock import _half_unclocked_copy
from tests.test_whatif import _world2


def test_a_partial_ranks_comm_wait_is_a_range_holding_the_measured_one(tmp_path: Path) -> None:
    """Complete, rank 0 waits 13.2 ms a step in exposed all-reduces. Half its kernels unclocked
    (all-reduces among them) the clocked ones read 10.8 ms, under the truth: the range holds it."""
    whole, _, _ = report_from_trace(_world2())
    measured = rank_facts(whole, None)
    assert measured.comm_s is not None and measured.comm_low_s is None
    half, _, _ = report_from_trace(_half_unclocked_copy(_world2(), tmp_path / "half.json.gz"))
    gpu = half.analysis.gpu
    assert gpu is not None and gpu.partial and gpu.unclocked_collectives > 0
    partial = rank_facts(half, None)
    assert partial.comm_s is not None and partial.comm_low_s is not None
    assert partial.comm_low_s <= measured.comm_s <= partial.comm_s


def _rank(rank: int, comm_s: float, comm_low_s: float | None = None) -> RankFacts:
    return RankFacts(rank=rank, world_size=3, local_rank=rank, host="n0", status="ok",
                     error=None, steps=20, step_s=0.020, comm_s=comm_s, comm_low_s=comm_low_s,
                     phase_s={"forward": 0.005, "backward": 0.005})  # fmt: skip


def test_a_straggler_named_at_one_end_of_partial_waits_only_is_not_named() -> None:
    """Ranks 0 and 1 wait 10 ms a step at most (partial timelines), 1 ms at least; rank 2 waits
    1 ms (measured). At their most rank 2 is the straggler, at their least nobody is: the job
    cannot tell, says so, and gives the communication share and the waits as ranges."""
    measured = job_report([_rank(0, 0.010), _rank(1, 0.010), _rank(2, 0.001)], 3, source="run")
    assert measured.straggler is not None and measured.straggler.rank == 2
    ranks = [_rank(0, 0.010, 0.001), _rank(1, 0.010, 0.001), _rank(2, 0.001)]
    job = job_report(ranks, 3, source="run")
    assert job.straggler is None and job.straggler_undecided == 2
    assert job.comm_share_low is not None and job.comm_share is not None
    assert job.comm_share_low < job.comm_share
    # Past the comm line only at its most: comm-bound at most, not comm-bound.
    assert job.roles["0"].startswith("comm-bound at most")
    text = render_job(job)
    assert "straggler: cannot tell" in text and "<=" in text and " to " in text


def test_a_straggler_named_at_both_ends_gives_the_wait_as_a_range() -> None:
    """The same ranks waiting at least 6 ms: rank 2 is the straggler at both ends."""
    ranks = [_rank(0, 0.010, 0.006), _rank(1, 0.010, 0.006), _rank(2, 0.001)]
    job = job_report(ranks, 3, source="run")
    s = job.straggler
    assert s is not None and s.rank == 2 and job.straggler_undecided is None
    assert s.wait_s == 0.010 and s.wait_low_s == 0.006
    assert dataclasses.replace(s, wait_low_s=None) != s
    assert "6.0 ms to 10.0 ms" in render_job(job)


def test_a_partial_ranks_collectives_are_said_as_the_clocked_ones_only(tmp_path: Path) -> None:
    """The rank's own report: its overlap and exposed share are the clocked kernels' only, in
    the verdict's evidence and the text's GPU rows; the complete trace's are said as measured."""
    whole, _, _ = report_from_trace(_world2())
    half, _, _ = report_from_trace(_half_unclocked_copy(_world2(), tmp_path / "half.json.gz"))
    said = "the clocked kernels only: the GPU timeline is partial"
    assert not any(said in e for e in whole.verdict.evidence) and said not in render_text(whole)
    assert any("overlapped by computation" in e and said in e for e in half.verdict.evidence)
    rows = [r for r in render_text(half).splitlines() if "collectives:" in r]
    assert rows and all(said in r for r in rows)
