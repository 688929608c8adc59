"""Same code, same answer near a verdict's line: two runs whose deciding shares differ within
what two runs of the code differ by, on either side of the line, give one verdict, said as near
the line; shares clearly on one side keep the verdict they had (analysis.verdict_near_line)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gpu_notebook.records import PHASES, Analysis, PhaseBreakdown, RunPhase, StepPhases, Verdict
from tests.scenarios import synthetic as syn

STEP_US = 10_000.0


def _split(phase: str, shares: Sequence[float]) -> PhaseBreakdown:
    """A traced window of 10 ms steps, ``phase`` taking each step's share, the rest forward."""
    rows = tuple(
        StepPhases(i, i * STEP_US, STEP_US, {phase: s * STEP_US, "forward": (1 - s) * STEP_US})
        for i, s in enumerate(shares)
    )
    totals = {phase: sum(shares) * STEP_US, "forward": sum(1 - s for s in shares) * STEP_US}
    return PhaseBreakdown("trace", rows, STEP_US * len(rows), totals, PHASES)


def _cpu(phase: str, shares: Sequence[float]) -> Verdict:
    return syn.verdict(syn.make_run(""), syn.make_analysis(phase_split=_split(phase, shares)))


def _near(verdict: Verdict, line: str) -> bool:
    return any(f"across the {line} line" in e for e in verdict.evidence)


# A loop whose steps read 15%-23% data wait (19% over them), and the next run of it, 2% more.
NOISY_UNDER = [0.15, 0.23, 0.17, 0.21, 0.19, 0.2, 0.18, 0.2]
NOISY_OVER = [s + 0.02 for s in NOISY_UNDER]


@pytest.mark.parametrize(
    ("under", "over"),
    [(NOISY_UNDER, NOISY_OVER), ([0.19] * 8, [0.215] * 8)],
    ids=["steps-spread", "steps-alike"],
)
def test_two_runs_either_side_of_the_input_line_within_their_margin_give_one_verdict(under, over):
    # On main the first read cpu-only (19% < 20%) and the second input-bound.
    first, second = _cpu("data", under), _cpu("data", over)
    assert first.category == second.category == "input-bound"
    assert _near(first, "20%") and _near(second, "20%")
    assert first.confidence == second.confidence == "low"


def test_two_runs_either_side_of_the_sync_line_give_one_verdict():
    first, second = _cpu("sync", [0.19] * 8), _cpu("sync", [0.21] * 8)
    assert first.category == second.category == "sync-bound"
    assert _near(first, "20%") and _near(second, "20%")


def _run_wide(share: float, low: float, high: float) -> Analysis:
    """A 3-step window reading 35% data wait beside the step clock's 60 steps reading ``share``
    (``low``-``high``): the run's steps decide (verdict.run_data_overrules)."""
    analysis = syn.make_analysis(phase_split=_split("data", [0.35] * 8))
    whole = RunPhase(share, 60, share * 0.01, 0.01, low, high)
    return Analysis(**{**analysis.__dict__, "run_data": whole})


def test_the_run_wide_data_share_decides_with_its_range_not_its_point():
    run = syn.make_run("")
    first = syn.verdict(run, _run_wide(0.195, 0.17, 0.22))
    second = syn.verdict(run, _run_wide(0.205, 0.18, 0.23))
    # On main the run's 19.5% overruled the window and read cpu-only; 20.5% input-bound.
    assert first.category == second.category == "input-bound"
    note = next(e for e in first.evidence if "across the 20% line" in e)
    assert "over 60 steps" in note  # the run's range, not the window's


def test_a_gpu_run_without_a_timeline_reads_the_input_line_with_its_range():
    run = syn.make_run("", gpus=(syn.gpu(),))
    util = syn.utilization(gpu_util_pct=40.0)
    verdicts = [
        syn.verdict(run, syn.make_analysis(phase_split=_split("data", [s] * 8), util=util))
        for s in (0.19, 0.21)
    ]
    assert [v.category for v in verdicts] == ["input-bound", "input-bound"]


@pytest.mark.parametrize(
    ("phase", "share", "category"),
    [("data", 0.08, "cpu-only"), ("data", 0.4, "input-bound"), ("sync", 0.45, "sync-bound")],
)
def test_a_share_clearly_on_one_side_keeps_its_verdict_and_says_no_line(phase, share, category):
    verdict = _cpu(phase, [share] * 8)
    assert verdict.category == category
    assert not _near(verdict, "20%") and verdict.confidence != "low"


def test_the_host_wait_in_collectives_reads_its_range_without_a_margin():
    # 10% is two margins from nothing: a steady 8% stays under it, a range reaching it decides.
    assert _cpu("comm", [0.08] * 8).category != "comm-bound"
    assert _cpu("comm", [0.04, 0.14, 0.05, 0.13, 0.06, 0.12, 0.05, 0.1]).category == "comm-bound"


def test_a_line_reading_reaches_its_line_within_one_margin_and_not_beyond():
    from gpu_notebook.analysis.verdict_near_line import line_reading

    for share in (0.17, 0.19, 0.2, 0.22):
        reading = line_reading(share, 0.2, (share, share), 8)
        assert reading.reaches and reading.near
    clear_under = line_reading(0.14, 0.2, (0.12, 0.155), 8)
    assert not clear_under.reaches and not clear_under.near
    clear_over = line_reading(0.3, 0.2, (0.27, 0.33), 8)
    assert clear_over.reaches and not clear_over.near
    # No range read: the point alone decides, as before.
    assert not line_reading(0.19, 0.2, None, 1).reaches


def test_two_runs_either_side_of_the_on_core_line_give_one_verdict():
    # A loop thread on a core about half its own time (sleeps and compute alike), read over 100
    # steps at 48% and, in the next run, 52%: cpu-only in both, said as near the 50% line. On
    # main the first read host-bound (waiting), the second cpu-only.
    from tests.test_verdict_compute_evidence import CELL, _series, _steps

    verdicts = [
        syn.verdict(syn.make_run(CELL, steps=_steps(_series(share))), syn.make_analysis({}))
        for share in (0.48, 0.52)
    ]
    assert [v.category for v in verdicts] == ["cpu-only", "cpu-only"]
    assert all(_near(v, "50%") and v.confidence == "low" for v in verdicts)
    # Clear of it, each side as before.
    waiting = syn.make_run(CELL, steps=_steps(_series(0.2)))
    assert syn.verdict(waiting, syn.make_analysis({})).category == "host-bound"
