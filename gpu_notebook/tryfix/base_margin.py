"""What two runs of the script differ by in this trial, read from its interleaved base runs.

A finding's range is widened by the margin of the one run the report profiled
(``Finding.gain_margin``, ``compare_samples.run_margin``: the spread of that run's fifths). On a
shared machine that one figure swings from +-5% to +-82% between two runs of the same code (the
fix ledger's gru_python_steps, nanogpt_shaped: 0.1 to 0.7 with one other busy process), and with
it the range a trial's measurement is read against. A trial runs the script as it is several
times, interleaved with the fixes (its base arm): how much those runs differ is the run-to-run
margin of this trial, measured on the machine as it was while the fixes ran.

``base_margin`` reads it as the median over every pair of base runs of how far apart their
figures are (each run's mean step, as compared: own times, at one mix of work,
``tryfix.trials._compared``), at least ``RUN_TO_RUN``: the typical difference between two runs
of the script, which one disturbed run among five does not move (it is in 4 of the 10 pairs).
Fewer than ``MIN_MARGIN_RUNS`` base runs with steps (one run: no pair to read): the profiled
run's margin, said so.

The trial reads a fix's stated range with it (the model's widened on both sides, as
``Finding.stated_low``/``stated_high``), and the planned look's interval is widened by it in
place of the fixed 5% (``samples.compare_runs``): a gain within what two runs of the script
differ by here is not called at the planned look, it is left to the added rounds, whose paired
interval measures the rounds' own spread (``sequential``). Pure: the same runs give the same
margin.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.records import Finding
from gpu_notebook.records import TrialMarginSource as MarginSource

__all__ = [
    "MIN_MARGIN_RUNS",
    "MarginSource",
    "TrialMargin",
    "base_margin",
    "restated",
    "too_small_here",
]

# Fewer base runs than this: the profiled run's margin. Two runs are one pair, one draw of what
# two runs differ by, and a 2-round trial (the least a fix is measured with: a tight budget)
# has them; read with the profiled run's margin instead, every such trial on a run whose fifths
# spread by +-155% (the H200 report's) stayed undecided where the 5% decided it.
MIN_MARGIN_RUNS = 2


@dataclass(frozen=True)
class TrialMargin:
    """The margin a trial reads its fix with, and where it comes from."""

    margin: float  # at least RUN_TO_RUN: what two runs of the script may differ by
    source: MarginSource
    runs: int  # base runs with steps (source "profiled run": too few of them)
    # The base runs' own median difference before the 5% floor (None: fewer than 2 runs).
    spread: float | None
    profiled: float  # the profiled run's margin (``Finding.gain_margin``), said beside it


def base_margin(base_runs: Sequence[Sequence[float]], profiled: float) -> TrialMargin:
    """The trial's margin from the script's runs (each its steps, as compared): the median over
    every pair of runs of their figures' ratio (larger over smaller) less 1, at least
    ``RUN_TO_RUN``; the profiled run's (``profiled``, at least ``RUN_TO_RUN``) where fewer than
    ``MIN_MARGIN_RUNS`` runs have steps."""
    figures = [statistics.fmean(r) for r in base_runs if r]
    figures = [f for f in figures if f > 0 and math.isfinite(f)]
    spread = None
    if len(figures) >= 2:
        logs = [math.log(f) for f in figures]
        apart = [abs(a - b) for a, b in itertools.combinations(logs, 2)]
        spread = math.exp(statistics.median(apart)) - 1.0
    if spread is None or len(figures) < MIN_MARGIN_RUNS:
        return TrialMargin(max(RUN_TO_RUN, profiled), "profiled run", len(figures), spread,
                           profiled)  # fmt: skip
    return TrialMargin(max(RUN_TO_RUN, spread), "base runs", len(figures), spread, profiled)


def restated(finding: Finding, margin: TrialMargin) -> Finding:
    """The finding with its range widened by the trial's margin (its model's ends unchanged;
    ``stated_low``/``stated_high`` read from it, the high end no further than its ceiling); as
    it is where the margin is the profiled run's (its range was widened by that already)."""
    if margin.source != "base runs":
        return finding
    return dataclasses.replace(finding, gain_margin=margin.margin)


def too_small_here(finding: Finding, margin: TrialMargin) -> bool:
    """Whether the most the finding's fix can give (its model's high end, never the margin's
    widening of it) is within what this trial's runs of the script differ by: the planned look
    cannot tell such a gain from none, and the added rounds only where their spread is far under
    the runs' (issue 26's ledger under load: lbfgs_closure's log_every_n "up to 1.07x" against
    runs 13% apart, 1.00x undecided after 8 rounds). A trial of it that ends undecided, or with
    no measurable effect (up to 1.06x against runs 10% apart: 0.91x), says so with both
    numbers, "too small to measure" here, not a verdict on the fix. No bound: not judged."""
    bound = finding.gain_bound
    return bound is not None and bound <= 1.0 + margin.margin
