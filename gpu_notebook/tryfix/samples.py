"""Step-time samples of interleaved runs -> measured speedup, its spread, and a verdict.

``compare_runs(baseline_runs, variant_runs)`` is what ``trials`` calls. The comparison itself is
the team's two-sample one (``analysis.compare_samples``: throughput from the mean step, a seeded
moving-block bootstrap interval widened by the run-to-run margin, the fix outcome), over each
arm's runs pooled; the notebook's before/after reads the same function. Interleaving adds what
one before/after cannot have: several runs of each arm side by side, so a gain that only one
disturbed round carries (another process took the cores during a baseline run) is seen:

- ``verified``: the pooled comparison says faster and most rounds' ratios are above 1;
- ``slower``: it says slower and most rounds' ratios are below 1;
- ``no measurable effect``: anything else.

Most, not every: on a shared machine one round in three can be disturbed either way (seen on a
2-core machine at load 9 with other test suites running), and the pooled interval already
carries the run-to-run margin.

A run's figure is its mean step (its throughput, what a fix promises: a loader with workers
gives bimodal steps whose median says nothing of the run's time). Seeded: the same samples
always give the same verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.compare_samples import compare_samples, fix_outcome

__all__ = ["SampleComparison", "SampleVerdict", "compare_runs"]

SampleVerdict = Literal["verified", "no measurable effect", "slower"]


@dataclass(frozen=True)
class SampleComparison:
    speedup: float  # the baseline's mean step / the variant's (> 1: the variant is faster)
    low: float  # the interval of analysis.compare_samples (run-to-run margin included)
    high: float
    per_round: tuple[float, ...]  # baseline run i's mean step / variant run i's
    verdict: SampleVerdict


def compare_runs(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    seed: int = 0,
) -> SampleComparison | None:
    """Compare two arms of runs (each a sequence of step times). None: too few steps to say."""
    base = [list(r) for r in baseline_runs if r]
    var = [list(r) for r in variant_runs if r]
    if not base or not var:
        return None
    pooled = compare_samples([x for r in base for x in r], [x for r in var for x in r], seed=seed)
    if pooled is None:
        return None
    rounds = tuple(
        statistics.fmean(b) / statistics.fmean(v) for b, v in zip(base, var, strict=False)
    )
    verdict: SampleVerdict = fix_outcome(pooled)
    faster = sum(r > 1.0 for r in rounds)
    slower = sum(r < 1.0 for r in rounds)
    if (verdict == "verified" and 2 * faster <= len(rounds)) or (
        verdict == "slower" and 2 * slower <= len(rounds)
    ):
        verdict = "no measurable effect"
    return SampleComparison(pooled.speedup, pooled.low, pooled.high, rounds, verdict)
