"""Every rule that reads the GPU timeline reads a partial one (some GPU events without
timestamps: ``GpuTimeline.partial``) as bounds, not a measure (``rules.common.GpuBusyBounds``):
its busy share and a kernel family's share are lower bounds, its idle time an upper bound, and
NVML inside the steps bounds the busy share above. Graded on what the bounds say, bounded above
by the most the share can be, and said so; no NVML: not measured.

Built from the recorded H100/H200 kit runs (tests/data/gpu) with every second kernel unclocked,
as CUPTI left every GPU event of the pageable-copy baselines (``_half_unclocked_copy``). On main
the fp32 MLP's precision finding fell from high to medium with its bound from 11.1x to 1.99x
(autocast measured 6.68x on that H100), the item loop (NVML 71%) read GPU-starved [high] on the
26% its clocked half showed, and the padding rule scaled the kernels' share to that 26%.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpu_notebook.records import Analysis, Finding, Report, Run
from gpu_notebook.report.from_trace import report_from_trace
from gpu_notebook.rules import run_rules
from gpu_notebook.rules.common import severity_of
from gpu_notebook.rules.launch import GpuStarved
from gpu_notebook.rules.padding import PaddedTokens
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn
from tests.test_recorded_no_gpu_clock import _half_unclocked_copy
from tests.test_recorded_no_gpu_clock import _recorded as _report
from tests.test_rule_padding import _reading

DATA = Path(__file__).parent / "data" / "gpu"
H100 = DATA / "2026-12-06-nvidia-h100"
H200 = DATA / "2026-12-04-nvidia-h200"


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("partial_rules")


def _bounds(analysis: Analysis) -> tuple[float, float]:
    """The timeline's busy share (a lower bound: partial) and NVML's inside the steps."""
    gpu, nvml = analysis.gpu, analysis.utilization.nvml_busy
    assert gpu is not None and gpu.partial and nvml is not None
    return gpu.busy_share, nvml


def _by_rule(findings: tuple[Finding, ...] | list[Finding]) -> dict[str, Finding]:
    return {f.rule_id: f for f in findings}


def _without_nvml(analysis: Analysis) -> Analysis:
    u = analysis.utilization
    steps = u.in_steps
    if steps is not None:
        steps = dataclasses.replace(steps, gpu_util_mean_pct=None)
    util = dataclasses.replace(
        u, gpu_util_mean_pct=None, gpu_util_p5_pct=None, gpu_util_p95_pct=None, in_steps=steps
    )
    return dataclasses.replace(analysis, utilization=util)


def _rules(
    report: Report, analysis: Analysis | None = None, run: Run | None = None
) -> list[Finding]:
    return word_findings(run_rules(run or report.run, analysis or report.analysis, report.verdict))


@pytest.mark.parametrize(
    ("folder", "stem"),
    [
        (H100, "fp32-matmul.baseline"),
        (H100, "item-per-step.baseline"),
        (H100, "memory-near-limit.baseline"),
        (H100, "launch-bound.baseline"),
        (H200, "fp32-matmul.baseline"),
        (H200, "item-per-step.baseline"),
    ],
)
def test_a_partial_timelines_gain_bounds_hold_the_complete_timelines(
    tmp: Path, folder: Path, stem: str
) -> None:
    """A gain bound is an upper bound: read on half the kernels it is at least what the whole
    timeline bounds (the unclocked time may be what the fix removes). On main the float32
    kernels' share, read on the clocked half, bounded autocast and TF32 at 1.99x for 11.1x."""
    full = _by_rule(_report(folder, stem, False, tmp).findings)
    half_report = _report(folder, stem, True, tmp)
    assert half_report.analysis.gpu is not None and half_report.analysis.gpu.partial
    half = _by_rule(half_report.findings)
    compared = 0
    for rule_id, f in full.items():
        h = half.get(rule_id)
        if h is None or f.gain_bound is None:
            continue
        compared += 1
        assert h.gain_bound is not None, (rule_id, h.evidence)
        assert h.gain_bound >= f.gain_bound * (1 - 1e-9), (rule_id, h.gain_bound, f.gain_bound)
    assert compared >= 1


def test_the_fp32_mlps_partial_timeline_is_graded_on_the_verdicts_busy_reading(tmp: Path) -> None:
    """Half its kernels unclocked, the MLP reads 54% busy on the rest, NVML 100% inside the
    steps: the verdict reads NVML (gpu-bound), and the precision finding is graded on the same
    reading (high, as on the whole timeline), says the share is at least 54% and the float32
    kernels' share a range, and bounds the gain on its top. Main: medium, 'GPU busy 54%'."""
    report = _report(H100, "fp32-matmul.baseline", True, tmp)
    assert report.verdict.category == "gpu-bound"
    f = _by_rule(report.findings)["precision.fp32_tensor_cores"]
    assert f.severity == "high"
    busy = next(e for e in f.evidence if e.startswith("GPU busy"))
    assert busy.startswith("GPU busy at least 54% of the window, at most 100% (NVML"), busy
    assert "partial" in busy and "not measured" in busy
    kernels = next(e for e in f.evidence if e.startswith("float32 GEMM"))
    assert "at least" in kernels and "at most" in kernels, kernels
    tf32 = _by_rule(report.findings)["backend.tf32"]
    assert any("at least" in e and "GPU window (at most" in e for e in tf32.evidence)


@pytest.mark.parametrize("stem", ["item-per-step.baseline", "fp32-matmul.fix-autocast-bf16"])
def test_a_partial_timeline_nvml_reads_past_the_line_is_not_called_starved(
    tmp: Path, stem: str
) -> None:
    """The H100 item loop (clocked half 26% busy, NVML 71%) and the autocast MLP (39%, NVML
    58%): the GPU may be past the 50% line, so it is not said to starve. Main: [high] on both
    (the autocast MLP's whole timeline reads 84% busy and no such finding)."""
    report = _report(H100, stem, True, tmp)
    low, high = _bounds(report.analysis)
    assert low < 0.5 <= high
    assert "launch.gpu_starved" not in _by_rule(report.findings)


def test_a_starved_partial_timeline_is_graded_on_its_least_host_wait(tmp: Path) -> None:
    """The H100 near-OOM loop, half unclocked: 13% busy, NVML 33% (both under the line): the
    GPU starves. Its host wait holds the unclocked kernels' time: said as a range, the grade on
    its low end (the wait less all the time NVML allows them), the gain on its top."""
    report = _report(H100, "memory-near-limit.baseline", True, tmp)
    raw = [
        f
        for f in run_rules(report.run, report.analysis, report.verdict)
        if f.rule_id == "launch.gpu_starved"
    ]
    assert len(raw) == 1
    said = raw[0].said
    assert isinstance(said, GpuStarved)
    low, high = _bounds(report.analysis)
    assert high - low > 0.1
    f = word_findings(raw)[0]
    assert f.evidence[0].startswith("GPU busy at least 13%"), f.evidence[0]
    assert said.unclocked_events > 0 and said.busy_high == pytest.approx(high)
    assert said.host_idle_low == pytest.approx(max(0.0, said.host_idle - (high - low)))
    assert raw[0].severity == (severity_of(said.host_idle_low, low=0.10) or "low")
    idle = next(e for e in f.evidence if e.startswith("GPU idle waiting"))
    assert "unclocked events' time" in idle, idle


def test_a_partial_timeline_without_nvml_is_not_measured(tmp: Path) -> None:
    """No NVML beside the half-unclocked H100 runs: nothing bounds what the timeline left out.
    The starved GPU is not said (the near-OOM loop's whole timeline: 24% busy, [high]), the
    float32 kernels' gain is not bounded (main: 1.09x), and the busy share says not measured."""
    report = _report(H100, "memory-near-limit.baseline", True, tmp)
    found = _by_rule(_rules(report, _without_nvml(report.analysis)))
    assert "launch.gpu_starved" not in found
    f = found["precision.fp32_tensor_cores"]
    assert f.gain_bound is None
    assert any(e.startswith("GPU busy at least 13%") and "not measured" in e for e in f.evidence)
    # the same loop's whole timeline is measured: the rules read it without NVML
    full = _report(H100, "memory-near-limit.baseline", False, tmp)
    complete = _by_rule(_rules(full, _without_nvml(full.analysis)))
    assert "launch.gpu_starved" in complete
    assert complete["precision.fp32_tensor_cores"].gain_bound is not None


def _padded(report: Report, analysis: Analysis | None = None) -> tuple[Finding, PaddedTokens]:
    steps = dataclasses.replace(report.run.steps, padding=_reading())
    run = dataclasses.replace(report.run, steps=steps)
    raw = [
        f
        for f in run_rules(run, analysis or report.analysis, report.verdict)
        if f.rule_id == "data.padding"
    ]
    assert len(raw) == 1
    said = raw[0].said
    assert isinstance(said, PaddedTokens)
    return word_findings(raw)[0], said


def test_padding_scales_a_partial_timelines_kernels_to_nvml_not_the_clocked_half(
    tmp: Path,
) -> None:
    """The H100 item loop fed padded batches: the share that shrinks with length is at most the
    GPU's kernels. The whole timeline reads 49%; its clocked half 26% (main's bound rested on
    it); NVML 71% inside the steps bounds it, the bound holds the whole timeline's, and the
    evidence says the timeline is partial. Without NVML: not measured, no bound."""
    full, full_said = _padded(_report(H100, "item-per-step.baseline", False, tmp))
    report = _report(H100, "item-per-step.baseline", True, tmp)
    half, said = _padded(report)
    nvml = report.analysis.utilization.nvml_busy
    assert nvml is not None and said.scaling_high == pytest.approx(nvml)
    assert full_said.scaling_high is not None and said.scaling_high >= full_said.scaling_high
    assert half.gain_bound is not None and full.gain_bound is not None
    assert half.gain_bound >= full.gain_bound
    assert any("partial" in e and "at most 71%" in e for e in half.evidence), half.evidence
    blind, blind_said = _padded(report, _without_nvml(report.analysis))
    assert blind_said.scaling_high is None and blind.gain_bound is None
    assert any("not measured" in e and "partial" in e for e in blind.evidence)


def _halved(src: Path, out: Path) -> Path:
    return _half_unclocked_copy(src, out)


def test_exposed_communication_on_a_partial_timeline_is_a_range(
    reference_traces: Path, tmp: Path
) -> None:
    """A100 world-8 rank 3 (reference_traces: TraceLens's and HTA's NCCL trace, comm-bound),
    half its kernels unclocked: the unclocked time may be computation hiding the collectives
    or collectives nothing hides. Without NVML: not measured, no finding (main graded the
    clocked half's exposed share as measured); with NVML 95% inside the steps: a range, graded
    on its low end, bounded by its top, said so."""
    name = "a100_world8_rank3.json.gz"
    full = report_from_trace(reference_traces / name)[0]
    half = report_from_trace(_halved(reference_traces / name, tmp / "world8.half.json.gz"))[0]
    run = syn.make_run("", gpus=[syn.gpu()])
    assert "distributed.communication" in _by_rule(_rules(full, run=run))
    assert half.analysis.gpu is not None and half.analysis.gpu.partial
    assert "distributed.communication" not in _by_rule(_rules(half, run=run))
    nvml = dataclasses.replace(half.analysis, utilization=syn.utilization(gpu_util_pct=95.0))
    f = _by_rule(_rules(half, nvml, run))["distributed.communication"]
    gpu = half.analysis.gpu
    exposed = gpu.comm_exposed_us / gpu.window_us
    unseen = 0.95 - gpu.busy_share
    low, high = max(0.0, exposed - unseen), min(1.0, exposed + unseen)
    assert f.severity == (severity_of(low, low=0.10, medium=0.10, high=0.20) or "medium")
    assert 0.0 <= low < exposed < high < 1.0
    assert f.gain_bound == pytest.approx(1 / (1 - high))
    assert any("partial" in e and "not measured" in e for e in f.evidence), f.evidence
