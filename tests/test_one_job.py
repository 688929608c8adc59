"""`gpucheck analyze DIR` says when a folder of traces is not one job (report/one_job.py)."""

from __future__ import annotations

import shutil

from gpu_notebook.report.one_job import TraceFacts, not_one_job
from gpu_notebook.views.wording import doubt_sentence
from tests.test_cli import REFERENCE, _need_reference, gpucheck


def ranks(world: int, start_s: float = 1.7e9, host: str = "n0") -> list[TraceFacts]:
    return [TraceFacts(f"r{r}.json", r, world, host, start_s + 0.5 * r) for r in range(world)]


def test_the_ranks_of_one_job_raise_no_doubt():
    assert not_one_job(ranks(4)) == []
    assert not_one_job(ranks(2)[:1]) == []  # one trace is one job
    # Two nodes of one job: other hosts, same world, each rank once.
    two_nodes = ranks(4)[:2] + [TraceFacts(f"r{r}.json", r, 4, "n1", 1.7e9 + r) for r in (2, 3)]
    assert not_one_job(two_nodes) == []


def test_unrelated_traces_are_named_with_each_reason():
    mixed = ranks(2) + ranks(8, start_s=1.7e9 + 86400 * 3)
    reasons = [doubt_sentence(d) for d in not_one_job(mixed)]
    text = "; ".join(reasons)
    assert "world sizes differ: 2, 8" in text
    assert "rank 0 appears in 2 traces" in text and "(and 1 more rank(s))" in text
    assert "they started 3 days apart" in text
    # Single-process runs (no distributedInfo) side by side are separate runs, not ranks.
    single = [TraceFacts(f"run{i}.json", None, None, f"host{i}", None) for i in range(3)]
    assert [doubt_sentence(d) for d in not_one_job(single)] == [
        "none of the 3 traces is a rank of a distributed job (no distributedInfo with a world "
        "size above 1) on 3 hosts"
    ]


def test_analyze_warns_on_a_folder_of_unrelated_traces(tmp_path):
    _need_reference()
    for name in ("a100_world8_rank3.json.gz", "a100_world16_rank0.json.gz"):
        shutil.copy(REFERENCE / name, tmp_path / name)
    res = gpucheck("analyze", "-q", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "do not look like one job: world sizes differ: 8, 16" in res.stderr, res.stderr
    assert "days apart" in res.stderr
    assert "maybe not one job: world sizes differ" in res.stdout  # in the job report's notes too
