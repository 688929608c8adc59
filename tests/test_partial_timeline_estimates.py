"""The estimates beside the verdict read a partial GPU timeline (``GpuTimeline.partial``: some
GPU events without timestamps) as bounds (``analysis.gpu_bounds``): the host's waits on the GPU
(its lag a lower bound) and the what-if's backward (a lower bound: the speedups widen).

Built from the recorded H100/H200 kit runs (tests/data/gpu) with every second kernel unclocked
(``_half_unclocked_copy``), and from their analyses with a timeline marked partial. On main a
host whose only lag reading was a partial timeline's read 'never waited'; the what-if's speedups
rested on the clocked half of backward, one figure under the whole timeline's; the CLI's
--min-gpu-util gate failed a run on a partial timeline's lower bound as if measured.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpu_notebook.analysis.host_waits import host_waits
from gpu_notebook.analysis.whatif import what_if
from gpu_notebook.records import Report, UtilizationStats
from tests.test_recorded_no_gpu_clock import _marked_partial as _partial
from tests.test_recorded_no_gpu_clock import _recorded as _report

DATA = Path(__file__).parent / "data" / "gpu"
H100 = DATA / "2026-12-06-nvidia-h100"
H200 = DATA / "2026-12-04-nvidia-h200"


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("partial_estimates")


def test_host_waits_on_a_partial_timelines_lag_alone_rule_no_wait_out(tmp: Path) -> None:
    """The item loop's host never waited on its complete timeline (sync 8%, lag 1%, small ops).
    Marked partial with no run-against-window reading, its lag is a lower bound: the GPU may
    have run on longer, so 'never waited' is not read. Main: never_waited on the lag alone."""
    analysis = _report(H100, "item-per-step.baseline", False, tmp).analysis
    bare = dataclasses.replace(analysis, shape=None)
    assert host_waits(bare).never_waited
    waits = host_waits(_partial(bare, nvml=0.7))
    assert waits.elsewhere_least and not waits.never_waited
    # The run's steps against the window's measure the wait: a partial lag beside it is read.
    with_shape = host_waits(_partial(analysis, nvml=0.7))
    assert not with_shape.elsewhere_least


@pytest.mark.parametrize("folder", [H100, H200])
def test_the_whatifs_speedups_widen_to_backwards_bounds_on_a_partial_timeline(
    tmp: Path, folder: Path
) -> None:
    """The autocast MLP with half its kernels unclocked: backward's GPU time reads about half its
    whole timeline's, so the speedup at it is a low end, and its range (backward up to all the
    unseen busy time; here unbounded: NVML not read inside the steps) holds the whole
    timeline's speedup. Main: one figure per point, under the whole timeline's (H100 at 2 GPUs
    1.03x for 1.14x), no range."""
    stem = "fp32-matmul.fix-autocast-bf16"
    full = _report(folder, stem, False, tmp)
    half = _report(folder, stem, True, tmp)
    w_full = what_if(full.run, full.analysis)
    w_half = what_if(half.run, half.analysis)
    assert w_full.points and w_half.points, (w_full.missing, w_half.missing)
    for f, h in zip(w_full.points, w_half.points, strict=True):
        assert f.speedup_high is None and f.speedup_low is None
        assert h.speedup_low == h.speedup and h.speedup_high is not None
        assert h.speedup_low < f.speedup < h.speedup_high, (h.speedup_low, f.speedup, h)


def test_the_min_gpu_util_gate_reads_a_partial_timelines_share_as_a_lower_bound(
    tmp: Path,
) -> None:
    """Without NVML the gate reads the timeline: the item loop's whole timeline 49% fails a 60%
    gate as measured; half its kernels unclocked (26%) the gate cannot be checked, and says
    so; a gate under the lower bound passes. Main: 'GPU utilization 26% is below'."""
    import argparse

    from gpu_notebook.cli import _gate_failure

    def gate(report: Report, pct: float) -> str | None:
        analysis = dataclasses.replace(
            report.analysis, utilization=_without_nvml(report.analysis.utilization)
        )
        args = argparse.Namespace(fail_on=None, min_gpu_util=pct)
        return _gate_failure(dataclasses.replace(report, analysis=analysis), args)

    full = _report(H100, "item-per-step.baseline", False, tmp)
    half = _report(H100, "item-per-step.baseline", True, tmp)
    assert (gate(full, 60.0) or "").startswith("GPU utilization 49% is below")
    said = gate(half, 60.0) or ""
    assert "at least 26%" in said and "partial" in said and "cannot pass" in said, said
    assert gate(half, 20.0) is None


def _without_nvml(u: UtilizationStats) -> UtilizationStats:
    steps = u.in_steps
    if steps is not None:
        steps = dataclasses.replace(steps, gpu_util_mean_pct=None)
    return dataclasses.replace(
        u, gpu_util_mean_pct=None, gpu_util_p5_pct=None, gpu_util_p95_pct=None, in_steps=steps
    )
