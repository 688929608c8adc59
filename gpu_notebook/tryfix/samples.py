"""Step-time samples of interleaved runs -> measured speedup, its spread, and a verdict.

The narrow interface ``compare_runs(baseline_runs, variant_runs)`` is what ``trials`` calls;
the analysis team's two-sample comparison (issue 22) is meant to replace the body, not the call.

Each run is a list of step times (seconds, warm-up left out). A run's typical step is its
mean: the run's throughput, which is what a fix promises (a loader with workers gives
bimodal steps, most instant and some waiting, whose median says nothing of the time the run
took); an arm's is the median of its runs' (one run disturbed by the machine does not
decide). Runs of one arm differ by more than steps of one run do (another process on the
machine, worker start-up, memory layout), so the interval comes from a two-level bootstrap: runs are
resampled within each arm, then steps within each drawn run. The interval is the central 95%
of the resampled ratios; the verdict says only what it excludes:

- ``verified``: every round's ratio is above 1 and the interval lies above 1;
- ``slower``: every round's ratio is below 1 and the interval lies below 1;
- ``no measurable effect``: anything else (the interval holds 1, or the rounds disagree).

The bootstrap's generator is seeded: the same samples always give the same verdict.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["BOOTSTRAP_DRAWS", "SampleComparison", "SampleVerdict", "compare_runs"]

SampleVerdict = Literal["verified", "no measurable effect", "slower"]

BOOTSTRAP_DRAWS = 2000
_LEVEL = 0.95


@dataclass(frozen=True)
class SampleComparison:
    speedup: float  # the baseline arm's typical step / the variant's (> 1: the variant is faster)
    low: float  # central 95% of the two-level bootstrap
    high: float
    per_round: tuple[float, ...]  # baseline run i's mean step / variant run i's
    verdict: SampleVerdict


def compare_runs(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    seed: int = 0,
) -> SampleComparison:
    """Compare two arms of runs (each a sequence of step times); ValueError on an empty run."""
    base = [list(r) for r in baseline_runs]
    var = [list(r) for r in variant_runs]
    if not base or not var or any(not r for r in base + var):
        raise ValueError("every arm needs at least one run with at least one step")
    speedup = _typical(base) / _typical(var)
    rounds = tuple(
        statistics.fmean(b) / statistics.fmean(v) for b, v in zip(base, var, strict=False)
    )
    rng = random.Random(seed)
    ratios = sorted(
        _typical(_resample(base, rng)) / _typical(_resample(var, rng))
        for _ in range(BOOTSTRAP_DRAWS)
    )
    tail = (1.0 - _LEVEL) / 2.0
    low = ratios[int(tail * (len(ratios) - 1))]
    high = ratios[int((1.0 - tail) * (len(ratios) - 1))]
    verdict: SampleVerdict = "no measurable effect"
    if low > 1.0 and all(r > 1.0 for r in rounds):
        verdict = "verified"
    elif high < 1.0 and all(r < 1.0 for r in rounds):
        verdict = "slower"
    return SampleComparison(speedup, low, high, rounds, verdict)


def _typical(runs: Sequence[Sequence[float]]) -> float:
    return statistics.median(statistics.fmean(r) for r in runs)


def _resample(runs: Sequence[Sequence[float]], rng: random.Random) -> list[list[float]]:
    drawn = [runs[rng.randrange(len(runs))] for _ in runs]
    return [[r[rng.randrange(len(r))] for _ in r] for r in drawn]
