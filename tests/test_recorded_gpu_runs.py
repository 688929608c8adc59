"""Every recorded GPU kit run, machine by machine: the H200 (2026-12-04) and the H100 (2026-12-06,
the second of that day's two kit calls: the first call's files were lost, only its printed table
survived, in tests/data/gpu/README.md).

For each run: every stored report reads back; today's analysis of each trace (with the run's
step clock and NVML samples, and alone, as ``gpucheck analyze`` reads one) agrees with the
stored report; the baselines keep their planted verdicts; the GPU timeline sees what each
scenario plants (pageable vs pinned copies, the per-step scalar reads, tensor cores after
autocast); and each measured fix lies under the Amdahl bound the product stated for it.
tests/test_recorded_gpu.py holds the H200's own cases.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.records import Finding, Report
from gpu_notebook.report.build import build_report
from gpu_notebook.report.from_trace import report_from_trace

DATA = Path(__file__).parent / "data" / "gpu"
H200 = DATA / "2026-12-04-nvidia-h200"
H100 = DATA / "2026-12-06-nvidia-h100"
KITS = (H200, H100)
CLIS = (DATA / "2026-12-04-nvidia-h200-cli", DATA / "2026-12-06-nvidia-h100-cli")


def _stems(folder: Path) -> list[str]:
    """The recorded runs of a folder that have a trace (``<stem>.report.json`` and
    ``<stem>.trace.json.gz``)."""
    return sorted(
        p.name.removesuffix(".report.json")
        for p in folder.glob("*.report.json")
        if (folder / p.name.replace(".report.json", ".trace.json.gz")).exists()
    )


RUNS = [pytest.param(f, s, id=f"{f.name}/{s}") for f in (*KITS, *CLIS) for s in _stems(f)]
BASELINES = [
    pytest.param(k, s.removesuffix(".baseline"), id=f"{k.name}/{s.removesuffix('.baseline')}")
    for k in KITS
    for s in _stems(k)
    if s.endswith(".baseline")
]


@functools.cache
def _planted() -> dict[str, tuple[str, ...]]:
    """Each scenario's expected verdicts as the kit defines them today (the H200's summary holds
    what it expected then: item-per-step accepts host-bound since)."""
    path = Path(__file__).parent.parent / "benchmarks" / "gpu_check_workloads.py"
    spec = importlib.util.spec_from_file_location("gpu_check_workloads_planted", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that its dataclasses resolve
    spec.loader.exec_module(module)
    return {s.name: tuple(s.expected_verdicts) for s in module.SCENARIOS}


def _summary(kit: Path) -> dict[str, Any]:
    return {e["scenario"]: e for e in json.loads((kit / "summary.json").read_text())["scenarios"]}


@functools.cache
def _stored(folder: Path, stem: str) -> Report:
    return Report.from_json((folder / f"{stem}.report.json").read_text())


@functools.cache
def _rebuilt(folder: Path, stem: str) -> Report:
    """The stored report's run (step clock, NVML samples, cell source) analysed again by today's
    code, with its window's trace where it now lies."""
    run = _stored(folder, stem).run
    window = dataclasses.replace(run.window, trace_path=str(folder / f"{stem}.trace.json.gz"))
    later = tuple(dataclasses.replace(w, trace_path=None) for w in run.more_windows)
    return build_report(dataclasses.replace(run, window=window, more_windows=later))


@functools.cache
def _trace_alone(folder: Path, stem: str) -> Report:
    report, _, _ = report_from_trace(folder / f"{stem}.trace.json.gz")
    return report


def _events(folder: Path, stem: str) -> list[dict[str, Any]]:
    trace = json.loads(gzip.decompress((folder / f"{stem}.trace.json.gz").read_bytes()))
    return list(trace["traceEvents"])


def _finding(report: Report, rule_id: str) -> Finding:
    return next(f for f in report.findings if f.rule_id == rule_id)


# What the analysis read differently when the H200's reports were recorded (fixed since; see
# tests/test_recorded_gpu.py): (stored, today's).
H200_FIXED_SINCE = {
    "fp32-matmul.baseline": ("unknown", "gpu-bound"),  # the host ran ahead of the GPU's window
    "pageable-copy.baseline": ("host-bound", "input-bound"),  # GPU events with ts 0
}


@pytest.mark.parametrize(("folder", "stem"), RUNS)
def test_every_recorded_report_reads_back_and_its_trace_reads_as_it_did(
    folder: Path, stem: str
) -> None:
    stored = _stored(folder, stem)
    assert stored.run.window.trace_path  # it was captured with a trace
    again = _rebuilt(folder, stem)
    was, now = H200_FIXED_SINCE.get(stem, (None, None)) if folder == H200 else (None, None)
    if was is not None:
        assert (stored.verdict.category, again.verdict.category) == (was, now)
    else:
        assert again.verdict.category == stored.verdict.category, again.verdict


@pytest.mark.parametrize(("folder", "stem"), RUNS)
def test_each_trace_alone_reads_as_its_live_report(folder: Path, stem: str) -> None:
    """``gpucheck analyze`` on the trace alone: no NVML samples, no step clock."""
    alone = _trace_alone(folder, stem).verdict.category
    if stem.startswith("memory-near-limit."):
        # The card's fill is an NVML reading, which a trace does not hold: the small model's
        # launches read host-bound, the verdict the memory pressure overrides live.
        assert alone == "host-bound"
        return
    assert alone == _rebuilt(folder, stem).verdict.category


@pytest.mark.parametrize(("kit", "scenario"), BASELINES)
def test_each_baseline_keeps_its_planted_verdict(kit: Path, scenario: str) -> None:
    """On the H100 (call 2) every baseline read as planted; call 1's item-per-step read
    gpu-bound (busy "-": GPU events without timestamps, the verdict then from NVML's 82%),
    whose files were lost: the zero-timestamp verdict is another helper's (zerots)."""
    assert _summary(kit)[scenario]["status"] == "ok"
    assert _rebuilt(kit, f"{scenario}.baseline").verdict.category in _planted()[scenario]


@pytest.mark.parametrize("kit", KITS, ids=lambda k: k.name)
def test_pageable_copies_and_their_pinned_fix_are_told_apart(kit: Path) -> None:
    """48 MiB a step from pageable memory, then from pinned buffers: the copies' kind, count and
    bytes survive the baseline's GPU events having no timestamps (both machines)."""
    base = _trace_alone(kit, "pageable-copy.baseline").analysis.gpu
    fix = _trace_alone(kit, "pageable-copy.fix-pinned-non-blocking").analysis.gpu
    assert base is not None and fix is not None
    assert [(c.kind, c.count) for c in base.copies] == [("HtoD (Pageable -> Device)", 6)]
    assert [(c.kind, c.count) for c in fix.copies] == [("HtoD (Pinned -> Device)", 6)]
    # x: 64x3x256x256 float32 (48 MiB), y: 64 int64, each of 3 steps
    assert base.copies[0].bytes == fix.copies[0].bytes == 3 * (48 * 2**20 + 64 * 8)
    assert base.unclocked_events > 50 and fix.unclocked_events == 0


@pytest.mark.parametrize("kit", KITS, ids=lambda k: k.name)
def test_the_per_step_reads_are_device_syncs_and_the_fix_removes_them(kit: Path) -> None:
    """Two ``.item()`` a step on CUDA tensors: each a ``_local_scalar_dense`` with a device-to-
    host copy the host waits for. AdamW's step counter reads (CPU tensors) stay in the fix."""
    steps = 3
    base = _trace_alone(kit, "item-per-step.baseline").analysis.gpu
    fix = _trace_alone(kit, "item-per-step.fix-item-every-n").analysis.gpu
    assert base is not None and fix is not None
    assert [(c.kind, c.count) for c in base.copies] == [("DtoH (Device -> Pinned)", 2 * steps)]
    assert fix.copies == ()
    assert base.idle_sync_wait_us > 0 and fix.idle_sync_wait_us == 0

    def reads(stem: str) -> int:
        events = _events(kit, stem)
        return sum(1 for e in events if e.get("name") == "aten::_local_scalar_dense")

    assert reads("item-per-step.baseline") - reads("item-per-step.fix-item-every-n") == 2 * steps
    found = _finding(_rebuilt(kit, "item-per-step.baseline"), "syncs.per_step")
    assert found.fix_id == "throttle_host_syncs"


@pytest.mark.parametrize("kit", KITS, ids=lambda k: k.name)
def test_tensor_cores_run_only_after_autocast(kit: Path) -> None:
    base = _trace_alone(kit, "fp32-matmul.baseline").analysis.gpu
    fix = _trace_alone(kit, "fp32-matmul.fix-autocast-bf16").analysis.gpu
    assert base is not None and fix is not None
    assert base.tensor_core_kernel_us == 0.0
    assert fix.tensor_core_kernel_us is not None and fix.tensor_core_kernel_us > 0
    precision = _finding(_rebuilt(kit, "fp32-matmul.baseline"), "precision.fp32_tensor_cores")
    assert precision.severity == "high" and precision.fix_id == "autocast"
    assert not any(
        f.rule_id == "precision.fp32_tensor_cores" and f.severity != "info"
        for f in _rebuilt(kit, "fp32-matmul.fix-autocast-bf16").findings
    )


# The kit's fix -> the finding whose fix it is (its scenario's baseline names it).
FIX_RULE = {
    "dataloader-workers": "input.loader_workers",
    "pinned-non-blocking": "copies.pageable",
    "item-every-n": "syncs.per_step",
    "autocast-bf16": "precision.fp32_tensor_cores",
}
POINT_MISS = {
    # Above the stated upper end, inside it widened by the run-to-run margin (5%): the .item()
    # wait measured in 3 traced steps (8%) against ~11% of an unprofiled step removed (step
    # clock: 4.00 -> 3.57 ms on the H100, 3.19 -> 2.46 ms on the H200).
    (H200.name, "item-every-n"): "x1.13 against up to 1.10x (1.16x widened)",
    (H100.name, "item-every-n"): "x1.12 against up to 1.08x (1.14x widened)",
}


def _measured_fixes(misses: dict[tuple[str, str], str]) -> list[Any]:
    """Each kit fix with a finding of its own, as (kit, scenario, fix id); ``misses``: xfail."""
    params = []
    for k in KITS:
        for scenario, entry in _summary(k).items():
            for fix in entry["fixes"]:
                fix_id = fix["fix_id"]
                if fix_id not in FIX_RULE or not fix.get("speedup"):
                    continue
                reason = misses.get((k.name, fix_id))
                marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
                params.append(
                    pytest.param(k, scenario, fix_id, id=f"{k.name}/{fix_id}", marks=marks)
                )
    return params


def _measured(kit: Path, scenario: str, fix_id: str) -> float:
    fix = next(f for f in _summary(kit)[scenario]["fixes"] if f["fix_id"] == fix_id)
    return float(fix["speedup"])


@pytest.mark.parametrize(("kit", "scenario", "fix_id"), _measured_fixes({}))
def test_each_measured_fix_lies_in_the_range_its_finding_stated(
    kit: Path, scenario: str, fix_id: str
) -> None:
    """The kit's speedup (medians of 3 interleaved runs without the tool) against the baseline
    finding's Amdahl bound, widened by what two runs differ by (``gain_margin``)."""
    f = _finding(_rebuilt(kit, f"{scenario}.baseline"), FIX_RULE[fix_id])
    assert f.gain_bound is not None
    assert _measured(kit, scenario, fix_id) <= f.gain_bound * (1 + f.gain_margin), f.evidence


@pytest.mark.parametrize(("kit", "scenario", "fix_id"), _measured_fixes(POINT_MISS))
def test_each_measured_fix_lies_under_its_findings_amdahl_bound(
    kit: Path, scenario: str, fix_id: str
) -> None:
    f = _finding(_rebuilt(kit, f"{scenario}.baseline"), FIX_RULE[fix_id])
    assert f.gain_bound is not None
    assert _measured(kit, scenario, fix_id) <= f.gain_bound, f.evidence


def test_the_h100_pinned_copy_gain_lies_inside_its_range() -> None:
    """48 MB pageable copies a step: 7.3-8.0 ms in the 3 traced steps, 72% of the run's
    unprofiled step (10.6 ms), where the step clock's span before the backward (the copies and
    a ~0.1 ms model forward) is 9.2 ms, 86%. The range read 3.18x-3.58x (3.88x widened); pinned,
    non-blocking copies measured 6.98x. The upper end now rests on that span."""
    report = _rebuilt(H100, "pageable-copy.baseline")
    f = _finding(report, "copies.pageable")
    assert f.gain_bound is not None and f.bound_low is not None
    assert f.bound_low <= _measured(H100, "pageable-copy", "pinned-non-blocking") <= f.gain_bound
    assert any("the span before the backward" in e for e in f.evidence), f.evidence
    assert f.severity == "high"


H100_CLI = CLIS[1]


def test_the_h100_cli_runs_tried_their_first_fix() -> None:
    """``gpu_cli_check.py --try-fixes 30 --try-budget 70``: autocast verified on the GPU-bound
    script, inside the precision finding's range; the 70 s budget left TF32 untried."""
    report = _stored(H100_CLI, "gpu_bound")
    assert report.try_fixes is not None
    trials = {t.fix_id: t for t in report.try_fixes.trials}
    autocast = trials["autocast"]
    assert autocast.verdict == "verified" and autocast.speedup is not None
    precision = _finding(_rebuilt(H100_CLI, "gpu_bound"), "precision.fp32_tensor_cores")
    assert precision.gain_bound is not None and autocast.speedup <= precision.gain_bound
    assert trials["backend_flags"].verdict == "skipped"


@pytest.mark.xfail(
    reason="a recording of the try-fixes harness before 91cb385: the workers fix's one run, "
    "warm, given the budget's last >=52 s (call 1: 60 s), wrote no result (the first trial run "
    "took <=17.5 s). Inferred, not read (no per-run record then): its exit. torch 2.11 joins "
    "a pinned persistent loader's workers from atexit one by one, 5 s each, none told to stop "
    "(pytorch#81794): 12 workers, ~60 s, and the child wrote its result only after its exit. "
    "Now the result precedes the exit (91cb385) and the child ends live loaders' workers "
    "before the exit hooks (tfwork); the next GPU run's try_fixes.runs (exit_s, stacks) "
    "confirms or refutes it. This report stays 'not measured'",
    strict=False,
)
def test_the_h100_input_bound_script_measured_its_workers_fix() -> None:
    report = _stored(H100_CLI, "gpu_train")
    assert report.try_fixes is not None
    workers = next(t for t in report.try_fixes.trials if t.fix_id == "dataloader_workers")
    assert workers.speedup is not None
