"""When a fix has been measured enough: the verdict at each look, planned rounds then added ones.

A fix whose measured interval holds both 1x and its predicted gain is *undecided*, not "no
measurable effect": 5 rounds of 60 steps read nanoGPT's fused AdamW (predicted 1.07x-1.18x) as
1.07x, 0.98x-1.16x. ``trials`` then keeps adding interleaved rounds (the script as it is and the
undecided fixes only, the order reversed every other round) while the budget allows and up to
``MAX_ADDED_ROUNDS``, and looks again after each one, stopping a fix as soon as it is decided.

Which interval each look reads:

- **the planned look** (after the planned rounds) reads ``samples.compare_runs``: the median
  of the rounds' ratios, its bootstrap interval widened by the run-to-run margin (what the
  planned rounds' runs of the script differ by, at least 5%: ``base_margin``), most
  rounds agreeing, and (from 3 rounds) the rounds' own interval at the same 90% backing the
  call. Its "no measurable
  effect" is split into that (the interval leaves the predicted range out) and "undecided".
- **an added look** reads the rounds as paired samples (``samples.trimmed_round_interval``:
  from 5 rounds, the Tukey-McLaughlin interval of the 20% trimmed mean of the rounds' log
  ratios; below 5, ``samples.round_interval``'s Student t over them all; the figure said is the
  rounds' median, as at the planned look). Trimmed, one far-out round (a run another process
  slowed by a third) is not read as the rounds' spread: with Student t over every round it held
  1x at every look (nanoGPT's rounds with a 1.43x first round: verified after 7 added rounds, a
  1.6x one: undecided at the cap; trimmed: after 1-2). ``benchmarks/round_estimator.py
  --added`` (seeded, 300 trials, one round of the first three with a run slowed 35-45%): a
  1.07x fix verified 25%/39% -> 78%/95% (3/5 planned rounds), a null fix "no measurable
  effect" 49%/66% -> 86%/95%; its cost under uniform load: a 1.07x fix verified 95%/97% ->
  89%/96%, a null fix called verified 0%/1% -> 1%/0%. Since "no measurable effect" must leave
  out the model's gain and the planned look's rounds must back it (2026-12-06): the 1.07x fix
  called "no measurable effect" 4%/1% (far-out) -> 0%, verified 78%/95% -> 80%/96%; the cost,
  more rounds for a null fix: "no measurable effect" 86%/95% -> 80%/94% after 6.5/4.6 added
  rounds (3.5/2.2 before), 97%/99% -> 93%/96% under uniform load. Adding rounds to the steps' interval cannot settle a
  small gain: its fixed 5% on each side never shrinks, so a true 1.07x could only ever read
  "verified" by luck. Interleaving makes the run-to-run difference a random effect within each
  round (the A/B order alternates), which the rounds' spread measures and which narrows with
  their number. verified: low > 1; slower: high < 1; no measurable effect: high under the
  model's low end (an "up to" range: under the 5%; ``compare_samples.ruled_out``); else
  undecided. ``rounds_to_decide`` says about how many rounds an undecided fix would need at the
  spread its rounds show.

Repeated looks inflate false calls (a fix with no effect, looked at ten times, crosses a 95%
bound more often than once in twenty). The rule: a fixed maximum of added looks, each at a
Bonferroni-corrected level, ``ADDED_LOOKS_ALPHA`` two-sided shared equally by the
``MAX_ADDED_ROUNDS`` looks (each at 1 - 0.05/10 = 99.5%, one side 0.25%). Whatever number of
looks is actually taken, the chance that a fix with no effect is called verified over all the
added looks is at most 2.5%, on top of the planned look's own. In a seeded simulation of null
fixes (5 planned rounds of 60 steps, 10% step noise, runs differing by 3% and one in five slowed
by up to 30%), 3.3% read verified at the planned look (7.8% before it asked the rounds' interval
to back the pooled one: the pooled steps do not see how much whole runs differ) and 0.25% more
at the added looks. Bonferroni over the cap,
rather than alpha spending over the rounds actually run, because the number of looks is set by
the budget, which is known only as the runs go; it is conservative, and the cost is power: a fix
needs its rounds' t interval at 99.5%, e.g. a 1.07x gain whose rounds spread by 2.6% (nanoGPT's
five rounds: 1.04, 1.04, 1.09, 1.07, 1.10) is verified after one to three added rounds.

Pure: the same samples give the same looks and the same verdict; ``decide`` replays them from the
runs a trial recorded (the JSON report carries them), so a report's verdict can be checked.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN, ruled_out
from gpu_notebook.tryfix.base_margin import TrialMargin, base_margin
from gpu_notebook.tryfix.samples import (
    TRIM,
    SampleVerdict,
    compare_runs,
    per_round,
    round_interval,
    t_quantile,
    trimmed_round_interval,
)

__all__ = [
    "ADDED_LOOKS_ALPHA",
    "MAX_ADDED_ROUNDS",
    "Decision",
    "RoundsNeeded",
    "added_level",
    "decide",
    "rounds_to_decide",
]

MAX_ADDED_ROUNDS = 10  # the cap on added rounds (and looks) per fix
ADDED_LOOKS_ALPHA = 0.05  # two-sided, shared by the added looks (Bonferroni over the cap)


def added_level() -> float:
    """The two-sided level each added look's interval is read at."""
    return 1.0 - ADDED_LOOKS_ALPHA / MAX_ADDED_ROUNDS


@dataclass(frozen=True)
class Decision:
    verdict: SampleVerdict
    speedup: float
    low: float
    high: float
    per_round: tuple[float, ...]
    rounds: int  # rounds read (pairs of runs)
    added_rounds: int  # of them, rounds added after the planned ones
    level: float | None  # None: the planned look's interval of the median; else the t level
    # What the planned rounds' runs of the script differ by (``base_margin``): the planned
    # look's interval is widened by it, and the trial's range read with it.
    margin: TrialMargin


def decide(
    baseline_runs: Sequence[Sequence[float]],
    variant_runs: Sequence[Sequence[float]],
    planned_rounds: int,
    model_low: float | None,
    seed: int = 0,
    busy: bool = False,
    profiled_margin: float = 0.0,
) -> Decision | None:
    """The verdict the looks reach on these runs (run i of each arm: round i): the planned look
    on the first ``planned_rounds``, then one look per added round up to the cap, stopping at the
    first decided look. None: too few steps to compare. ``busy``: the arms were too busy to
    judge (``samples.compare_runs``): the planned look needs its rounds' interval. The planned
    look's interval is widened by what the planned rounds' runs of the script differ by
    (``base_margin``; ``profiled_margin``, the profiled run's, where they are too few): the
    same runs whenever the fix is looked at, so the look that asked for added rounds and the
    verdict after them read one margin."""
    base = [tuple(r) for r in baseline_runs]
    var = [tuple(r) for r in variant_runs]
    planned = min(planned_rounds, len(base), len(var))
    margin = base_margin(base[:planned], profiled_margin)
    first = compare_runs(base[:planned], var[:planned], seed=seed, model_low=model_low, busy=busy,
                         margin=margin.margin)  # fmt: skip
    if first is None:
        return None
    look = Decision(first.verdict, first.speedup, first.low, first.high, first.per_round,
                    len(first.per_round), 0, None, margin)  # fmt: skip
    available = min(len(base), len(var)) - planned
    for added in range(1, min(available, MAX_ADDED_ROUNDS) + 1):
        if look.verdict != "undecided":
            break
        n = planned + added
        look = _added_look(look, base[:n], var[:n], added, model_low)
    return look


def _added_look(
    previous: Decision,
    base: Sequence[Sequence[float]],
    var: Sequence[Sequence[float]],
    added: int,
    model_low: float | None,
) -> Decision:
    level = added_level()
    rounds = per_round(base, var)
    # From 5 rounds the trimmed mean's interval (one far-out round is trimmed, not read as the
    # rounds' spread); below, nothing to trim: Student t over every round.
    interval = trimmed_round_interval(base, var, level) or round_interval(base, var, level)
    if interval is None:  # fewer than 3 rounds with steps: the last reading stands, undecided
        return dataclasses.replace(previous, rounds=len(rounds), added_rounds=added)
    # The figure said is the rounds' median, as at the planned look (one disturbed round does
    # not move it; the t interval's centre, their geometric mean, it moves by its share). The
    # t interval holds it but where the rounds split in two far-apart groups (past 12 rounds at
    # the corrected level): then it is widened to hold it, never narrowed.
    _centre, low, high = interval
    point = statistics.median(rounds)
    low, high = min(low, point), max(high, point)
    verdict: SampleVerdict = "undecided"
    if low > 1.0:
        verdict = "verified"
    elif high < 1.0:
        verdict = "slower"
    elif ruled_out(high, model_low, 1.0 + RUN_TO_RUN):
        verdict = "no measurable effect"
    return Decision(verdict, point, low, high, rounds, len(rounds), added, level, previous.margin)


@dataclass(frozen=True)
class RoundsNeeded:
    """What an undecided fix's rounds say of the noise against its gain (``rounds_to_decide``)."""

    spread: float  # the rounds' ratios' standard deviation, as a factor less 1 (0.09: 9%)
    gain: float  # the gain to tell from none, less 1: the model's low end (else the 5%)
    rounds: int | None  # about how many rounds in all would decide it; None: none would


# Past this many degrees of freedom Student t's quantile is read from the normal's (Cornish-
# Fisher's first term): the exact CDF's series grows with df.
_NORMAL_DF = 100


def rounds_to_decide(per_round: Sequence[float], model_low: float | None) -> RoundsNeeded | None:
    """About how many rounds an undecided fix would need at the spread its rounds show: the
    fewest ``n`` whose added look's interval (Student t at ``added_level`` over ``n`` rounds'
    log ratios, this standard deviation) is narrower than the gap between 1x and the model's
    gain, so that it can no longer hold both (it lies above 1x, or under the gain: decided
    either way). The gain is the model's low end (an "up to" range: the 5% any look needs).
    ``rounds`` None: the gain is at or under 1x, which no number of rounds tells from none.
    None: fewer than 3 rounds, no spread to read.

    An estimate, said as one: the spread is read from a few rounds (the trimmed interval's
    winsorized spread is taken to be theirs)."""
    logs = [math.log(r) for r in per_round if r > 0]
    if len(logs) < 3:
        return None
    sd = statistics.stdev(logs)
    threshold = model_low if model_low is not None else 1.0 + RUN_TO_RUN
    gap = math.log(threshold) if threshold > 0 else 0.0
    spread, gain = math.exp(sd) - 1.0, threshold - 1.0
    if gap <= 0:
        return RoundsNeeded(spread, gain, None)
    if sd == 0:
        return RoundsNeeded(spread, gain, len(logs))
    p = 1 - (1 - added_level()) / 2
    z = statistics.NormalDist().inv_cdf(p)
    # t's quantile is above the normal's and the trimmed interval wider than t's: the normal's
    # count is the least it can be.
    n = max(3, math.ceil((2 * z * sd / gap) ** 2))
    while 2 * _half_width(n, sd, p) >= gap:
        n += 1
    return RoundsNeeded(spread, gain, n)


def _half_width(n: int, sd: float, p: float) -> float:
    """The half width (in logs) of the interval an added look reads over ``n`` rounds of this
    spread: the trimmed mean's from 5 rounds (its winsorized spread taken as ``sd``), Student
    t's below (``samples.trimmed_round_interval``, ``samples.round_interval``)."""
    g = int(TRIM * n)
    if g < 1 or n - 2 * g < 2:
        return _t(p, n - 1) * sd / math.sqrt(n)
    return _t(p, n - 2 * g - 1) * sd / ((1 - 2 * TRIM) * math.sqrt(n))


def _t(p: float, df: int) -> float:
    if df <= _NORMAL_DF:
        return t_quantile(p, df)
    z = statistics.NormalDist().inv_cdf(p)
    return z + (z**3 + z) / (4 * df)
