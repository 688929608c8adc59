"""The verdict reads a partial GPU timeline (``GpuTimeline.partial``: some GPU events without
timestamps) as bounds (``analysis.gpu_bounds``): read at both ends under the GPU-bound line, a
verdict that holds at one end only is "undecided between X and Y", not a flip.

Built from the recorded H100/H200 kit runs (tests/data/gpu) with every second kernel unclocked
(``_half_unclocked_copy``), and from their analyses with a timeline marked partial. On main the
autocast MLP (its whole timeline 84% busy, gpu-bound) read host-bound on its clocked 39% (NVML
58%: the run's mean, one tick inside the steps), and no verdict said its bounds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.analysis.gpu_bounds import gpu_busy_bounds
from gpu_notebook.analysis.verdict import decide
from tests.test_recorded_no_gpu_clock import _marked_partial as _partial
from tests.test_recorded_no_gpu_clock import _recorded as _report

DATA = Path(__file__).parent / "data" / "gpu"
H100 = DATA / "2026-12-06-nvidia-h100"
H200 = DATA / "2026-12-04-nvidia-h200"
AUTOCAST = "fp32-matmul.fix-autocast-bf16"


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("partial_verdict")


@pytest.mark.parametrize("folder", [H100, H200])
def test_the_autocast_mlps_partial_timeline_does_not_flip_to_host_bound(
    tmp: Path, folder: Path
) -> None:
    """Its whole timeline reads gpu-bound (84% H100, 94% H200); half its kernels unclocked the
    rest read 39% / 44%, and NVML is the run's mean on a tick or none inside the steps: no
    ceiling. At the low end host-bound, at the top gpu-bound: undecided, said, not host-bound.
    Main: host-bound at medium confidence."""
    full = _report(folder, AUTOCAST, False, tmp)
    assert full.verdict.category == "gpu-bound"
    half = _report(folder, AUTOCAST, True, tmp)
    g = half.analysis.gpu
    assert g is not None and g.partial and g.busy_share < 0.5
    bounds = gpu_busy_bounds(half.analysis)
    assert bounds is not None and bounds.low == g.busy_share and bounds.high is None
    v = half.verdict
    assert v.category != "host-bound", v
    assert v.category == "unknown" and v.confidence == "low"
    assert v.headline.startswith("Undecided between host-bound and gpu-bound"), v.headline
    assert any("timeline is partial" in e and "not bounded" in e for e in v.evidence), v.evidence


@pytest.mark.parametrize(
    ("folder", "stem", "category"),
    [
        (H100, "item-per-step.baseline", "host-bound"),  # 26% clocked, NVML 71% in the steps
        (H100, "launch-bound.baseline", "host-bound"),
        (H100, "memory-near-limit.baseline", "memory-bound"),
        (H100, "fp32-matmul.baseline", "gpu-bound"),  # 54% clocked, NVML 100%, the host waited
        (H200, "item-per-step.baseline", "host-bound"),  # NVML 83%: the host never waited
    ],
)
def test_a_verdict_that_holds_at_both_ends_stands_and_says_its_bounds(
    tmp: Path, folder: Path, stem: str, category: str
) -> None:
    full = _report(folder, stem, False, tmp)
    half = _report(folder, stem, True, tmp)
    assert full.verdict.category == category
    assert half.verdict.category == category, half.verdict
    assert any(e.startswith("GPU busy at least") for e in half.verdict.evidence)
    assert not any(e.startswith("GPU busy at least") for e in full.verdict.evidence)


def test_a_synthetic_partial_timeline_under_the_line_with_no_ceiling_is_undecided(
    tmp: Path,
) -> None:
    """The fp32 MLP's analysis (complete: gpu-bound) marked partial at 45% clocked, NVML not read
    inside the steps: undecided, never host-bound on the clocked share. With NVML inside the
    steps at 95% and the host waiting on the GPU, gpu-bound, its busy share said as bounds;
    with NVML at 60% (both ends under the line) the timeline's reading stands."""
    report = _report(H100, "fp32-matmul.baseline", False, tmp)
    run, analysis = report.run, report.analysis
    assert decide(run, analysis).category == "gpu-bound"
    v = decide(run, _partial(analysis, busy=0.45))
    assert v.category == "unknown" and isinstance(v.answer, said.Undecided), v
    assert (v.answer.at_low, v.answer.at_high) == ("host-bound", "gpu-bound")
    v = decide(run, _partial(analysis, busy=0.45, nvml=0.95))
    assert v.category == "gpu-bound", v
    assert isinstance(v.answer, said.GpuBound) and v.answer.partial
    assert v.answer.busy == pytest.approx(0.45) and v.answer.busy_high == pytest.approx(0.95)
    v = decide(run, _partial(analysis, busy=0.45, nvml=0.6))
    assert v.category == "host-bound", v
    assert isinstance(v.lines[0], said.BusyBounds) and v.lines[0].high == pytest.approx(0.6)


def test_a_complete_timelines_verdict_is_unchanged(tmp: Path) -> None:
    """No bounds line, no undecided answer on complete timelines (the recorded runs)."""
    for stem in (AUTOCAST, "item-per-step.baseline", "fp32-matmul.baseline"):
        v = _report(H100, stem, False, tmp).verdict
        assert not any(e.startswith("GPU busy at least") for e in v.evidence)


def test_an_idle_cause_past_its_line_at_one_end_only_is_undecided(tmp: Path) -> None:
    """The verdict's idle causes on a partial timeline are upper bounds: the item loop's analysis
    (49% busy) with 25% of its window idle while the host waited for data, marked partial with
    NVML at 60% inside the steps: the unseen 11% may fill those gaps, leaving 14% (under the
    20% input line). Input-bound at the low end, host-bound at the top: undecided. With NVML at
    50% (1% unseen) the data wait holds its line at both ends: input-bound. Main: input-bound
    at 60% as at 50%."""
    report = _report(H100, "item-per-step.baseline", False, tmp)
    gpu = report.analysis.gpu
    assert gpu is not None and 0.45 < gpu.busy_share < 0.5
    data_idle = dataclasses.replace(gpu, idle_data_wait_us=0.25 * gpu.window_us)
    analysis = dataclasses.replace(report.analysis, gpu=data_idle)
    v = decide(report.run, _partial(analysis, nvml=0.6))
    assert v.category == "unknown" and isinstance(v.answer, said.Undecided), v
    assert (v.answer.at_low, v.answer.at_high) == ("input-bound", "host-bound")
    assert any(isinstance(x, said.GpuIdle) and x.at_most for x in v.lines)
    assert decide(report.run, _partial(analysis, nvml=0.5)).category == "input-bound"
