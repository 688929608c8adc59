"""A partial GPU timeline (some GPU events without timestamps: ``GpuTimeline.partial``) gives
only a lower bound of the GPU's busy share: what reads it as measured must not.

CUPTI left every GPU event of the pageable-copy baselines unclocked (tests/data/gpu), and a
timeline with half its kernels unclocked read the GPU-bound fp32 MLP 54% busy (NVML 100%).
The small-batch rule and the GPU kit's busy column took such a share as measured.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType

import pytest

from gpu_notebook.records import Analysis, Report
from gpu_notebook.rules import run_rules
from gpu_notebook.rules.batch import SmallBatch
from gpu_notebook.words import word_findings
from tests.scenarios import synthetic as syn
from tests.test_gpu_check import _load_kit
from tests.test_recorded_no_gpu_clock import _half_unclocked_copy, _rebuilt

H100 = Path(__file__).parent / "data" / "gpu" / "2026-12-06-nvidia-h100"
A100 = syn.gpu()
TRAIN = """\
for x, y in loader:
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
"""


def _batch_findings(report: Report, batch: int) -> list[str]:
    """The small-batch rule's findings on ``report`` had the loop fed batches of ``batch``
    (the kit's loops feed tensors the step clock does not size)."""
    stats = dataclasses.replace(report.analysis.step_stats, batch_size=batch)
    analysis = dataclasses.replace(report.analysis, step_stats=stats)
    found = word_findings(run_rules(report.run, analysis, report.verdict))
    return [f.rule_id for f in found if f.rule_id == "batch.small_batch"]


@pytest.fixture(scope="module")
def half_item_loop(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The H100's item loop (its trace 49% busy, NVML 71% inside its steps) with every second
    kernel unclocked: the clocked half reads 26%."""
    stem = "item-per-step.baseline"
    out = tmp_path_factory.mktemp("partial") / "half.json.gz"
    return _rebuilt(H100, stem, _half_unclocked_copy(H100 / f"{stem}.trace.json.gz", out))


def test_a_partial_timelines_lower_bound_is_no_small_batch(half_item_loop: Report) -> None:
    """26% busy on the clocked half is under the rule's 50% line; NVML (an upper bound, any
    time a kernel ran) reads 71% inside the steps: the GPU may be past the line, no finding."""
    g = half_item_loop.analysis.gpu
    assert g is not None and g.partial and g.busy_share < 0.3
    nvml = half_item_loop.analysis.utilization.nvml_busy
    assert nvml is not None and nvml > 0.5
    assert _batch_findings(half_item_loop, 64) == []


def _partial(busy: float) -> Analysis:
    tl = dataclasses.replace(syn.timeline(busy=busy), unclocked_events=120)
    return syn.make_analysis(gpu_timeline=tl, util=_util(20.0), batch_size=16)


def _util(nvml_pct: float | None) -> syn.UtilizationStats:
    return syn.utilization(gpu_util_pct=nvml_pct, memory_peak_gib=10, memory_total_gib=80)


def test_a_partial_timeline_under_nvml_reads_nvml_and_says_partial() -> None:
    """A partial timeline 15% busy, NVML 20%: the finding rests on NVML's reading (the upper
    bound is under the line), and says the timeline is partial, its share not measured."""
    run = syn.make_run(TRAIN, gpus=[A100])
    raw = [
        f for f in run_rules(run, _partial(0.15), syn.VERDICT) if f.rule_id == "batch.small_batch"
    ]
    assert len(raw) == 1
    said = raw[0].said
    assert isinstance(said, SmallBatch)
    assert said.busy == pytest.approx(0.20) and said.busy_from == "nvml"
    assert said.unclocked_events == 120
    f = word_findings(raw)[0]
    assert any("partial" in e and "not measured" in e for e in f.evidence), f.evidence


def test_a_partial_timeline_without_nvml_is_not_measured() -> None:
    """No NVML reading beside a partial timeline: the GPU's busy share is not measured."""
    run = syn.make_run(TRAIN, gpus=[A100])
    analysis = dataclasses.replace(_partial(0.15), utilization=_util(None))
    assert "batch.small_batch" not in [f.rule_id for f in run_rules(run, analysis, syn.VERDICT)]
    # the same timeline complete is measured: the rule reads it
    complete = dataclasses.replace(analysis, gpu=syn.timeline(busy=0.15))
    assert "batch.small_batch" in [f.rule_id for f in run_rules(run, complete, syn.VERDICT)]


@pytest.fixture(scope="module")
def kit() -> ModuleType:
    return _load_kit()


def test_the_kits_busy_column_says_partial(kit: ModuleType, half_item_loop: Report) -> None:
    """The kit's table: a partial timeline's share as a lower bound, marked partial; NVML
    inside the steps beside the whole run's mean."""
    figures = kit._report_figures(half_item_loop, None)
    assert figures["gpu_busy_partial"] is True
    row = {
        "scenario": "item-per-step",
        "status": "ok",
        "verdict": figures["verdict"],
        "verdict_matches": True,
        "expected_verdicts": ["host-bound"],
        **figures,
        "overhead_ratio": 1.0,
        "fixes": [{"fix_id": "item-every-n", "status": "ok", "speedup": 1.12}],
    }
    table = kit.summary_table([row])
    busy = figures["gpu_busy_share"]
    assert f">={100 * busy:.0f}% partial" in table
    steps = half_item_loop.analysis.utilization.in_steps
    assert steps is not None and steps.gpu_util_mean_pct is not None
    run_pct = half_item_loop.analysis.utilization.gpu_util_mean_pct
    assert f"{steps.gpu_util_mean_pct:.0f}% (run {run_pct:.0f}%)" in table
