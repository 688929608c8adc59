"""Multi-process jobs under real torchrun, gloo on the CPU: rank-aware files, the job report on
rank 0, the straggler named from the ranks' waits, crashes that keep torchrun's own report."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.records import Report

TORCHRUN = Path(sys.executable).parent / "torchrun"
TIMEOUT_S = 240  # every subprocess is bounded: a hang fails the test instead of the suite

# A DDP job of STEPS steps: rank SLOW_RANK sleeps (MODE=sleep, 150 ms a step) or loads slowly
# (MODE=data, 160 ms a batch), against steps of ~1 ms: >10x the tens of ms a loaded 2-core machine
# (3 ranks and other jobs) can take any rank off its core. CRASH_AT makes rank 1 raise at that step. 32*256 + 256 + 256 + 1 fp32 parameters.
TRAIN = textwrap.dedent(
    """
    import os, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset

    MODE = os.environ.get("MODE", "")
    SLOW = int(os.environ.get("SLOW_RANK", "1"))
    CRASH_AT = int(os.environ.get("CRASH_AT", "-1"))
    STEPS = int(os.environ.get("STEPS", "12"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    class Data(Dataset):
        def __len__(self):
            return 8 * STEPS
        def __getitem__(self, i):
            if MODE == "data" and rank == SLOW:
                time.sleep(0.02)
            return torch.randn(32), torch.randn(1)

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(DataLoader(Data(), batch_size=8)):
        if step == CRASH_AT and rank == 1:
            raise RuntimeError(f"boom at step {step}")
        if MODE == "sleep" and rank == SLOW:
            time.sleep(0.15)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} done")
    dist.destroy_process_group()
    """
)
GRAD_BYTES = (32 * 256 + 256 + 256 + 1) * 4


def torchrun(
    tmp: Path, nproc: int, *gpucheck_args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = tmp / "train.py"
    script.write_text(TRAIN)
    return subprocess.run(
        [
            str(TORCHRUN),
            "--nproc_per_node",
            str(nproc),
            "-m",
            "gpu_notebook",
            "run",
            *gpucheck_args,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=tmp,
        env={
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "GPUCHECK_GATHER_TIMEOUT_S": "60",
            **(env or {}),
        },
    )


def gpucheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_notebook", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def sleep_job(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("sleep")
    (tmp / "out").mkdir()
    # 32 steps: long enough for each rank's run shape (20 steps after the warm-up).
    res = torchrun(
        tmp,
        3,
        "--json",
        "out/r{rank}.json",
        "--trace",
        "out/trace.json.gz",
        env={"MODE": "sleep", "STEPS": "32"},
    )
    return tmp, res


def test_sleep_straggler_is_named_with_its_cause_and_the_others_wait_for_it(sleep_job):
    tmp, res = sleep_job
    assert res.returncode == 0, res.stderr[-3000:]
    job = json.loads((tmp / "out" / "rjob.json").read_text())
    assert job["world_size"] == 3 and job["missing"] == [] and job["source"] == "run"
    straggler = job["straggler"]
    assert straggler["rank"] == 1 and straggler["reason"] == "waits-least"
    assert straggler["waiting_ranks"] == [0, 2]
    # The sleep sits before the forward call, outside any op: the trace leaves it unattributed
    # (the forward starts at the step's first grad-mode op); the line says sleep.
    assert straggler["phase"] == "unattributed" and "time.sleep" in straggler["hot_line"]
    assert job["roles"]["0"] == job["roles"]["2"] == "waits for rank 1 in collectives"
    assert "straggler: rank 1: unattributed" in res.stderr
    # The waiting ranks' own reports say they wait, not that they compute.
    for rank in (0, 2):
        report = Report.from_json((tmp / "out" / f"r{rank}.json").read_text())
        assert report.verdict.category == "comm-bound", report.verdict
        assert "waits for its peers" in report.verdict.headline


def test_files_per_rank_and_every_report_says_which_rank(sleep_job):
    tmp, res = sleep_job
    assert res.returncode == 0, res.stderr[-3000:]
    for rank in range(3):
        report = Report.from_json((tmp / "out" / f"r{rank}.json").read_text())
        info = report.run.rank
        assert info is not None and (info.rank, info.world_size, info.local_rank) == (rank, 3, rank)
        assert info.host
        # No {rank} in --trace: per-rank names by default, never one rank's file over another's.
        with gzip.open(tmp / "out" / f"trace.rank{rank}.json.gz") as f:
            assert json.load(f)["distributedInfo"]["rank"] == rank
    assert not (tmp / "out" / "trace.json.gz").exists()


def test_rank_0_alone_prints_the_job_report(sleep_job):
    _, res = sleep_job
    assert res.stderr.count("gpucheck job report: 3 rank(s)") == 1
    assert "Across 3 ranks" in res.stderr
    for rank in (1, 2):
        assert f"gpucheck rank {rank}/3:" in res.stderr  # one line each, not a whole report
    # Three processes share one stdout pipe: their lines may interleave, each appears once.
    assert [res.stdout.count(f"rank {rank} done") for rank in range(3)] == [1, 1, 1]


def test_the_job_report_shows_every_ranks_run_over_time(sleep_job):
    tmp, res = sleep_job
    header = "Over the run (every step, from each rank's step clock"
    assert res.stderr.count(header) == 1  # rank 0's own report has its own "Over the run"
    section = res.stderr.split(header)[1]
    for rank in range(3):
        assert f"\n  rank {rank}: " in section and "not measured" not in section
    # What the shape holds depends on the machine (a busy one stalls now and then); that every
    # rank's summary carries one from its step clock does not.
    job = json.loads((tmp / "out" / "rjob.json").read_text())
    for r in job["ranks"]:
        assert r["shape"] is not None and r["shape"]["first_s"] > 0, r


def test_the_what_if_is_the_jobs_world_size_and_gradient_bytes_from_run_and_analyze(sleep_job):
    tmp, _ = sleep_job
    run_job = json.loads((tmp / "out" / "rjob.json").read_text())
    assert run_job["whatif"]["world_size"] == 3
    assert {r["grad_bytes"] for r in run_job["ranks"]} == {GRAD_BYTES}
    res = gpucheck("analyze", "-q", str(tmp / "out"), "--job-json", str(tmp / "from_traces.json"))
    assert res.returncode == 0, res.stderr
    traced = json.loads((tmp / "from_traces.json").read_text())
    assert traced["whatif"]["world_size"] == 3
    assert traced["whatif"]["grad_bytes"] == run_job["whatif"]["grad_bytes"] == GRAD_BYTES


def test_analyze_dir_reads_traces_only_with_the_reports_beside_them_as_companions(sleep_job):
    tmp, _ = sleep_job
    res = gpucheck("analyze", str(tmp / "out"), "--job-json", str(tmp / "analyzed.json"))
    assert res.returncode == 0, res.stderr
    assert "Across 3 ranks" in res.stdout and "UNKNOWN" not in res.stdout
    assert res.stdout.count("=== rank ") == 3
    job = json.loads((tmp / "analyzed.json").read_text())
    assert job["source"] == "traces" and [r["rank"] for r in job["ranks"]] == [0, 1, 2]
    assert job["straggler"]["rank"] == 1 and job["straggler"]["waiting_ranks"] == [0, 2]
    assert all(r["host"] for r in job["ranks"])  # from the companion reports


def test_slow_data_straggler_on_three_ranks_is_named_with_data_as_cause(tmp_path):
    (tmp_path / "out").mkdir()
    res = torchrun(
        tmp_path, 3, "--json", "out/r{rank}.json", env={"MODE": "data", "SLOW_RANK": "2"}
    )
    assert res.returncode == 0, res.stderr[-3000:]
    job = json.loads((tmp_path / "out" / "rjob.json").read_text())
    straggler = job["straggler"]
    assert straggler["rank"] == 2 and straggler["phase"] == "data"
    assert straggler["waiting_ranks"] == [0, 1]
    assert "straggler: rank 2: data" in res.stderr
    assert job["roles"]["0"] == "waits for rank 2 in collectives"
    assert {r["rank"]: r["verdict"] for r in job["ranks"]}[2] == "input-bound"


@pytest.mark.parametrize("crash_at", [0, 3, 9], ids=["step0", "in-window", "later"])
def test_a_crash_on_one_rank_keeps_the_exit_code_and_torchruns_report(tmp_path, crash_at):
    res = torchrun(tmp_path, 2, env={"CRASH_AT": str(crash_at)})  # bounded by TIMEOUT_S
    assert res.returncode == 1
    # The script's traceback as torch.distributed prints it: every line carries the rank.
    assert f"[rank1]: RuntimeError: boom at step {crash_at}" in res.stderr
    assert "ChildFailedError" in res.stderr and "Root Cause" in res.stderr  # torchrun's report


def test_run_torchrun_says_to_put_gpucheck_inside_the_launcher(tmp_path):
    res = gpucheck("run", "torchrun", "--nproc_per_node", "2", "train.py")
    assert res.returncode == 2
    assert "torchrun --nproc_per_node 2 -m gpu_notebook run train.py" in res.stderr


def test_help_says_how_paths_are_named_per_rank():
    res = gpucheck("run", "--help")
    text = " ".join(res.stdout.split())
    assert "{rank}" in text and "torchrun" in text and ".rankN" in text


def test_a_one_rank_process_group_in_gpucheck_cell(ip: Any, tmp_path: Path) -> None:
    body = textwrap.dedent(
        f"""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://{tmp_path}/pg", rank=0, world_size=1)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(6):
            t = torch.ones(4)
            dist.all_reduce(t)
            loss = model(torch.randn(16, 8)).sum()
            opt.zero_grad(); loss.backward(); opt.step()
        """
    )
    try:
        ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
        report = ip.user_ns["rep"]
    finally:
        ip.run_cell(
            "import torch.distributed as dist\nif dist.is_initialized(): dist.destroy_process_group()"
        )
    info = report.run.rank
    assert info is not None and (info.rank, info.world_size) == (0, 1)
    assert info.source == "process-group" and info.backend == "gloo"
    assert report.whatif.world_size == 1
    phases = report.analysis.phases
    assert phases is not None and "comm" in phases.measured  # the all-reduce is a collective
