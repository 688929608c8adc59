"""A loader's start-ups read step by step: each start's burst against the same loader's steady steps.

A DataLoader made anew every epoch forks its workers at each ``iter()`` and its first batches wait
for them: the first steps after a start (one first batch a worker) stall, the rest of the epoch
runs at the loader's steady pace. The stall detector reads every stall of the run, the machine's
too (a loaded machine's random ones grew the remade loader's bound with the load: up to 8.92x for a
measured 3.94x); here only the bursts' time over the steady step of the same loader counts, and
the steady steps' own data wait is read apart (the input rules judge that, not the start-ups).
"""

from __future__ import annotations

import itertools

import numpy as np

from gpu_notebook.records import StartUpBursts, StepClockRecord, StepTiming

__all__ = ["MIN_STARTS", "start_up_bursts"]

# Fewer starts than this: one loader, not one remade (its start is the run's warm-up).
MIN_STARTS = 2
# A start's loader needs this many steady steps after its burst for a median to stand for it.
MIN_STEADY = 3
LEVEL = 0.9
RESAMPLES = 1000
SEED = 0


def start_up_bursts(
    record: StepClockRecord, warmup_steps: int, workers: int
) -> StartUpBursts | None:
    """The start-ups of the loader ``record`` saw started again and again (``workers`` worker
    processes: a start's first ``workers`` steps wait for them, at least one). Steps before
    ``warmup_steps`` are left out, as are our own seconds in a step (``ours_s``). None: fewer
    than ``MIN_STARTS`` starts with steady steps after them, or no start recorded."""
    burst = max(1, workers)
    by_index = {s.index: s for s in record.steps if s.index >= warmup_steps}
    if not by_index or not record.loader_starts:
        return None
    bounds = [*sorted(set(record.loader_starts)), max(by_index) + 1]
    excess: list[float] = []
    reach: list[float] = []
    spans: list[float] = []
    medians: list[float] = []
    steady: list[StepTiming] = []
    outside: list[float] | None = []  # each burst's excess outside its data wait
    # The same on the clock a trial compares on: each step less its wait for a core.
    ran_excess: list[float] = []
    ran_reach: list[float] = []
    ran_spans: list[float] = []
    for start, end in itertools.pairwise(bounds):
        if start < warmup_steps:
            continue
        head = [by_index[i] for i in range(start, min(end, start + burst)) if i in by_index]
        rest = [by_index[i] for i in range(start + burst, end) if i in by_index]
        if not head or len(rest) < MIN_STEADY:
            continue
        median = float(np.median([_own(s) for s in rest]))
        # Signed over the burst: a burst step no slower than the steady ones adds nothing on
        # average, where a clipped one would add the steady steps' noise every time.
        excess.append(max(0.0, sum(_own(s) - median for s in head)))
        if outside is not None:
            outside = _outside_data(record, head, rest, excess[-1], outside)
        reach.append(max(excess[-1], _with_tail(head, rest, start + (end - start) // 2)))
        spans.append(sum(_own(s) for s in (*head, *rest)))
        ran = _ran_burst(head, rest, start + (end - start) // 2)
        ran_excess.append(ran[0])
        ran_reach.append(ran[1])
        ran_spans.append(sum(_ran(s) for s in (*head, *rest)))
        medians.append(median)
        steady.extend(rest)
    if len(excess) < MIN_STARTS:
        return None
    total = sum(_own(s) for s in by_index.values())
    if total <= 0:
        return None
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, len(excess), size=(RESAMPLES, len(excess)))
    share, low, high, reach_share = _shares(idx, excess, reach, spans, total)
    # Each step less its wait for a core: the clock the trial and the before/after compare the
    # fix on where it keeps the process count (``analysis.interference.counted_step_times``;
    # persistent workers do). A loaded machine's steady steps mostly wait for a core, a burst
    # mostly sleeps on its new workers: on that clock the bursts hold more of the run
    # (lightning_workers_nonpersistent at load 16: the wall's 5.97x top, 7.61x measured on it).
    # The range spans both clocks; with no wait read they are one.
    ran_total = sum(_ran(s) for s in by_index.values())
    ran_share: float | None = None
    if ran_total > 0 and any(s.wait_s for s in by_index.values()):
        ran_share, ran_low, ran_high, ran_reach_share = _shares(
            idx, ran_excess, ran_reach, ran_spans, ran_total
        )
        low, high = min(low, ran_low), max(high, ran_high, ran_reach_share)
    data = _steady_data(record, steady)
    out_share = None if outside is None else min(share, sum(outside) / total)
    return StartUpBursts(
        len(excess), burst, float(sum(excess)), share, min(share, low), max(reach_share, high),
        float(np.median(medians)), len(steady), *data, reach_share=reach_share,
        outside_data_share=out_share, ran_share=ran_share,
    )  # fmt: skip


def _shares(
    idx: np.ndarray, excess: list[float], reach: list[float], spans: list[float], total: float
) -> tuple[float, float, float, float]:
    """(the bursts' share of ``total``, its 90% interval's low end, the high end of the share
    with their tails, that share) from each start's burst excess, its reach (``_with_tail``)
    and its span, resampled over the starts (``idx``); the steps in no start's span are in
    every resample."""
    rest_s = max(0.0, total - sum(spans))
    e, r, t = np.asarray(excess), np.asarray(reach), np.asarray(spans)
    spent = np.maximum(t[idx].sum(axis=1) + rest_s, 1e-12)
    tail = (1.0 - LEVEL) / 2 * 100
    low = float(np.percentile(e[idx].sum(axis=1) / spent, tail))
    high = float(np.percentile(r[idx].sum(axis=1) / spent, 100 - tail))
    return float(e.sum() / total), low, high, float(r.sum() / total)


def _ran_burst(head: list[StepTiming], rest: list[StepTiming], half: int) -> tuple[float, float]:
    """(the burst's excess, with its tail) with every step less its wait for a core: the burst
    over the steady steps' median so read, and the steps after it in the pass's first half
    over its second half's (``_with_tail``'s tail)."""
    median = float(np.median([_ran(s) for s in rest]))
    burst = max(0.0, sum(_ran(s) - median for s in head))
    second = [_ran(s) for s in rest if s.index >= half]
    if len(second) < MIN_STEADY:
        return burst, burst
    late = float(np.median(second))
    first = [s for s in rest if s.index < half]
    return burst, burst + max(0.0, sum(_ran(s) - late for s in first))


def _outside_data(
    record: StepClockRecord,
    head: list[StepTiming],
    rest: list[StepTiming],
    excess_s: float,
    so_far: list[float],
) -> list[float] | None:
    """``so_far`` with this burst's excess outside its data wait (``iter()`` forking the
    workers: the step's "other"): the excess less the burst's data wait over the steady steps'
    median one. None: a burst or steady step did not time its data wait."""
    if not all(s.timed or record.lean_data for s in (*head, *rest)):
        return None
    median = float(np.median([s.data_s for s in rest]))
    in_data = max(0.0, sum(s.data_s - median for s in head))
    return [*so_far, max(0.0, excess_s - in_data)]


def _with_tail(head: list[StepTiming], rest: list[StepTiming], half: int) -> float:
    """The burst and the steps after it in the first half of the loader's pass, over the median
    step of its second half: a new loader's workers start while the loop runs and slow the steps
    after the burst too (loader_per_epoch at load 20: the steps after each burst 8-21 ms, 1.9 ms
    with one persistent loader; building it once measured 5.78x where the bursts alone read
    3.45x). The pass's end drains the batches its workers have ready and runs faster (a
    persistent loader's too): a high end, not a point. 0: too few second-half steps.

    The burst counts as it ran (its wall time over the same loader's steady step, as the low
    end); the steps after it count less each one's wait for a core (``_ran``), over the second
    half's median read so. That wait is the machine's: in every saved run of both scripts
    (load 4-24) the first half's steps waited for a core more than their whole excess over the
    second half, and on wall times the high end grew with the load (workers_respawn 3.7x-7.5x
    high ends for 2.4x-3.7x measured), where less its wait the tail read 2-6% of the run at
    every load."""
    second = [_ran(s) for s in rest if s.index >= half]
    if len(second) < MIN_STEADY:
        return 0.0
    median = float(np.median(second))
    steady = float(np.median([_own(s) for s in rest]))
    first = [s for s in rest if s.index < half]
    burst = max(0.0, sum(_own(s) - steady for s in head))
    return burst + max(0.0, sum(_ran(s) - median for s in first))


def _own(s: StepTiming) -> float:
    return max(0.0, s.duration_s - s.ours_s)


def _ran(s: StepTiming) -> float:
    """The step's own time less its wait for a core (0 where not read)."""
    return max(0.0, _own(s) - (s.wait_s or 0.0))


def _steady_data(
    record: StepClockRecord, steady: list[StepTiming]
) -> tuple[float | None, float | None, float | None, float | None, float | None]:
    """The steady steps' data wait: share (point, 90% interval), the median step's wait as read
    and less its wait for a core. All None where the steps did not time their wait."""
    timed = [s for s in steady if s.timed or record.lean_data]
    if len(timed) < MIN_STEADY:
        return None, None, None, None, None
    data = np.fromiter((s.data_s for s in timed), dtype=float)
    dur = np.fromiter((_own(s) for s in timed), dtype=float)
    if dur.sum() <= 0:
        return None, None, None, None, None
    least = np.fromiter((max(0.0, s.data_s - (s.wait_s or 0.0)) for s in timed), dtype=float)
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, len(dur), size=(RESAMPLES, len(dur)))
    shares = data[idx].sum(axis=1) / np.maximum(dur[idx].sum(axis=1), 1e-12)
    tail = (1.0 - LEVEL) / 2 * 100
    low, high = np.percentile(shares, [tail, 100 - tail])
    share = float(data.sum() / dur.sum())
    return (share, min(share, float(low)), max(share, float(high)),
            float(np.median(data)), float(np.median(least)))  # fmt: skip
