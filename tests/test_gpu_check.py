"""The GPU validation kit (benchmarks/gpu_check.py) cannot rot: its CPU dry run runs and its files parse.

The dry run is run once, in a subprocess, as a user would run it; the tests then read what it
wrote. The GPU numbers themselves are checked by tests over recorded runs (tests/data/gpu/).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import os
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpu_notebook.records import Report, SampleSeries, VerdictCategory, from_jsonable

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"
VERDICTS = set(typing.get_args(VerdictCategory))


def _load_kit() -> ModuleType:
    """The script as a module (it is not a package); registered so dataclasses can resolve it."""
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kit() -> ModuleType:
    return _load_kit()


@pytest.fixture(scope="module")
def dry_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One CPU dry run into a temp folder: (the finished process, the output folder)."""
    out = tmp_path_factory.mktemp("gpu-check") / "out"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the CPU path even on a GPU machine
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    return proc, out


@pytest.fixture(scope="module")
def summary(dry_run: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    proc, out = dry_run
    assert proc.returncode == 0, (
        f"dry run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    data: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return data


def _by_name(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["scenario"]: e for e in summary["scenarios"]}


# ------------------------------------------------------------------------------- the dry run


def _abstains_with_the_planted_window(report_path: Path, expected: list[str]) -> bool:
    """The report's 'unknown' is the abstention of a run its window does not represent (a busy
    machine stretches the profiled steps of a tiny-op loop 3x and preempts every few steps),
    and its window alone read the planted verdict: the mechanism, not the machine's load."""
    report = Report.from_json(report_path.read_text())
    verdict = report.verdict
    # Or a machine too busy to judge (the steps waited most of their time for a core, the
    # deciding share's range holds its line; load 12 with seven other jobs): the shares as
    # read still give the planted verdict.
    wait = verdict.core_wait
    if verdict.category == "unknown" and wait is not None and not wait.judged:
        return wait.found in expected
    return (
        verdict.category == "unknown"
        and any(f.rule_id == "run.window_unrepresentative" for f in report.findings)
        and any(
            line.startswith(f"the window alone reads {v}:")
            for line in verdict.evidence
            for v in expected
        )
    )


def test_dry_run_lists_every_scenario_with_a_verdict_or_a_skip_reason(
    kit: ModuleType, summary: dict[str, Any], dry_run: tuple[subprocess.CompletedProcess[str], Path]
) -> None:
    entries = _by_name(summary)
    assert list(entries) == list(kit.SCENARIO_NAMES)
    for name, e in entries.items():
        assert e["status"] in ("ok", "skipped"), f"{name}: {e['error']}\n{e.get('traceback')}"
        if e["status"] == "ok":
            assert e["verdict"] in VERDICTS, name
            assert e["verdict_matches"] or _abstains_with_the_planted_window(
                dry_run[1] / f"{name}.baseline.report.json", e["expected_verdicts"]
            ), f"{name}: {e['verdict']} not in {e['expected_verdicts']}"
        else:
            assert e["skip_reason"].startswith("skipped: "), name


def test_dry_run_skips_only_what_needs_cuda(summary: dict[str, Any]) -> None:
    entries = _by_name(summary)
    assert entries["memory-near-limit"]["skip_reason"] == "skipped: needs CUDA"
    skipped_fixes = {
        fe["fix_id"]: fe["skip_reason"]
        for e in entries.values()
        if e["status"] == "ok"
        for fe in e["fixes"]
        if fe["status"] != "ok"
    }
    assert skipped_fixes.pop("pinned-non-blocking") == "skipped: needs CUDA"
    assert skipped_fixes.pop("autocast-bf16") == "skipped: needs CUDA"
    assert skipped_fixes.pop("torch-compile").startswith("skipped: dry run")
    assert skipped_fixes == {}  # nothing else skipped, nothing failed
    others = [e for n, e in entries.items() if n != "memory-near-limit"]
    assert all(e["status"] == "ok" for e in others)  # no scenario lost to a time budget


def test_input_bound_scenario_is_called_input_bound_and_its_fix_measured(
    summary: dict[str, Any], dry_run: tuple[subprocess.CompletedProcess[str], Path]
) -> None:
    e = _by_name(summary)["input-bound"]
    if e["verdict"] == "unknown":
        # Too busy to judge (its steps waited most of their time for a core): no bound is
        # named, and the shares as read still give input-bound.
        assert _abstains_with_the_planted_window(
            dry_run[1] / "input-bound.baseline.report.json", ["input-bound"]
        )
    else:
        assert e["verdict"] == "input-bound"
        assert e["phase"] == "data" and e["phase_share"] >= 0.2
        assert e["gain_bound"] == pytest.approx(1 / (1 - e["phase_share"]))
    assert set(e["repeat_verdicts"]) <= {"input-bound", "unknown"}
    (fix,) = e["fixes"]
    assert fix["fix_id"] == "dataloader-workers" and fix["status"] == "ok"
    assert fix["speedup"] > 0 and fix["after"]["verdict"] in VERDICTS


def test_overhead_ratios_and_speedups_are_positive_numbers(summary: dict[str, Any]) -> None:
    measured = [e for e in summary["scenarios"] if e["status"] == "ok"]
    assert measured
    for e in measured:
        for key in ("overhead_ratio", "overhead_ratio_total"):
            x = e[key]
            assert isinstance(x, float) and math.isfinite(x) and x > 0, (e["scenario"], key, x)
        assert len(e["baseline_runs_s"]) == len(e["with_tool_runs_s"]) == e["repeats"]
        assert e["steps_per_run"] >= 12
        for fe in e["fixes"]:
            if fe["status"] == "ok":
                assert isinstance(fe["speedup"], float) and fe["speedup"] > 0, fe["fix_id"]


def test_every_report_round_trips_through_the_record_codec(
    dry_run: tuple[subprocess.CompletedProcess[str], Path], summary: dict[str, Any]
) -> None:
    _, out = dry_run
    reports = sorted(out.glob("*.report.json"))
    # One baseline per measured scenario and one per measured fix.
    expected = sum(
        1 + sum(fe["status"] == "ok" for fe in e["fixes"])
        for e in summary["scenarios"]
        if e["status"] == "ok"
    )
    assert len(reports) == expected
    for path in reports:
        text = path.read_text()
        report = Report.from_json(text)
        assert json.loads(report.to_json()) == json.loads(text), path.name
        assert report.run.window.status == "recorded", path.name
        assert report.run.status == "ok"


def test_traces_are_gzipped_kineto_json_and_samples_decode(
    dry_run: tuple[subprocess.CompletedProcess[str], Path], summary: dict[str, Any]
) -> None:
    _, out = dry_run
    named: list[dict[str, Any]] = []
    for e in summary["scenarios"]:
        if e["status"] == "ok":
            named.append(e["files"]["baseline"])
            named += [fe["files"] for fe in e["fixes"] if fe["status"] == "ok"]
    assert named
    for files in named:
        with gzip.open(out / files["trace"], "rt") as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        assert isinstance(events, list) and len(events) > 10, files["trace"]
        series = from_jsonable(SampleSeries, json.loads((out / files["samples"]).read_text()))
        assert series.interval_s > 0
        assert (out / files["report"]).is_file()


def test_each_saved_trace_is_the_one_its_report_was_built_from(
    dry_run: tuple[subprocess.CompletedProcess[str], Path], summary: dict[str, Any]
) -> None:
    """Every capture writes its window into a folder of its own: a later capture (a repeat, a
    fix) must not overwrite the trace an earlier report came from. The first profiled step the
    report names starts where the saved trace's first step mark starts."""
    _, out = dry_run
    named = [
        files
        for e in summary["scenarios"]
        if e["status"] == "ok"
        for files in [e["files"]["baseline"]]
        + [fe["files"] for fe in e["fixes"] if fe["status"] == "ok"]
    ]
    assert len(named) >= 2
    starts = []
    for files in named:
        report = Report.from_json((out / files["report"]).read_text())
        a = report.analysis
        window = next(
            (p for p in (a.window_phases, a.phases) if p is not None and p.source == "trace"), None
        )
        assert window is not None and window.steps, files["report"]
        with gzip.open(out / files["trace"], "rt") as f:
            events = json.load(f)["traceEvents"]
        marks = [
            float(e["ts"]) for e in events if str(e.get("name", "")).startswith("gpucheck::step#")
        ]
        assert marks, files["trace"]
        assert abs(min(marks) - window.steps[0].start_us) < 1.0, files
        starts.append(min(marks))
    assert len(set(starts)) == len(starts)  # no two saved traces are one file


def test_environment_and_output_size_are_recorded(
    dry_run: tuple[subprocess.CompletedProcess[str], Path], summary: dict[str, Any]
) -> None:
    proc, out = dry_run
    env = json.loads((out / "environment.json").read_text())
    assert env["device"] == "cpu" and env["dry_run"] is True
    assert env["run_env"]["torch_version"] == env["torch_version"]
    assert env["run_env"]["cuda_available"] is False
    total = sum(p.stat().st_size for p in out.iterdir())
    assert 0 < summary["output_bytes"] <= total < 5 * 2**20  # the size budget: a few MB
    # The printed table names every scenario.
    for name in _by_name(summary):
        assert any(line.startswith(name) for line in proc.stdout.splitlines()), name


# ------------------------------------------------------------------------------- arguments


def test_cuda_asked_without_cuda_exits_2_with_one_line(
    kit: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    assert kit.main(["--device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA is not available" in err and "--dry-run" in err
    assert not out.exists()  # nothing written before the check
    # Without --dry-run the device defaults to cuda: the same refusal.
    assert kit.main(["--out", str(out)]) == 2


def test_bad_arguments_exit_2(kit: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        kit.main(["--scenario", "no-such-scenario"])
    assert exc.value.code == 2
    assert kit.main(["--dry-run", "--repeats", "0"]) == 2
    assert "--repeats" in capsys.readouterr().err


def test_module_imports_no_torch_at_top_level() -> None:
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('k', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['k'] = m\n"
        "spec.loader.exec_module(m)\n"
        "print(sorted(n for n in ('torch', 'numpy', 'gpu_notebook') if n in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ------------------------------------------------------------------------------- pure helpers


def test_speedup_is_a_throughput_ratio_so_a_bigger_batch_counts(kit: ModuleType) -> None:
    base = kit.Timing(samples_per_step=32, runs_s=[1.0, 1.2, 0.9])
    same_batch = kit.Timing(samples_per_step=32, runs_s=[0.5])
    bigger = kit.Timing(samples_per_step=32 * 8, runs_s=[2.0])
    assert kit._throughput_gain(base, same_batch) == pytest.approx(2.0)
    assert kit._throughput_gain(base, bigger) == pytest.approx(4.0)
    assert kit._throughput_gain(base, kit.Timing(samples_per_step=32)) is None


def test_summary_table_shows_skips_and_errors_in_place_of_numbers(kit: ModuleType) -> None:
    entries = [
        {
            "scenario": "memory-near-limit",
            "status": "skipped",
            "skip_reason": "skipped: needs CUDA",
            "error": None,
        },
        {
            "scenario": "fp32-matmul",
            "status": "error",
            "skip_reason": None,
            "error": "RuntimeError: boom",
        },
    ]
    table = kit.summary_table(entries).splitlines()
    assert table[2].startswith("memory-near-limit") and "skipped: needs CUDA" in table[2]
    assert table[3].startswith("fp32-matmul") and "RuntimeError: boom" in table[3]


def test_each_fix_is_held_against_the_range_its_finding_stated(kit: ModuleType) -> None:
    """The table's "(<= x3.40)" is the kit's Amdahl over the traced share alone; the H100's
    pinned copies measured x6.98 beside it. The product's finding states its own range (it reads
    the run's unprofiled steps too): the summary records it for each fix, the table prints it."""
    from gpu_notebook.records import Report

    h100 = REPO / "tests" / "data" / "gpu" / "2026-12-06-nvidia-h100"
    report = Report.from_json((h100 / "pageable-copy.baseline.report.json").read_text())
    scenario = next(s for s in kit.SCENARIOS if s.name == "pageable-copy")
    stated = kit._stated(report, scenario.fixes[0].rule)
    assert stated is not None and stated["rule"] == "copies.pageable"
    assert stated["bound_low"] <= stated["bound"] <= stated["high"]
    assert kit._stated(report, None) is None and kit._stated(report, "no.such_rule") is None
    entry = {
        "scenario": "pageable-copy",
        "status": "ok",
        "verdict": "input-bound",
        "verdict_matches": True,
        "expected_verdicts": ["input-bound"],
        "gpu_busy_share": None,
        "nvml_util_mean_pct": 12.0,
        "overhead_ratio": 1.02,
        "gain_bound": 3.40,
        "fixes": [{"fix_id": "pinned-non-blocking", "status": "ok", "speedup": 6.98,
                   "stated": {**stated, "high": 8.08}}],
    }  # fmt: skip
    assert "x6.98 (<= x3.40, said <= x8.08)" in kit.summary_table([entry])


def test_the_cli_check_runs_a_bundled_script_and_records_its_report(tmp_path: Path) -> None:
    """benchmarks/gpu_cli_check.py, the end-to-end half of the GPU kit: a bundled CUDA script
    (its CPU stand-in here) under `gpucheck run`, the report, trace, log and summary written."""
    out = tmp_path / "cli"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "gpu_cli_check.py"),
            "--out",
            str(out),
            "--dry-run",
            "--script",
            "gpu_bound",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entry = json.loads((out / "summary.json").read_text())["scripts"][0]
    assert entry["script"] == "gpu_bound" and entry["rc"] == 0
    report = Report.from_json((out / "gpu_bound.report.json").read_text())
    assert entry["verdict"] == report.verdict.category in VERDICTS
    assert (out / "gpu_bound.trace.json.gz").stat().st_size > 0
    assert "gpucheck:" in (out / "gpu_bound.log").read_text()


def test_the_cli_check_prints_every_trial_run_with_where_its_time_went() -> None:
    """What the next GPU session needs from a --try-fixes run that measured nothing (issue 26):
    each run's end, limit, start-up, warm-up, steps, exit, and where it was at its limit."""
    spec = importlib.util.spec_from_file_location("cli_check", REPO / "benchmarks/gpu_cli_check.py")
    assert spec is not None and spec.loader is not None
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    run = {"arm": "dataloader_workers", "ended": "limit", "limit_s": 52.0, "budget_limited": True,
           "wall_s": 62.5, "first_step_s": 9.1, "warm_s": 9.8, "steps_asked": 30,
           "steps_timed": 3, "exit_s": None, "exit_killed": False, "exit_code": -9,
           "stacks": ["current: dataloader.py:1100 _try_get_data < train.py:36 <module>"],
           "output_tail": ["0 2.30"]}  # fmt: skip
    lines = cli._run_lines(
        [{**run, "arm": "", "ended": "stopped", "stacks": [], "output_tail": []}, run]
    )
    assert lines[0].startswith("run 1 script: stopped")
    assert "run 2 dataloader_workers: limit (limit 52.0, budget), wall 62.5" in lines[1]
    assert "first step 9.1, warm 9.8, 3/30 steps, exit -, code -9" in lines[1]
    assert lines[2].strip() == run["stacks"][0] and lines[3].strip() == "| 0 2.30"
