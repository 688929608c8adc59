"""Figures that decide a verdict carry their range; a verdict within it says both."""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.uncertainty import share_interval
from gpu_notebook.records import PhaseBreakdown, StepPhases
from tests.scenarios import synthetic as syn


def _split(data_shares: list[float], step_us: float = 10_000.0) -> PhaseBreakdown:
    steps = tuple(
        StepPhases(i, i * step_us, step_us, {"data": d * step_us, "forward": (1 - d) * step_us})
        for i, d in enumerate(data_shares)
    )
    return PhaseBreakdown(
        source="hooks",
        steps=steps,
        total_us=step_us * len(steps),
        phase_total_us={
            "data": sum(s.phase_us["data"] for s in steps),
            "forward": sum(s.phase_us["forward"] for s in steps),
        },
        measured=("data", "forward", "backward", "optimizer", "other"),
    )


def test_the_range_is_seeded_and_holds_the_share():
    split = _split([0.1, 0.3, 0.15, 0.25, 0.2, 0.12, 0.28])
    span = share_interval(split, "data")
    assert span is not None and span == share_interval(split, "data")
    assert span[0] < 0.2 < span[1]
    assert share_interval(split, "sync") is None  # not measured: no range, never zero


def test_a_data_wait_across_the_input_bound_line_says_both_verdicts():
    noisy = _split([0.05, 0.4, 0.1, 0.35, 0.15, 0.3, 0.05, 0.38])  # 22% over 8 steps
    analysis = syn.make_analysis(phase_split=noisy)
    verdict = syn.verdict(syn.make_run(""), analysis)
    assert verdict.confidence == "low"
    note = next(e for e in verdict.evidence if "across the 20% line" in e)
    assert "within the uncertainty" in note and "more steps" in note


def test_a_steady_data_wait_well_past_the_line_is_one_verdict():
    steady = _split([0.6, 0.62, 0.58, 0.61, 0.6, 0.59])
    verdict = syn.verdict(syn.make_run(""), syn.make_analysis(phase_split=steady))
    assert verdict.category in ("input-bound", "cpu-only")
    assert not any("across the" in e for e in verdict.evidence)
    assert dataclasses.replace(verdict).confidence != "low"
