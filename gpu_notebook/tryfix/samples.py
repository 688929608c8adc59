"""Step-time samples of interleaved runs -> measured speedup, its spread, and a verdict.

``compare_runs(baseline_runs, variant_runs)`` is the planned rounds' reading (``sequential``
decides when more rounds are needed). A run's figure is its mean step; a round's ratio is the
baseline run's mean step over the variant run's (``per_round``: the two ran side by side); the
speedup is the median of the rounds' ratios, with an interval around it (``median_of_rounds``:
the spread of the team's two-sample comparison, ``analysis.compare_samples``, over each arm's
steps pooled, moved to the median, widened on each side by what the trial's runs of the script
as it is differ by: ``tryfix.base_margin``, at least the 5%), read as the notebook's
before/after reads its interval (``compare_samples.fix_outcome``). The median, not
the steps of every round pooled: on a shared machine one round can be hit by another process,
and the answer should not move with one round (``benchmarks/round_estimator.py``, seeded: one
round of three or five with a run slowed 20%-50%, the pooled figure lands within 5% of the true
1.07x in 4%/23% of trials, the median in 78%/93%, under uniform load 99%/100% against 93%/98%;
such a 1.07x fix read "no measurable effect" in 45%/34% of the trials, now 5%/0%).
Interleaving adds what one before/after cannot have: several runs of each arm side by side, so
a gain that only one disturbed round carries is seen:

- ``verified``: the interval lies above 1, most rounds' ratios are above 1, and (from 3 rounds)
  the rounds' own interval at the same level (``round_interval``) lies above 1;
- ``slower``: the same, below 1;
- ``no measurable effect``: the interval leaves out the fix's model gain (its model's low end;
  an "up to" range: any gain a before/after can show; ``compare_samples.ruled_out``), and
  (from 3 rounds) so does the rounds' own interval;
- ``undecided``: anything else: the interval holds both 1x and the model's gain, or the
  steps' reading and most rounds disagree. More rounds settle it (``sequential``).

Most, not every: on a shared machine one round in three can be disturbed either way (seen on a
2-core machine at load 9 with other test suites running), and the interval already carries the
run-to-run margin.

``round_interval`` is the other reading of the same runs: each round's ratio (baseline run i's
mean step over variant run i's) as one paired sample, a Student t interval over their logs.
Its spread is the run-to-run difference itself, measured, so it narrows as rounds are added,
where the steps' interval keeps its margin on each side.

A run's figure is its mean step (its throughput, what a fix promises: a loader with workers
gives bimodal steps whose median says nothing of the run's time); the median is taken over
rounds only. Seeded: the same samples always give the same verdict.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.compare_samples import (
    LEVEL,
    RUN_TO_RUN,
    compare_samples,
    fix_outcome,
    ruled_out,
)
from gpu_notebook.records import SampleComparison as Read

__all__ = [
    "TRIM",
    "SampleComparison",
    "SampleVerdict",
    "compare_runs",
    "median_of_rounds",
    "per_round",
    "round_interval",
    "t_quantile",
    "trimmed_round_interval",
]

SampleVerdict = Literal["verified", "no measurable effect", "slower", "undecided"]


@dataclass(frozen=True)
class SampleComparison:
    speedup: float  # the median of the rounds' ratios (> 1: the variant is faster)
    low: float  # its interval (median_of_rounds: run-to-run margin included)
    high: float
    per_round: tuple[float, ...]  # baseline run i's mean step / variant run i's
    verdict: SampleVerdict


def compare_runs(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    seed: int = 0,
    model_low: float | None = None,
    busy: bool = False,
    margin: float = RUN_TO_RUN,
) -> SampleComparison | None:
    """Compare two arms of runs (each a sequence of step times). None: too few steps to say.
    ``model_low``: the low end of the fix's range as its model gives it (``Finding.gain_low``;
    None: an "up to" range), what "no measurable effect" must leave out
    (``compare_samples.ruled_out``). ``busy``: an arm's runs waited for a core as a verdict
    calls too busy to judge (``compare_samples``): their steps are the machine's more than the
    code's, so only the rounds' own interval (from 3 rounds) can make a call. ``margin``: what
    two runs of the script differ by in this trial (``base_margin``; at least ``RUN_TO_RUN``),
    which the steps' interval is widened by on each side."""
    base = [list(r) for r in baseline_runs if r]
    var = [list(r) for r in variant_runs if r]
    if not base or not var:
        return None
    median = median_of_rounds(base, var, seed=seed, margin=margin)
    if median is None:
        return None
    point, low, high = median
    rounds = per_round(base, var)
    outcome: Literal["faster", "no measurable change", "slower"] = (
        "faster" if low > 1.0 else "slower" if high < 1.0 else "no measurable change"
    )
    steps = (sum(len(r) for r in base), sum(len(r) for r in var))
    read = Read(point, low, high, outcome, *steps, plain_speedup=point)
    verdict: SampleVerdict = fix_outcome(read, model_low)
    faster = sum(r > 1.0 for r in rounds)
    slower = sum(r < 1.0 for r in rounds)
    if (verdict == "verified" and 2 * faster <= len(rounds)) or (
        verdict == "slower" and 2 * slower <= len(rounds)
    ):
        verdict = "undecided"  # the steps and most rounds disagree
    # The steps' interval does not see how much whole runs differ; the rounds' own interval
    # (same level) does. A call it does not back is left to added rounds: "no measurable
    # effect" too, which says the runs leave the fix's gain out (gru_python_steps' fused update,
    # rounds 1.06, 0.77, 0.96, 1.03: its steps' interval 0.90x-1.09x, its rounds' reaches 1.12x).
    paired = round_interval(base, var, LEVEL) if verdict != "undecided" else None
    if paired is not None and not _backs(verdict, paired[1], paired[2], model_low):
        verdict = "undecided"
    if busy and paired is None:
        verdict = "undecided"  # two too-busy rounds: no spread of whole runs to read
    return SampleComparison(point, low, high, rounds, verdict)


def _backs(verdict: SampleVerdict, low: float, high: float, model_low: float | None) -> bool:
    """Whether the rounds' interval (not widened: the run-to-run difference is its spread)
    makes the same call as the steps'."""
    if verdict == "verified":
        return low > 1.0
    if verdict == "slower":
        return high < 1.0
    return ruled_out(high, model_low, 1.0 + RUN_TO_RUN)


def median_of_rounds(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    seed: int = 0,
    margin: float = RUN_TO_RUN,
) -> tuple[float, float, float] | None:
    """(speedup, low, high): the median of the rounds' ratios (``per_round``) and its interval:
    the steps' interval (``analysis.compare_samples`` over each arm's steps pooled: seeded
    moving-block bootstrap, widened by ``margin`` on each side, at least ``RUN_TO_RUN``: what
    two runs of the script differ by, ``base_margin``), its spread kept, moved to the median
    (both ends times median / pooled figure). None: too few steps in the rounds both arms ran.

    The median, not the pooled steps' figure: one round whose run another process slowed moves
    the pooled mean (grad_penalty_clip's fused Adam, rounds 1.43, 1.05, 1.06, 1.12, 1.09, read
    1.15x pooled over its 1.02x-1.12x; rerun alone 1.06x) and leaves the median of three or more
    rounds where the others are (``benchmarks/round_estimator.py``). The spread, the pooled
    steps': the same interval resampled as a median of rounds reads only a round or two's steps
    and comes out wider than the rounds themselves differ (subset_eval_break's fused update,
    rounds 1.23x-1.29x: 0.96x-1.63x), where the pooled steps' held 1.02x-1.58x. How much whole
    runs differ is the rounds' own interval's to say (``round_interval``)."""
    pairs = [(b, v) for b, v in zip(baseline_runs, variant_runs, strict=False) if b and v]
    pooled = compare_samples(
        [x for b, _ in pairs for x in b], [x for _, v in pairs for x in v], seed=seed
    )
    if pooled is None:
        return None
    point = statistics.median(statistics.fmean(b) / statistics.fmean(v) for b, v in pairs)
    moved = point / pooled.speedup
    # compare_samples widened its ends by the 5%; a trial whose runs of the script differ by
    # more widens them by that instead.
    wider = (1.0 + max(RUN_TO_RUN, margin)) / (1.0 + RUN_TO_RUN)
    # Moved, the ends hold the median as the pooled ends held the pooled figure; where the
    # bootstrap's ends did not hold its own figure (a few steps), the interval is widened to.
    low, high = pooled.low * moved / wider, pooled.high * moved * wider
    return point, min(point, low), max(point, high)


def per_round(
    baseline_runs: Sequence[Sequence[float]], variant_runs: Sequence[Sequence[float]]
) -> tuple[float, ...]:
    """Baseline run i's mean step over variant run i's, for each round both arms ran."""
    return tuple(
        statistics.fmean(b) / statistics.fmean(v)
        for b, v in zip(baseline_runs, variant_runs, strict=False)
        if b and v
    )


def round_interval(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    level: float,
) -> tuple[float, float, float] | None:
    """(speedup, low, high): the geometric mean of the rounds' ratios and its two-sided Student t
    interval at ``level`` over their logs. None: fewer than 3 rounds (no spread to read)."""
    logs = [math.log(r) for r in per_round(baseline_runs, variant_runs) if r > 0]
    if len(logs) < 3:
        return None
    mean = statistics.fmean(logs)
    half = t_quantile(1 - (1 - level) / 2, len(logs) - 1) * statistics.stdev(logs)
    half /= math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def trimmed_round_interval(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    level: float,
) -> tuple[float, float, float] | None:
    """(speedup, low, high): the 20% trimmed mean of the rounds' log ratios and its two-sided
    Tukey-McLaughlin interval at ``level`` (Wilcox, *Introduction to Robust Estimation*, 4.4:
    standard error from the winsorized variance, ``s_w / ((1 - 2 * 0.2) * sqrt(n))``, Student t
    with ``n - 2g - 1`` degrees of freedom, ``g = floor(0.2 n)`` rounds trimmed at each end).
    One far-out round is trimmed, and counted at the next round's value in the spread, so it
    neither moves the centre nor widens the interval as it widens ``round_interval``'s. None:
    fewer than 5 rounds (nothing trimmed: ``round_interval`` is that reading)."""
    logs = sorted(math.log(r) for r in per_round(baseline_runs, variant_runs) if r > 0)
    n = len(logs)
    g = int(TRIM * n)
    if g < 1 or n - 2 * g < 2:
        return None
    centre = statistics.fmean(logs[g : n - g])
    winsorized = [logs[g]] * g + logs[g : n - g] + [logs[n - g - 1]] * g
    half = t_quantile(1 - (1 - level) / 2, n - 2 * g - 1) * statistics.stdev(winsorized)
    half /= (1 - 2 * TRIM) * math.sqrt(n)
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


TRIM = 0.2  # the share of rounds trimmed at each end (Wilcox's default)


def t_quantile(p: float, df: int) -> float:
    """Student t's quantile for ``0.5 <= p < 1`` and integer ``df`` >= 1, by bisection of its
    CDF (closed form for integer df, Abramowitz & Stegun 26.7.3-4): no scipy in the package."""
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def _t_cdf(t: float, df: int) -> float:
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        total = term = c if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c * c * (2 * k) / (2 * k + 1)
            total += term
        within = 2 / math.pi * (theta + s * total)
    else:
        total = term = 1.0
        for k in range(1, df // 2):
            term *= c * c * (2 * k - 1) / (2 * k)
            total += term
        within = s * total
    return 0.5 + 0.5 * within
