"""Two runs' step times compared as distributions: the speedup as a range, and what it means.

One run is one sample of a noisy measurement. A before/after that divides two means says
"2.55x" when the machine merely got quieter between the cells. Here:

- the speedup is throughput after over throughput before (samples/s, steps/s when the batch is
  unknown) from each run's step figure (``run_step``: the median of its fifths' mean steps, so a
  burst of another process's load over a stretch of steps does not carry it; the mean step in a
  short run), with a *seeded* moving-block bootstrap interval of the mean steps moved to that
  figure (steps are not independent: two DataLoader workers make them alternate, a checkpoint
  repeats, so blocks of neighbouring steps are resampled together); the same inputs give the
  same range every time;
- two separate runs differ even when nothing changed (caches, clocks, the allocator):
  ``RUN_TO_RUN`` widens the interval by that much on each side before it is read;
- when the steps carry the machine's load (other processes' cores, analysis.interference),
  steps taken under similar load are compared when both runs have enough of them; when they
  do not and the load moved in the direction of the change (busier after and slower, quieter
  after and faster), the change cannot be told from the machine's: "no measurable change";
- where either run's steps waited for a core as much as a verdict calls too busy to judge
  (``wait_shares``, ``analysis.too_busy.TOO_BUSY_WAIT``), the outcome is "undecided" whatever
  the range reads: the figures are the machine's more than the code's (an lr-only change in an
  unseen notebook read 0.44x "slower" and 1.29x from two such pairs, the others' load equal).

``outcome`` reads "faster" / "no measurable change" / "slower" / "undecided"; ``fix_outcome`` maps it to what a
fix earns: "verified" / "no measurable effect" / "slower", or "undecided" when the range holds
both 1x and the fix's model gain (a no-change reading that could not have shown the gain).
Pure numbers in, a record out: no report, no view, so ``--try-fixes`` and the notebook's
before/after share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from gpu_notebook.records import Finding, SampleComparison

__all__ = [
    "LEVEL",
    "LOAD_CHANGE_CORES",
    "MIN_STEPS",
    "RUN_TO_RUN",
    "compare_samples",
    "fix_outcome",
    "measurable",
    "ruled_out",
    "run_margin",
    "run_step",
    "uncertain",
]

# Two runs of the same code on the same machine differ by a few percent even on a quiet
# machine (measured in benchmarks/stability.py: same-code reruns within +-4%); a change inside
# this margin is not a measured change.
RUN_TO_RUN = 0.05
# Fewer steady steps than this in a run: no interval can be read from it.
MIN_STEPS = 5
# Other processes' load (in cores) moved by at least this much between the runs: a changed machine.
LOAD_CHANGE_CORES = 0.25
# Similar load: steps whose others' load is within this many cores of each other.
SIMILAR_LOAD_CORES = 0.25
LEVEL = 0.9
RESAMPLES = 1000


def measurable(finding: Finding) -> bool:
    """Whether a run could show the finding's fix deliver at all: the high end of its gain
    range (the model's bound) is above what two runs of the same code differ by. A fix bounded
    under that margin is small: it may have no measurable effect, is said at severity info, not
    recommended and not tried (``rules._small_gain``, ``tryfix.plan``). Not bounded (None): not
    judged. A range whose high end is above the margin and whose low end is not is
    ``uncertain``, not small: it is what ``--try-fixes`` measures.

    The bound is judged with its own uncertainty where the rule gave it (``Finding.bound_low``:
    the least it reads within its shares' 90% interval): a line at a point figure that moves
    with the machine's load would flip the class between two runs of the same code (a bigger
    batch's 1.04x [info] Small quiet, 1.05x [low] loaded). A bound whose interval reaches the
    line is small in both: the run cannot tell it from the 5%."""
    bound = finding.gain_bound
    if bound is None:
        return True
    if finding.bound_low is not None:
        bound = min(bound, finding.bound_low)
    return bound > 1.0 + RUN_TO_RUN


def uncertain(finding: Finding) -> bool:
    """A measurable fix whose model's low end reaches down to what two runs of this code differ
    by (the 5%, or the run's own margin where larger, ``Finding.gain_margin``): it may deliver up
    to its bound, or nothing a run can show (the H200 input-bound script's workers fix:
    1.01x-12.04x; a 1.06x-1.09x fix on a run whose fifths differ by 12%). It keeps its finding's
    severity and says the range is uncertain; ``--try-fixes`` tries it, and only a measurement
    makes it recommended.

    A range without an estimated low end ("up to Hx": 1x to H) is judged by its high end: where
    H itself is within the run's own margin (up to 1.07x on a run whose fifths differ by 12%),
    its whole range is what two runs differ by here. Where the margin is the 5% alone, such a
    range is small (``measurable``) or offered as it is."""
    if not measurable(finding):
        return False
    margin = max(RUN_TO_RUN, finding.gain_margin)
    if finding.gain_low is None:
        return finding.gain_bound is not None and finding.gain_bound <= 1.0 + margin
    return finding.gain_low <= 1.0 + margin


# A run's fifths: five short runs of the same code under the machine's load of the moment.
MARGIN_PARTS = 5
# Fewer steady steps than this a part: the run's own spread is not read (the 5% margin alone).
MARGIN_PART_STEPS = 3


def run_margin(step_s: Sequence[float]) -> float | None:
    """What two runs of this code may differ by on this machine, read from one run's steps
    (each net of its thread's wait for a core where read: ``analyze.margin_step_s``): the spread
    of the median step between the run's fifths (the slowest fifth's over the fastest's, less 1),
    at least ``RUN_TO_RUN``. A fix's predicted range is widened by it on both sides
    (``Finding.stated_low``/``stated_high``): a measurement of the fix is two sets of such runs,
    and the machine's load moves each as it moved the fifths. Each fifth's step is its trimmed
    mean (``MARGIN_TRIM`` of its steps cut at each end): a rare stall of the code's own (in
    every run alike) does not count as a difference between runs, and steps of two kinds (every
    other step waits for 2 workers' batches) do not flip a fifth between them as a median does
    (such a run's fifths' medians read 0.8 ms and 32 ms: "differ by 4576%").
    None: fewer than ``MARGIN_PARTS x MARGIN_PART_STEPS`` steady steps."""
    x = np.asarray(step_s, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) < MARGIN_PARTS * MARGIN_PART_STEPS:
        return None
    means = [_trimmed_mean(part) for part in np.array_split(x, MARGIN_PARTS)]
    return max(RUN_TO_RUN, max(means) / min(means) - 1.0)


MARGIN_TRIM = 0.1  # of a fifth's steps, cut at each end


def _trimmed_mean(part: np.ndarray) -> float:
    cut = int(len(part) * MARGIN_TRIM)
    kept = np.sort(part)[cut : len(part) - cut]
    return float(kept.mean())


Outcome = Literal["faster", "no measurable change", "slower", "undecided"]
FixOutcome = Literal["verified", "no measurable effect", "slower", "undecided"]


def _block_means(x: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Means of ``resamples`` moving-block bootstrap resamples of ``x`` (block ~ n^(1/3))."""
    n = len(x)
    block = max(1, round(n ** (1 / 3)))
    blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(resamples, blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(resamples, -1)[:, :n]
    means: np.ndarray = x[idx].mean(axis=1)
    return means


def _interval(
    before: np.ndarray, after: np.ndarray, batch_ratio: float, seed: int, resamples: int
) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    b = _block_means(before, rng, resamples)
    a = _block_means(after, rng, resamples)
    ratios = batch_ratio * b / np.maximum(a, 1e-12)
    tail = (1.0 - LEVEL) / 2 * 100
    means = batch_ratio * float(before.mean()) / max(float(after.mean()), 1e-12)
    point = batch_ratio * run_step(before) / max(run_step(after), 1e-12)
    # The resampled means' spread, moved to the figure (it holds it as it held the means').
    moved = point / means
    low = float(np.percentile(ratios, tail)) * moved
    high = float(np.percentile(ratios, 100 - tail)) * moved
    return point, min(point, low), max(point, high)


# A run's figure from its parts: this many, each of at least this many steps (fewer: the mean).
FIGURE_PARTS = 5
FIGURE_PART_STEPS = 8


def run_step(step_s: np.ndarray) -> float:
    """A run's step figure: the median of its fifths' mean steps (its throughput, part by part),
    or its mean step where a fifth would have fewer than ``FIGURE_PART_STEPS`` steps. A burst of
    another process's load over a stretch of steps lands in one or two fifths and leaves the
    median where the rest of the run is; the run's mean carries it (10% of the steps slowed 3x:
    +20%, ``benchmarks/round_estimator.py``). Means, not step medians: a loader with workers
    gives steps of two kinds whose median says nothing of the run's time."""
    if len(step_s) < FIGURE_PARTS * FIGURE_PART_STEPS:
        return float(step_s.mean())
    return float(np.median([part.mean() for part in np.array_split(step_s, FIGURE_PARTS)]))


def _similar_load(
    before: np.ndarray,
    after: np.ndarray,
    before_load: np.ndarray,
    after_load: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The steps of each run taken under the load both runs saw (the overlap of their middles)."""
    lo = max(float(np.percentile(before_load, 10)), float(np.percentile(after_load, 10)))
    hi = min(float(np.percentile(before_load, 90)), float(np.percentile(after_load, 90)))
    lo, hi = lo - SIMILAR_LOAD_CORES, hi + SIMILAR_LOAD_CORES
    if lo > hi:
        return None
    keep_b = (before_load >= lo) & (before_load <= hi)
    keep_a = (after_load >= lo) & (after_load <= hi)
    if keep_b.sum() < MIN_STEPS or keep_a.sum() < MIN_STEPS:
        return None
    if keep_b.all() and keep_a.all():
        return None  # nothing to leave out: the plain comparison is the same
    return before[keep_b], after[keep_a]


def compare_samples(
    before_s: Sequence[float],
    after_s: Sequence[float],
    *,
    before_batch: int | None = None,
    after_batch: int | None = None,
    before_load_cores: Sequence[float] | None = None,
    after_load_cores: Sequence[float] | None = None,
    wait_shares: tuple[float | None, float | None] | None = None,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> SampleComparison | None:
    """``after`` against ``before``: speedup > 1 means faster after. None: too few steps.

    ``*_s`` are steady step times (our own disturbed steps already left out); ``*_batch`` the
    batch sizes (samples per step), when known; ``*_load_cores`` the other processes' load
    (cores in use by others) during each step, aligned with the step times, when known;
    ``wait_shares`` each run's wait for a core over its steps' wall time that the step times
    do not take out (None: not read, or all taken out): either at ``TOO_BUSY_WAIT`` or more
    makes the outcome "undecided" (``SampleComparison.too_busy``), the figures kept.
    """
    before = np.asarray(before_s, dtype=float)
    after = np.asarray(after_s, dtype=float)
    before = before[np.isfinite(before) & (before > 0)]
    after = after[np.isfinite(after) & (after > 0)]
    if len(before) < MIN_STEPS or len(after) < MIN_STEPS:
        return None
    ratio = after_batch / before_batch if before_batch and after_batch else 1.0
    load_note: Literal["matched", "same-direction", "against"] | None = None
    similar_steps: tuple[int, int] | None = None
    load_b = load_a = None
    if before_load_cores is not None and after_load_cores is not None:
        lb = np.asarray(before_load_cores, dtype=float)
        la = np.asarray(after_load_cores, dtype=float)
        if len(lb) == len(np.asarray(before_s)) and len(la) == len(np.asarray(after_s)):
            ok_b = np.isfinite(np.asarray(before_s, dtype=float))
            ok_a = np.isfinite(np.asarray(after_s, dtype=float))
            ok_b &= np.asarray(before_s, dtype=float) > 0
            ok_a &= np.asarray(after_s, dtype=float) > 0
            lb, la = lb[ok_b], la[ok_a]
            if np.isfinite(lb).all() and np.isfinite(la).all():
                load_b, load_a = lb, la
    point, low, high = _interval(before, after, ratio, seed, resamples)
    plain = (point, low, high)
    load_before = float(np.median(load_b)) if load_b is not None else None
    load_after = float(np.median(load_a)) if load_a is not None else None
    load_changed = (
        load_before is not None
        and load_after is not None
        and abs(load_after - load_before) >= LOAD_CHANGE_CORES
    )
    matched = False
    if load_changed and load_b is not None and load_a is not None:
        similar = _similar_load(before, after, load_b, load_a)
        if similar is not None:
            point, low, high = _interval(similar[0], similar[1], ratio, seed, resamples)
            matched = True
            load_note, similar_steps = "matched", (len(similar[0]), len(similar[1]))
    low_r, high_r = low / (1 + RUN_TO_RUN), high * (1 + RUN_TO_RUN)
    outcome: Outcome = "no measurable change"
    if low_r > 1.0:
        outcome = "faster"
    elif high_r < 1.0:
        outcome = "slower"
    if load_changed and not matched and load_before is not None and load_after is not None:
        busier = load_after > load_before
        if (outcome == "slower" and busier) or (outcome == "faster" and not busier):
            load_note = "same-direction"
            outcome = "no measurable change"
        else:
            load_note = "against"
    busy = _too_busy(wait_shares)
    if busy is not None:
        outcome = "undecided"
    return SampleComparison(
        speedup=point,
        low=low_r,
        high=high_r,
        outcome=outcome,
        before_steps=len(before),
        after_steps=len(after),
        plain_speedup=plain[0],
        load_before_cores=load_before,
        load_after_cores=load_after,
        load_changed=bool(load_changed),
        load_matched=matched,
        load_note=load_note,
        similar_steps=similar_steps,
        too_busy=busy,
    )


def _too_busy(
    shares: tuple[float | None, float | None] | None,
) -> tuple[float | None, float | None] | None:
    """``shares`` where either run waited ``TOO_BUSY_WAIT`` of its steps or more, else None."""
    from gpu_notebook.analysis.too_busy import TOO_BUSY_WAIT

    if shares is None or not any(x is not None and x >= TOO_BUSY_WAIT for x in shares):
        return None
    return shares


def fix_outcome(comparison: SampleComparison, model_low: float | None = None) -> FixOutcome:
    """What a fix earns from its before/after: verified, slower, no measurable effect (the range
    leaves out the fix's model gain, ``ruled_out``: its range's low end as the model gives it,
    ``Finding.gain_low``; None: an "up to" range), or undecided (the range still meets it, or
    the runs were too busy to judge: this measurement could not have told)."""
    if comparison.outcome == "undecided":
        return "undecided"
    if comparison.outcome == "faster":
        return "verified"
    if comparison.outcome == "slower":
        return "slower"
    if ruled_out(comparison.high, model_low, (1.0 + RUN_TO_RUN) ** 2):
        return "no measurable effect"
    return "undecided"


def ruled_out(high: float, model_low: float | None, floor: float) -> bool:
    """Whether a measured interval's high end leaves out the fix's model gain: then "no
    measurable effect" is a finding, not a shrug.

    The gain is the model's range (``Finding.gain_low`` up), not the range as stated (widened by
    the run's margin: the measured interval carries its own noise) and not merely every gain a
    run can show: a measurement whose interval still meets the model's range could not have told
    (gru_python_steps' fused update, model 1.08x-1.10x, measured 0.99x (0.90x-1.09x) on a loaded
    machine, was said "no measurable effect" for a high end under the 5% twice; quiet it read
    1.08x verified). An "up to H" range (``model_low`` None: no least gain estimated, 1x to H)
    is left out where the interval leaves out every gain a run can show (``floor``: for a range
    widened by the run-to-run margin on each side, (1 + margin)^2, a raw gain under that
    margin)."""
    return high < (floor if model_low is None else model_low)
