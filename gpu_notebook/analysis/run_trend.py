"""The whole run from the step clock: drift, jitter, stalls, memory creep, and the window's place.

The profiler windows see a few steps; the step clock sees every one (decimated in long cells,
each kept step then standing for ``decimation`` steps). This module compares the two and reads
the run's shape:

- *does the window represent the run?* A step is "like the window" when its time is within a
  factor ``max(2, the run's own local jitter)`` of the time of the unprofiled steps right next to
  a window (not the profiled steps themselves: the profiler slows tiny steps down on its own);
  the window represents the run when such steps hold at least half of the run's step time, or
  are at least 60% of its steps (the rest then scattered slow steps: stalls, a busy machine);
- *drift*: the median of the first and the last fifth of the run, and a least-squares slope;
- *jitter*: p90 / median, each step over the median of its own kind of work
  (analysis/work_spread.py: steps of 32 and 16 samples, of 5 and 1 closure calls, are uneven
  work, not jitter);
- *stalls*: steps over ``STALL_FACTOR`` x the median, their period when they recur regularly
  (a schedule holds at least half of the stall events it spans, stalls in a row being one
  event: a new loader's N workers stall its first N steps), and which hook-timed phase their
  extra time went to;
  stalls of steps that ran under other processes' load (analysis/interference.py) are counted
  apart (``RunShape.busy_stalls``, ``quiet_stalls`` the pattern without them) even when those
  steps stay in the drift: the rules give them to the machine unless the cell has a periodic
  block that matches the stalls;
- *memory*: least-squares lines of the process RSS and the GPU memory in use against the step
  index (after the first tenth of the run, where caches and allocators fill, and after the
  first epoch where the run has more epochs behind it: analysis/memory_cadence.py).

Every figure is a mechanism of the recorded steps, never a wall-clock threshold.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from gpu_notebook.analysis.compare_samples import compare_samples
from gpu_notebook.analysis.interference import (
    busy_steps,
    own_step_times,
    partly_read_own_times,
    run_wait_readings,
    sample_series,
    step_load_cores,
    step_run_wait,
)
from gpu_notebook.analysis.memory_cadence import fit_start, last_epoch_rate
from gpu_notebook.analysis.own_cost import disturbed_steps
from gpu_notebook.analysis.steady import STALL_FACTOR
from gpu_notebook.analysis.steps import HOOK_PHASES, hook_breakdown, hook_phases, steady_steps
from gpu_notebook.analysis.work_spread import work_spread
from gpu_notebook.records import (
    MemoryTrend,
    OwnTime,
    PeriodicCost,
    PhaseBreakdown,
    Run,
    RunSegment,
    RunShape,
    StallPattern,
    StepClockRecord,
    StepPhases,
    StepTiming,
)

__all__ = [
    "MIN_STEPS",
    "REPRESENTS_SHARE",
    "combine_windows",
    "data_split_phases",
    "periodic_cost",
    "run_shape",
    "whole_run_phases",
]

# Fewer steps than this after the warm-up: a run too short to have a shape.
MIN_STEPS = 20
# A step that waited for a core less than this share of it ran undisturbed (OwnTime.quiet_drift);
# the scheduler reads the wait to its tick, so not 0.
QUIET_WAIT_SHARE = 0.05
# ... and at least this many such steps at each end of the run give their pace.
QUIET_STEPS = 3
# The window represents the run when steps like its own hold at least this share of the time.
REPRESENTS_SHARE = 0.5
# ... or when this share of the steps themselves is like the window's.
REPRESENTS_STEP_SHARE = 0.6
# Steps within this factor of the window's time (or the run's local p90/median, if larger) are
# The percentile of the run's steps read as its floor: the code's own pace, before preemption.
FLOOR_QUANTILE = 25.0
# "like the window": a 10x difference is a different run, a 1.3x wobble is the same one.
LIKE_FACTOR = 2.0
SEGMENTS = 10
# Unprofiled neighbours of a window that stand for its speed.
NEIGHBOURS = 5
# Neighbours unlike the run are the machine's slower stretches where at least this share of the
# later half's stretches of as many steps ran at their pace too (two loaded runs of a 0.18 ms
# loop whose neighbours read 2.7x and 3.0x the run's floor: 13% and 12%; a warm-up: none).
RECURS_SHARE = 0.05
# A stall recurs "every N steps" when this share of the gaps between stalls is N.
PERIOD_AGREEMENT = 0.6
# A schedule some (period, phase) of those tried would keep this often at random is no period.
PERIOD_CHANCE = 0.05
# A schedule needs this many stalls on it, and at least half of the stalls between its first
# and last (``_schedule``): among a burst of stalls every ~6 steps some schedule is hit three
# times by chance ("Every 107 steps" from steps 193, 300 and 407 of a run that stalled 22
# times with irregular gaps, 17 of them between those three).
PERIOD_MIN_STALLS = 3
MAX_STALL_INDICES = 64
# periodic_cost: the steps on a schedule need this many of them, and to be slower than the others
# at this level (a one-sided rank test, its normal approximation, over every phase tried).
PERIODIC_MIN_ON = 4
PERIODIC_LEVEL = 0.01
# The run's data split is used when the data wait is at least this share in the run or the
# window (the verdict's warning level): then the input question is what the window got wrong.
DATA_QUESTION = 0.10


def run_shape(run: Run) -> RunShape | None:
    """The run's shape, or None when it has fewer than ``MIN_STEPS`` steps after the warm-up."""
    record = run.steps
    steps = steady_steps(record, run.window.warmup_steps)
    if len(steps) < MIN_STEPS:
        return None
    weight = float(max(1, record.decimation))
    all_dur = np.fromiter((s.duration_s for s in steps), dtype=float)
    total_s = float(all_dur.sum() * weight)
    # Steps our own work disturbed (profiler start/stop, a later window, the stack sampler)
    # say nothing of the code: median, jitter, drift and stalls are read without them.
    ours = disturbed_steps(run)
    calm_steps = tuple(s for s in steps if s.index not in ours)
    if len(calm_steps) >= MIN_STEPS // 2:
        steps_read = calm_steps
    else:
        steps_read = steps
    # Steps that ran while the rest of the machine was busier: the machine's, not the code's;
    # but a step that stalled on its own time (its wait for a core out) is the code's whatever
    # the sampler read around it: a sleeping step frees our core and the others take it (CI on
    # one busy core: a 0.2 s sleep every 40 steps lost steps 81 and 121 this way, and its period).
    cut_s = STALL_FACTOR * float(np.median([s.duration_s for s in steps_read]))
    own_stalls = frozenset(
        s.index for s in steps_read if s.wait_s is not None and s.duration_s - s.wait_s > cut_s
    )
    machine = _machine_load(run, steps_read, own_stalls)
    if machine is not None and _keeps_both_ends(steps, machine[0]):
        steps_read = machine[0]
    # Busy steps kept for the drift (leaving them out would erase an end of the run) are still
    # the machine's when they stall: a healthy loop's machine that got busy halfway preempted
    # every ~6th tiny step from then on, and those stalls read "Every 107 steps" [high].
    loud_idx = (
        _sustained(
            run, steps_read, frozenset(s.index for s in steps_read) - {s.index for s in machine[0]}
        )
        if machine is not None
        else frozenset()
    )
    index = np.fromiter((s.index for s in steps_read), dtype=np.int64)
    dur = np.fromiter((s.duration_s for s in steps_read), dtype=float)
    read_s = float(dur.sum() * weight)
    median = float(np.median(dur))
    p90 = float(np.percentile(dur, 90))
    # Jitter, and the time above the median it stands for, are read within like work: each
    # step against its own kind's median (an epoch's short last batch, LBFGS's 1- and 5-call
    # steps are uneven work, the same in every run).
    spread = work_spread(steps_read)
    # The first and last fifth of the run by position (steps we disturbed are left out inside
    # them, never shifting a fifth's bounds into the next part of the run).
    fifth_all = max(1, len(steps) // 5)
    head = index <= steps[fifth_all - 1].index
    tail = index >= steps[-fifth_all].index
    if not head.any() or not tail.any():
        head = np.zeros(len(dur), dtype=bool)
        tail = np.zeros(len(dur), dtype=bool)
        head[: max(1, len(dur) // 5)] = True
        tail[-max(1, len(dur) // 5) :] = True
    stalled = dur > STALL_FACTOR * median
    if stalled.any() and not all(s.wait_s is not None for s in steps_read):
        # Tiny steps carry a wait only where one was slow (capture/stepclock): a slow step
        # that is not slow once its wait for a core is out was a time slice another process
        # took, not the code's stall.
        waited = np.fromiter((s.wait_s or 0.0 for s in steps_read), dtype=float, count=len(dur))
        stalled &= dur - waited > STALL_FACTOR * median
    # A step read to have stalled on its own time (its wait for a core out) stays the code's,
    # whatever the sampler read around it: a sleeping step frees our core and the others take it.
    cut = STALL_FACTOR * median
    loud = np.fromiter(
        (
            s.index in loud_idx and (s.wait_s is None or s.duration_s - s.wait_s <= cut)
            for s in steps_read
        ),
        dtype=bool,
        count=len(dur),
    )
    calm = ~stalled if stalled.sum() < len(dur) / 2 else np.ones_like(stalled)
    slope = _slope(index[calm], dur[calm])
    segments = _segments(steps_read, weight)
    windows = [_window_segment(steps, first, n, weight) for first, n in run.window_ranges]
    windows_kept = tuple(w for w in windows if w is not None)
    # The window is compared with the run on the steps' own time when every step carries its
    # wait for a core, as drift and stalls are: under load the wait blurs the wall clock (cached
    # then slow input, loaded: 6.3 against 6.5 ms a step on the wall, 1.7 against 6.3 ms own).
    # Steps too short to read at every end carry a wait only where they were slow, and which
    # steps are read is looked at again as the run goes (capture/session.py): every slow step
    # still knows its wait, so such a run is read on own time too (``partly_read_own_times``).
    own_all = _own_or_partly(steps)
    # Read over the whole run, then taken for the steps read: a wait read across a step end
    # goes to the next step (``in_step_waits``), which may be one left out of ``steps_read``.
    own = _own_or_partly(steps_read) if own_all is None else _taken(own_all, steps, steps_read)
    own_pace = own is not None and own_all is not None and len(own) == len(dur)
    pace = own if own is not None and own_pace else dur
    pace_all = own_all if own_all is not None and own_pace else all_dur
    # Neighbours that stalled (over STALL_FACTOR x the run's median: a busy machine preempts
    # every few tiny steps) do not stand for the window's pace; the stalls are read as such.
    typical_s = STALL_FACTOR * float(np.median(pace))
    reference = [
        _reference_time(steps_read, first, n, typical_s, pace) for first, n in run.window_ranges
    ]
    reference_s = [r for r in reference if r is not None]
    # The fastest neighbour of each window: a busy machine only adds time to a step (a time
    # slice, then a step or two run cold after it), so of five neighbours the fastest is the
    # one that best reads the code's pace.
    fastest = [
        _reference_time(steps_read, first, n, None, pace, fastest=True)
        for first, n in run.window_ranges
    ]
    fastest_s = [f for f in fastest if f is not None]
    covers = represents = window_median = None
    noisy = False
    noisy_recurs: float | None = None
    if reference_s:
        local = _local_jitter(segments, steps, pace_all)
        factor = max(LIKE_FACTOR, local)
        like = np.zeros(len(pace), dtype=bool)
        for ref in reference_s:
            like |= (pace <= ref * factor) & (pace >= ref / factor)
        covers = float(pace[like].sum() / pace.sum()) if pace.sum() > 0 else None
        # Most steps like the window's, the time elsewhere in scattered slow ones (a busy
        # machine's preemptions, a checkpoint): the window is the run's typical step and those
        # steps are stalls and interference, findings of their own. A run whose steps left the
        # window's pace (slower input, growing work) has most of its steps unlike it.
        most_steps = float(like.mean()) >= REPRESENTS_STEP_SHARE

        # A busy machine only adds time to steps: the code's own pace is the run's floor, not its
        # mean. A tiny-op loop preempted on busy cores (median 250 us, p90 3.6 ms) has fewer than
        # 60% of its steps within 2x of the window yet the same floor from its first fifth to its
        # last; a run that left the window's pace (cached then slow input) has a slow floor at its
        # end. The floor is the lower quartile of each end and of the whole run.
        def floor_like(ref_floor: float) -> bool:
            return all(
                ref_floor / factor
                <= float(np.percentile(part, FLOOR_QUANTILE))
                <= ref_floor * factor
                for part in (pace, pace[head], pace[tail])
                if len(part)
            )

        same_floor = floor_like(float(np.median(reference_s)))
        represents = covers is None or covers >= REPRESENTS_SHARE or most_steps or same_floor
        # Five neighbours are few: three of them slowed by the machine (a 0.13 ms loop whose
        # neighbours read 0.31-0.34 ms after time slices) made a short cell's window 'unlike'
        # its own loop, and its verdict 'unknown', under load only. Read at their fastest they
        # are like the run's floor from end to end: the machine's noise, stated as such
        # (``RunShape.window_noisy``). A window truly unlike the run (a warm-up, a run that
        # leaves its pace) has no neighbour at the run's floor, or the run's end is not there.
        if not represents and fastest_s and floor_like(float(np.median(fastest_s))):
            represents = noisy = True
        # A busy machine also slows stretches of tens of milliseconds without a wait for a
        # core (other processes on the core's sibling, in its caches): a 0.18 ms loop's five
        # neighbours all read 0.5 ms, none waited, on 2 cores where others held 1.6 (tests/
        # test_magic_nvml read 'unknown' in a fresh-clone CI of 343a714). Where the run has
        # one floor from end to end and its later half ran at the neighbours' pace in stretches
        # of as many steps again and again, that pace is the machine's, not a warm-up the
        # window fell in (a warm-up never comes back; a run that leaves its pace moves its
        # floor).
        if not represents and reference_s:
            recurs = _pace_recurs(pace, float(np.median(reference_s)), factor)
            if recurs >= RECURS_SHARE and floor_like(float(np.percentile(pace, FLOOR_QUANTILE))):
                represents = noisy = True
                noisy_recurs = recurs
        window_median = float(np.median(reference_s))
    shape = RunShape(
        steps=round(len(all_dur) * weight),
        total_s=total_s,
        median_s=median,
        p90_s=p90,
        jitter=spread.jitter,
        work_kinds=spread.kinds,
        first_median_s=float(np.median(dur[head])),
        last_median_s=float(np.median(dur[tail])),
        slope_s_per_step=slope,
        segments=segments,
        windows=windows_kept,
        window_median_s=window_median,
        window_covers=covers,
        represents=represents,
        window_noisy=noisy,
        window_noisy_recurs=noisy_recurs,
        window_own_time=own_pace and window_median is not None,
        stalls=_stalls(steps_read, dur, median, stalled, weight, read_s, _ours_times(steps, ours)),
        memory=_memory(run, steps),
    )
    first, last = shape.first_median_s, shape.last_median_s
    shape = dataclasses.replace(
        shape,
        drift=last / first if first > 0 else None,
        drift_share=max(0.0, 1.0 - first * shape.steps / total_s) if total_s > 0 else None,
        above_median_share=(
            max(0.0, 1.0 - sum(spread.reference_s(s) for s in steps) * weight / total_s)
            if total_s > 0 and spread.kinds
            else None
        ),
        grown_phase=grown_phase(run),
    )
    drift = compare_samples(dur[tail].tolist(), dur[head].tolist())
    if drift is not None:
        shape = dataclasses.replace(shape, drift_low=drift.low)
    wait = step_run_wait(run, steps_read)
    if own is not None and len(own) == len(dur):
        # Every step carries its own wait for a core (or every slow one does): drift and stalls
        # are read on the part of each step the machine did not take, step by step (a steady
        # spinner preempts every few steps for a time slice; the sampler's 0.25 s readings
        # cannot say which, and miss a busy stretch of a short cell: a tiny-step cell whose last
        # fifths ran under other processes' load read "Steps slow down over the run" [high]).
        # The stalls' extra own time is a share of the steps' own time, not of their wall time:
        # at a 90% wait for a core the wall made an evaluation every 10 steps, half the code's
        # time, read 6% (and under STALL_SHARE in the next run: said once, then not at all).
        own_s = float(own.sum() * weight)
        own_time = _own_time(
            steps_read, dur, own, head, tail, weight, own_s, _ours_times(steps, ours, own=True)
        )
        shape = dataclasses.replace(
            shape,
            own=own_time,
            own_drift=own_time.drift,
            run_wait_share=own_time.wait_share,
            stall_wait_share=(
                float(np.median(1.0 - own[stalled] / np.maximum(dur[stalled], 1e-12)))
                if stalled.any()
                else None
            ),
        )
    elif wait is not None and len(wait) == len(dur):
        # The drift left once the wait for a core has explained all it can: a step that waited
        # a share w of its time ran 1/(1-w) slower than the code alone, so the last fifth may
        # be up to (1 - least head wait) / (1 - most tail wait) slower for the machine alone.
        # The sampler reads a few times a second: a 30-step run's fifth has one or two
        # readings, and dividing each step by its own (1 - w) with w near 1 turned a 1.46x
        # drift into 3.4x (a reading off by 0.05 halves or doubles a step's own time there).
        # The readings of each fifth and the one on either side of them, taken in the
        # machine's favour, only ever shrink the drift that is left to the code.
        explained = _wait_explains(run, steps_read, head, tail)
        grew = shape.last_median_s / shape.first_median_s if shape.first_median_s > 0 else None
        shape = dataclasses.replace(
            shape,
            run_wait_share=float(np.median(wait)),
            stall_wait_share=float(np.median(wait[stalled])) if stalled.any() else None,
            own_drift=grew / explained if grew is not None and explained > 0 else None,
        )
    if machine is not None:
        count, slowdown, loud_cores, quiet = machine[1]
        machine_stalls = stalled & loud
        quiet_stalls = (
            _stalls(
                steps_read, dur, median, stalled & ~loud, weight, read_s, _ours_times(steps, ours)
            )
            if machine_stalls.any()
            else shape.stalls
        )
        if machine_stalls.any() and shape.stalls is not None:
            # A period read with the busy steps' preemptions (a burst every ~6 steps) is
            # chance; the run's period is the one its other stalls keep.
            period = quiet_stalls.period_steps if quiet_stalls is not None else None
            shape = dataclasses.replace(
                shape, stalls=dataclasses.replace(shape.stalls, period_steps=period)
            )
        shape = dataclasses.replace(
            shape,
            busy_steps=count,
            busy_slowdown=slowdown,
            busy_load_cores=loud_cores,
            quiet_load_cores=quiet,
            busy_stalls=round(int(machine_stalls.sum()) * weight),
            quiet_stalls=quiet_stalls,
            busy_stall_share=(
                float((dur[machine_stalls] - median).sum() * weight) / read_s
                if read_s > 0
                else None
            ),
        )
    return shape


def _own_time(
    steps: Sequence[StepTiming],
    dur: np.ndarray,
    own: np.ndarray,
    head: np.ndarray,
    tail: np.ndarray,
    weight: float,
    read_s: float,
    ours: Mapping[int, float] | None = None,
) -> OwnTime:
    """Median, fifths, drift and stalls of the steps' own time (wall less the wait for a core);
    ``ours``: the steps left out for our work, their own time less it (``_stalls``)."""
    median = float(np.median(own))
    first, last = float(np.median(own[head])), float(np.median(own[tail]))
    stalled = own > STALL_FACTOR * median
    ranged = compare_samples(own[tail].tolist(), own[head].tolist())
    # The run's time waiting for a core over its time (as the sampler's readings read it): a
    # median of per-step shares is ~0 where a few steps take every time slice (2 gloo ranks
    # preempted now and then read 2-4%, and the job's machine guard never applied).
    waited = float(dur.sum() - own.sum()) / float(dur.sum()) if dur.sum() > 0 else 0.0
    cpu_drift = None
    if all(s.cpu_s is not None for s in steps):
        cpu = np.fromiter((s.cpu_s or 0.0 for s in steps), dtype=float, count=len(steps))
        cpu_first = float(np.median(cpu[head]))
        cpu_drift = float(np.median(cpu[tail])) / cpu_first if cpu_first > 0 else None
    # The work of a loop thread that waits for a pool waiting for cores as it does (records.py
    # ``OwnTime.pool_drift``): own time less the share of it the pool's threads waited.
    work = np.divide(own * own, dur, out=np.zeros_like(own), where=dur > 0)
    work_first = float(np.median(work[head]))
    pool_drift = float(np.median(work[tail])) / work_first if work_first > 0 else None
    quiet = (dur - own) <= QUIET_WAIT_SHARE * dur
    quiet_head, quiet_tail = own[head & quiet], own[tail & quiet]
    quiet_drift = None
    if min(len(quiet_head), len(quiet_tail)) >= QUIET_STEPS:
        quiet_first = float(np.median(quiet_head))
        quiet_drift = float(np.median(quiet_tail)) / quiet_first if quiet_first > 0 else None
    return OwnTime(
        median_s=median,
        first_median_s=first,
        last_median_s=last,
        drift=last / first if first > 0 else None,
        drift_low=ranged.low if ranged is not None else None,
        stalls=_stalls(steps, own, median, stalled, weight, read_s, ours),
        wait_share=max(0.0, waited),
        cpu_drift=cpu_drift,
        pool_drift=pool_drift,
        quiet_drift=quiet_drift,
        every_step=all(s.wait_s is not None for s in steps),
    )


def _ours_times(
    steps: Sequence[StepTiming], ours: frozenset[int], own: bool = False
) -> dict[int, float]:
    """The steps left out for our own work in them (``disturbed_steps``), each with its time
    less that work (``own``: less its wait for a core too, where read): a step our listener
    ran in may still be a stall of the code's, and says so only for its period."""
    return {
        s.index: s.duration_s - s.ours_s - ((s.wait_s or 0.0) if own else 0.0)
        for s in steps
        if s.index in ours
    }


def _own_or_partly(steps: Sequence[StepTiming]) -> np.ndarray | None:
    """The steps' own times: every step's wait out, or every slow step's where only those were
    read (a stretch too short to read at each end)."""
    own = own_step_times(steps)
    return own if own is not None else partly_read_own_times(steps)


# Busy steps count their stalls as the machine's only inside this many readings in a row that
# were all busy: a step that sleeps (a checkpoint's disk write) frees our core, the other
# processes of a shared machine take it, and the one reading around the stall reads them busier.
SUSTAINED_READINGS = 3


def _sustained(run: Run, steps: Sequence[StepTiming], loud: frozenset[int]) -> frozenset[int]:
    """The steps of ``loud`` whose sampler reading lies in a stretch of ``SUSTAINED_READINGS``
    busy readings (readings no step's middle falls in, such as those inside one long step, are
    passed over, not counted)."""
    t, _ = sample_series(run)
    if not loud or len(t) < 2:
        return frozenset()
    mid = np.fromiter((s.start_s + s.duration_s / 2 for s in steps), dtype=float, count=len(steps))
    at = np.clip(np.searchsorted(t, mid, side="left"), 0, len(t) - 1)
    readings = sorted(set(at.tolist()))
    busy = {int(r) for r, s in zip(at, steps, strict=True) if s.index in loud}
    keep: set[int] = set()
    stretch: list[int] = []
    for r in [*readings, -1]:
        if r in busy:
            stretch.append(r)
            continue
        if len(stretch) >= SUSTAINED_READINGS:
            keep.update(stretch)
        stretch = []
    return frozenset(
        s.index for r, s in zip(at, steps, strict=True) if int(r) in keep and s.index in loud
    )


def _wait_explains(
    run: Run, steps: Sequence[StepTiming], head: np.ndarray, tail: np.ndarray
) -> float:
    """The most the thread's wait for a core can slow the last fifth against the first:
    (1 - least wait read around the first fifth) / (1 - most read around the last), each
    widened by the readings' wobble."""
    found = run_wait_readings(run, steps)
    if found is None:
        return 1.0
    at, w = found

    def around(mask: np.ndarray) -> np.ndarray:
        lo, hi = int(at[mask].min()), int(at[mask].max())
        return w[max(0, lo - 1) : min(len(w), hi + 2)]

    # Each reading is off by about the readings' own wobble over the run (half their
    # 10th-90th range: ~0 on a quiet machine, a few points on a busy one), in the machine's
    # favour too: with the thread waiting 85-90% of the time, 0.03 of a share moves the code's
    # own time in a step by a fifth.
    run_w = w[int(at.min()) : int(at.max()) + 2]
    wobble = float(np.percentile(run_w, 90) - np.percentile(run_w, 10)) / 2
    least_head = max(0.0, float(around(head).min()) - wobble)
    most_tail = min(1.0, float(around(tail).max()) + wobble)
    return (1.0 - least_head) / max(1e-9, 1.0 - most_tail)


# Busy steps are left out only when the quiet ones stay at least this share of the steps: a
# machine busy from start to end is the run's normal (the saturation finding names it).
QUIET_SHARE = 0.3


def _keeps_both_ends(steps: Sequence[StepTiming], kept: Sequence[StepTiming]) -> bool:
    """Leaving the busy steps out still leaves each end of the run (first and last fifth) with
    a third of its steps: the sampler reads a few times a second, so one busy reading can cover
    a whole fast part of a run, and leaving it out would erase that part from the drift."""
    fifth = max(1, len(steps) // 5)
    first_end, last_start = steps[fifth - 1].index, steps[-fifth].index
    head = sum(1 for s in kept if s.index <= first_end)
    tail = sum(1 for s in kept if s.index >= last_start)
    need = max(3, fifth / 3)
    return head >= need and tail >= need


def _machine_load(
    run: Run, steps: Sequence[StepTiming], own_stalls: frozenset[int] = frozenset()
) -> tuple[tuple[StepTiming, ...], tuple[int, float | None, float, float]] | None:
    """The steps without those that ran under other processes' load (``own_stalls`` kept: the
    code's own), and what those showed."""
    load = step_load_cores(run, steps)
    busy = _sustained(run, steps, busy_steps(run, steps)) - own_stalls
    if load is None or not busy:
        return None
    quiet = tuple(s for s in steps if s.index not in busy)
    if len(quiet) < max(MIN_STEPS // 2, QUIET_SHARE * len(steps)):
        return None
    loud = [s.duration_s for s in steps if s.index in busy]
    quiet_median = float(np.median([s.duration_s for s in quiet]))
    is_busy = np.fromiter((s.index in busy for s in steps), dtype=bool)
    slowdown = float(np.median(loud)) / quiet_median if quiet_median > 0 else None
    facts = (
        len(loud),
        slowdown,
        float(np.median(load[is_busy])),
        float(np.median(load[~is_busy])),
    )
    return quiet, facts


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or float(np.ptp(x)) == 0:
        return 0.0
    return float(np.polyfit(x.astype(float), y, 1)[0])


def _segments(steps: Sequence[StepTiming], weight: float) -> tuple[RunSegment, ...]:
    parts = np.array_split(np.arange(len(steps)), min(SEGMENTS, len(steps)))
    out = []
    for part in parts:
        if len(part) == 0:
            continue
        chunk = [steps[i] for i in part]
        d = [s.duration_s for s in chunk]
        out.append(
            RunSegment(
                first_step=chunk[0].index,
                last_step=chunk[-1].index,
                median_s=float(np.median(d)),
                total_s=float(sum(d) * weight),
            )
        )
    return tuple(out)


def _local_jitter(
    segments: Sequence[RunSegment], steps: Sequence[StepTiming], times: np.ndarray | None = None
) -> float:
    """The run's own spread *within* stretches of it: median over segments of p90/median.
    ``times``: each step's time to read (its own time), its wall time when None."""
    t = _times(steps, times)
    ratios = []
    for seg in segments:
        d = [x for s, x in zip(steps, t, strict=True) if seg.first_step <= s.index <= seg.last_step]
        m = float(np.median(d)) if d else 0.0
        if m > 0 and len(d) >= 3:
            ratios.append(float(np.percentile(d, 90)) / m)
    return float(np.median(ratios)) if ratios else 1.0


def _taken(
    values: np.ndarray, steps: Sequence[StepTiming], some: Sequence[StepTiming]
) -> np.ndarray:
    """``values`` (aligned with ``steps``) of the steps ``some`` (a subset of ``steps``)."""
    at = {s.index: k for k, s in enumerate(steps)}
    return values[np.fromiter((at[s.index] for s in some), dtype=np.int64, count=len(some))]


def _pace_recurs(pace: np.ndarray, ref_s: float, factor: float) -> float:
    """The share of the later half's stretches of ``NEIGHBOURS`` consecutive steps whose median
    is within ``factor`` of ``ref_s`` (0.0: too few steps for a stretch)."""
    if len(pace) < 2 * NEIGHBOURS:
        return 0.0
    later = pace[len(pace) // 2 :]
    if len(later) < NEIGHBOURS:
        return 0.0
    stretches = np.median(np.lib.stride_tricks.sliding_window_view(later, NEIGHBOURS), axis=1)
    like = (stretches >= ref_s / factor) & (stretches <= ref_s * factor)
    return float(like.mean())


def _window_segment(
    steps: Sequence[StepTiming], first: int, n: int, weight: float
) -> RunSegment | None:
    d = [s.duration_s for s in steps if first <= s.index < first + n]
    if not d:
        return None
    return RunSegment(first, first + n - 1, float(np.median(d)), float(sum(d)))


def _times(steps: Sequence[StepTiming], times: np.ndarray | None) -> list[float]:
    return [s.duration_s for s in steps] if times is None else [float(x) for x in times]


def _reference_time(
    steps: Sequence[StepTiming],
    first: int,
    n: int,
    typical_s: float | None = None,
    times: np.ndarray | None = None,
    *,
    fastest: bool = False,
) -> float | None:
    """The time of the unprofiled steps around a window: what its steps cost without a profiler.

    The steps after it first (the warm-up before it is left out already), else the window's own.
    ``typical_s``: neighbours slower than this are stalls, left out while two others remain
    (seen on 2 busy cores: 3 of the 5 steps after a tiny-op window preempted, their median
    3.9 ms against a run median of 1.3 ms, and the run called unlike its window).
    ``times``: each step's time to read (its own time), its wall time when None.
    ``fastest``: the fastest of them rather than their median.
    """
    # ``steps`` may leave out the steps our own work disturbed: the next ones stand for it then.
    paced = list(zip(steps, _times(steps, times), strict=True))
    after = [t for s, t in paced if first + n <= s.index][:NEIGHBOURS]
    if len(after) < 2:
        before = [t for s, t in paced if first - NEIGHBOURS <= s.index < first]
        after = after + before
    if len(after) < 2:
        after = [t for s, t in paced if first <= s.index < first + n]
    if typical_s is not None:
        calm = [d for d in after if d <= typical_s]
        after = calm if len(calm) >= 2 else after
    if not after:
        return None
    return float(min(after)) if fastest else float(np.median(after))


def _stalls(
    steps: Sequence[StepTiming],
    dur: np.ndarray,
    median: float,
    stalled: np.ndarray,
    weight: float,
    total_s: float,
    ours: Mapping[int, float] | None = None,
) -> StallPattern | None:
    """The stalled steps' pattern. ``ours``: the steps left out of ``steps`` for our own work in
    them, each with its time less that work (on the clock ``dur`` reads): those on the period
    the read stalls keep count as stalls (``_finer_period``), their time less ours. The period
    is read from stall events, a burst of stalls in a row being one (``_bursts``)."""
    count = int(stalled.sum())
    if count < 2 or count >= len(dur) / 2 or total_s <= 0:
        return None
    idx = [steps[int(i)].index for i in np.flatnonzero(stalled)]
    cut = STALL_FACTOR * median
    # The schedule is read from events, a burst of stalls in a row being one (``_bursts``): a
    # new DataLoader with 2 workers stalls its first two steps every epoch.
    ours_t: Mapping[int, float] = ours or {}
    times = {steps[int(i)].index: float(dur[int(i)]) for i in np.flatnonzero(stalled)}
    bursts = _bursts(times, ours_t, cut)
    events = [at for at, _ in bursts]
    # The period is read from the big stalls (over a quarter of the longest one): on a busy
    # machine tiny steps also stall now and then at random, which says nothing of a schedule.
    big_cut = 0.25 * float(dur[stalled].max())
    big = [at for at, longest in bursts if longest >= big_cut]
    period = None
    if len(big) >= 3:
        gaps = Counter(b - a for a, b in itertools.pairwise(big))
        gap, seen = gaps.most_common(1)[0]
        # A gap of one step is no period: stalls that follow each other are one slow stretch
        # (a slow start: 60 steps on 2 threads of a busy machine read "Every 1 steps").
        if gap >= 2 and seen >= PERIOD_AGREEMENT * (len(big) - 1):
            period = int(gap)
    if period is None and len(events) >= PERIOD_MIN_STALLS:
        period = _schedule(events, steps[0].index, steps[-1].index)
    extra: list[float] = []
    if period is not None and ours:
        period, kept = _finer_period(idx, period, ours, cut, events)
        extra = [ours[i] for i in kept]
        idx = sorted([*idx, *kept])
    excess = float(((dur[stalled] - median).sum() + sum(extra) - median * len(extra)) * weight)
    total_s += sum(extra) * weight
    phase, phase_share = _stall_phase(steps, stalled)
    if period is not None:
        # The steps on the schedule come first: they are the examples the report names ("every
        # 20 steps: e.g. 20, 40, 60"), not the random stalls of a busy machine around them.
        on = _on_schedule(idx, period, events)
        idx = on + [i for i in idx if i not in set(on)]
    return StallPattern(
        steps=tuple(idx[:MAX_STALL_INDICES]),
        count=round((count + len(extra)) * weight),
        period_steps=period,
        median_stall_s=float(np.median(dur[stalled])),
        excess_s=excess,
        share=excess / total_s,
        phase=phase,
        phase_share=phase_share,
    )


def _bursts(
    stalled: Mapping[int, float], ours: Mapping[int, float], cut: float
) -> list[tuple[int, float]]:
    """The stalled steps (each with its time) as bursts of steps in a row, in order: each burst
    as its event's step and its longest time. A new DataLoader's iterator waits for the first
    batch of each of its N workers, so every start of one (a loader made anew each epoch,
    workers respawned) stalls about N steps in a row: one event of its schedule. Read stall by
    stall, a 2-step burst every 16 steps put 9 of a run's 31 stalls on the schedule's phase and
    as many on the next, under the half of them ``_schedule`` asks for, and its period was lost
    under load. The event is the burst's first step at least half as long as its longest: a
    random stall of a busy machine just before the start-up does not move it.
    A step left out as ours (``_ours_times``) whose time less our work is over ``cut`` joins
    the stall after it: the capture's look every 64 steps fell on a new loader's first step."""
    runs: list[list[tuple[int, float]]] = []
    for i in sorted(stalled):
        before = [(i - 1, ours[i - 1])] if ours.get(i - 1, 0.0) > cut else []
        last = runs[-1][-1][0] if runs else None
        if last is not None and i - last == 1:
            runs[-1].append((i, stalled[i]))
        elif last is not None and i - last == 2 and before:
            runs[-1] += [*before, (i, stalled[i])]
        else:
            runs.append([*before, (i, stalled[i])])
    out = []
    for burst in runs:
        longest = max(t for _, t in burst)
        out.append((next(i for i, t in burst if t >= 0.5 * longest), longest))
    return out


def _finer_period(
    stalled: Sequence[int],
    period: int,
    ours: Mapping[int, float],
    cut: float,
    events: Sequence[int] | None = None,
) -> tuple[int, list[int]]:
    """The finest divisor of ``period`` whose slots off ``period``'s own, between the schedule's
    first and last stall, stalled as the schedule's do (``PERIOD_AGREEMENT`` of them): a step
    read, or one left out for our own work that is still over ``cut`` less that work, with at
    least one such step among them (the evidence this is for); and those steps of ours, stalls
    of the code's too. The capture looks at the run again every 64 steps (capture/session.py,
    ``RETIME_EVERY_STEPS``) and those steps are left out as ours: work every 32 steps (a
    validation pass each epoch of 32 batches) lost every other stall, and read "every 64" with
    half its time. A busy machine's preemption may make one of them read under ``cut``.
    With no finer period, the steps of ours on ``period``'s own phase that stalled so still
    count (a loader made anew every 16 steps: steps 64 and 128 stalled as the others, and
    their time was left out of the cost). ``events``: the bursts' events (``_bursts``), whose
    phase is the schedule's."""
    on = _on_schedule(stalled, period, events)
    if len(on) < 2:
        return period, []
    hit = set(stalled)
    for k in range(2, period // 2 + 1):
        if period % k:
            continue
        slots = [i for i in range(on[0], on[-1] + 1, k) if (i - on[0]) % period]
        slow_ours = [i for i in slots if i not in hit and ours.get(i, 0.0) > cut]
        slow = [i for i in slots if i in hit] + slow_ours
        if slow_ours and len(slow) >= PERIOD_AGREEMENT * len(slots):
            # The schedule's own slots left out as ours that stalled (outside the span, too).
            return k, [
                i for i, t in ours.items() if i not in hit and t > cut and (i - on[0]) % k == 0
            ]
    return period, [
        i for i, t in ours.items() if i not in hit and t > cut and (i - on[0]) % period == 0
    ]


def _on_schedule(
    stalled: Sequence[int], period: int, events: Sequence[int] | None = None
) -> list[int]:
    """The stalled steps on the ``period``'s most kept phase (step index mod period), the
    phase read from ``events`` where given (the bursts' events, ``_bursts``: a 2-step burst's
    second step, on the next phase, is kept as often, and more where our look hid a first)."""
    phases = Counter(i % period for i in (events if events else stalled))
    keep = phases.most_common(1)[0][0]
    return [i for i in stalled if i % period == keep]


def _schedule(stalled: Sequence[int], first: int, last: int) -> int | None:
    """A period the stalls keep even among random ones (a busy machine preempts steps at
    random; a checkpoint comes every N steps): the (period, phase) pair whose every step
    stalled, at least ``PERIOD_AGREEMENT`` of its occurrences and ``PERIOD_MIN_STALLS`` times."""
    hit = set(stalled)
    best: tuple[int, int] | None = None  # (hits, period)
    for a, b in itertools.combinations(sorted(hit)[:MAX_STALL_INDICES], 2):
        p = b - a
        if p < 2 or (last - first) // p < 3:
            continue
        expected = range(a % p + ((first - a % p + p - 1) // p) * p, last + 1, p)
        on = [i for i in expected if i in hit]
        hits = len(on)
        # The schedule holds at least half of the stalls between its first and last hit: a
        # burst of stalls every ~7 steps has some schedule of 89 with 4 of its 6 slots hit by
        # chance, and 40 other stalls around them.
        around = sum(1 for i in hit if on and on[0] <= i <= on[-1])
        agrees = (
            hits >= PERIOD_MIN_STALLS
            and hits >= PERIOD_AGREEMENT * len(expected)
            and 2 * hits >= around
            and not _by_chance(hits, len(expected), len(hit), first, last)
        )
        if agrees and (best is None or (hits, p) > best):
            best = (hits, p)
    return best[1] if best is not None else None


def _by_chance(hits: int, slots: int, stalls: int, first: int, last: int) -> bool:
    """Whether some schedule of the many tried would keep ``hits`` of its ``slots`` among
    ``stalls`` stalls at random in steps ``first``..``last``: the binomial tail at the run's
    stall rate, times the (period, phase) pairs tried, over ``PERIOD_CHANCE`` (REINFORCE's
    episodes of random length: 6 stalls in 40 steps kept a schedule of 10 with 3 of 4 slots,
    and read "Every 10 steps a step stalls (logging)")."""
    n = last - first + 1
    if n <= 0 or slots <= 0:
        return False
    rate = min(1.0, stalls / n)
    tail = sum(
        math.comb(slots, k) * rate**k * (1.0 - rate) ** (slots - k) for k in range(hits, slots + 1)
    )
    tried = sum(range(2, max(2, n // 3) + 1))
    return tail * tried > PERIOD_CHANCE


def _parts(s: StepTiming) -> dict[str, float]:
    parts = {
        "data": s.data_s,
        "forward": s.forward_s,
        "backward": s.backward_s,
        "optimizer": s.optimizer_s,
    }
    parts["other"] = max(0.0, s.duration_s - sum(parts.values()))
    return parts


def grown_phase(run: Run) -> tuple[str, float, float] | None:
    """The hook-timed phase that grew most between the first and the last fifth of the run:
    (phase, its median in the first fifth, in the last), None when none grew or too few steps
    were timed (``RunShape.grown_phase``: the drift finding names it)."""
    steady = [s for s in run.steps.steps if s.index >= run.window.warmup_steps]
    if len(steady) < 10:
        return None
    # The fifths of the run by step index; only timed steps inside them know their phases (a
    # run whose steps were short in between went lean there).
    fifth = len(steady) // 5
    first_end, last_start = steady[fifth - 1].index, steady[-fifth].index
    first = [_parts(s) for s in steady if s.timed and s.index <= first_end]
    last = [_parts(s) for s in steady if s.timed and s.index >= last_start]
    if len(first) < 2 or len(last) < 2:
        return None

    def med(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    growth = {p: (med([f[p] for f in first]), med([la[p] for la in last])) for p in first[0]}
    phase = max(growth, key=lambda p: growth[p][1] - growth[p][0])
    before, after = growth[phase]
    return (phase, before, after) if after > before else None


def _stall_phase(
    steps: Sequence[StepTiming], stalled: np.ndarray
) -> tuple[str | None, float | None]:
    """The hook-timed phase that took the stalled steps' extra time, and its share of it."""
    slow = [steps[int(i)] for i in np.flatnonzero(stalled) if steps[int(i)].timed]
    calm = [steps[int(i)] for i in np.flatnonzero(~stalled) if steps[int(i)].timed]
    if not slow or len(calm) < 2:
        return None, None
    typical = {p: float(np.median([_parts(s)[p] for s in calm])) for p in HOOK_PHASES}
    extra = dict.fromkeys(HOOK_PHASES, 0.0)
    for s in slow:
        for p, v in _parts(s).items():
            extra[p] += max(0.0, v - typical[p])
    total = sum(extra.values())
    if total <= 0:
        return None, None
    phase = max(extra, key=lambda p: extra[p])
    return phase, extra[phase] / total


def _memory(run: Run, steps: Sequence[StepTiming]) -> tuple[MemoryTrend, ...]:
    out = []
    rss = [(m.index, m.rss_bytes) for m in run.steps.memory if m.rss_bytes is not None]
    gpu = [
        (m.index, m.gpu_memory_bytes) for m in run.steps.memory if m.gpu_memory_bytes is not None
    ]
    if len(gpu) < 8:
        gpu = _gpu_from_samples(run, steps)
    capacity = next((g.memory_total_bytes for g in run.env.gpus if g.memory_total_bytes), None)
    if capacity is None:
        capacity = next(
            (
                g.memory_total_bytes
                for s in run.samples.samples
                for g in s.gpus
                if g.memory_total_bytes
            ),
            None,
        )
    rss = _without_our_windows(rss, _window_spans(run))
    highs = run.steps.batch_highs
    grew = highs.steps if highs is not None and highs.complete else None
    for kind, points, cap in (("rss", rss, None), ("gpu", gpu, capacity)):
        trend = _fit(kind, points, cap, grew, run.steps.loader_starts)
        if trend is not None:
            out.append(trend)
    return tuple(out)


def _window_spans(run: Run) -> list[tuple[int, int]]:
    """(first, last) steps of each profiled window with the steps our work follows it with (the
    stop's, the stack sampler's after the first window: own_cost.disturbed_steps)."""
    follow = run.window.profile_steps if run.stacks is not None else 0
    return [
        (first, first + n + (follow if k == 0 else 0))
        for k, (first, n) in enumerate(run.window_ranges)
    ]


def _without_our_windows(
    points: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Process memory readings less what each profiled window added: the profiler's buffers and
    the events we keep until the report stay in the process (RSS stepped up 14 MiB across a
    second window of a conv net's 1150 operators a step, flat before and after). Each gap
    between two readings that holds a window's steps takes the median per-step change of the
    other gaps instead of its own, so a leak of the loop's keeps its line. GPU memory is not
    read here: the profiler keeps nothing on the device."""
    # Two readings at one step (the step clock's and a window's own) make no gap to divide by.
    points = [b for a, b in itertools.pairwise([(-1, 0), *points]) if b[0] > a[0]]
    if len(points) < 3 or not spans:
        return list(points)
    gaps = list(itertools.pairwise(points))
    ours = [any(a[0] < last and b[0] >= first for first, last in spans) for a, b in gaps]
    others = [(b[1] - a[1]) / (b[0] - a[0]) for (a, b), o in zip(gaps, ours, strict=True) if not o]
    if not any(ours) or not others:
        return list(points)
    rate = float(np.median(others))
    out, shift = [points[0]], 0.0
    for (a, b), o in zip(gaps, ours, strict=True):
        if o:
            shift += (b[1] - a[1]) - rate * (b[0] - a[0])
        out.append((b[0], int(b[1] - shift)))
    return out


def _gpu_from_samples(run: Run, steps: Sequence[StepTiming]) -> list[tuple[int, int]]:
    """GPU memory per step from the sampler's NVML readings: each reading placed at the step
    that was running then (the step clock's start times map time to step index)."""
    if not steps:
        return []
    starts = np.fromiter((s.start_s for s in steps), dtype=float)
    index = np.fromiter((s.index for s in steps), dtype=float)
    out = []
    for sample in run.samples.samples:
        used = sum(g.memory_used_bytes for g in sample.gpus if g.memory_used_bytes is not None)
        if not sample.gpus or used <= 0 or not starts[0] <= sample.t_s <= starts[-1]:
            continue
        out.append((int(np.interp(sample.t_s, starts, index)), int(used)))
    return out


def _fit(
    kind: str,
    points: Sequence[tuple[int, int]],
    capacity: int | None,
    batch_highs: Sequence[int] | None = None,
    loader_starts: Sequence[int] = (),
) -> MemoryTrend | None:
    if len(points) < 8:
        return None
    # The first tenth (caches, the allocator and lazy state fill up), and the first epoch where
    # the run has more behind it: every item and batch size is met there first.
    skip = fit_start(points, loader_starts)
    pts = points[skip:]
    x = np.asarray([p[0] for p in pts], dtype=float)
    y = np.asarray([p[1] for p in pts], dtype=float)
    if float(np.ptp(x)) == 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    fitted = slope * x + intercept
    ss_res = float(((y - fitted) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0
    full_at = None
    if capacity is not None and slope > 0:
        full_at = int((capacity - intercept) / slope)
    return MemoryTrend(
        kind=kind,  # type: ignore[arg-type]
        first_step=int(x[0]),
        last_step=int(x[-1]),
        start_bytes=int(y[0]),
        end_bytes=int(y[-1]),
        bytes_per_step=float(slope),
        r2=r2,
        capacity_bytes=capacity,
        full_at_step=full_at,
        late_bytes_per_step=_late_slope(x, y),
        last_epoch_bytes_per_step=last_epoch_rate(x, y, loader_starts),
        between_highs_bytes_per_step=(
            _between_highs_slope(x, y, batch_highs) if batch_highs is not None else None
        ),
    )


def _between_highs_slope(x: np.ndarray, y: np.ndarray, highs: Sequence[int]) -> float | None:
    """The growth per step over the stretches between two readings that no new largest batch
    fell in (a batch of step k counts in the reading after step k). The allocator grows to the
    largest batch it has met and a leak grows every step: only the leak grows here. None when
    those stretches cover under half of the fitted steps (batches that grow all run long)."""
    ordered = sorted(highs)
    grown = spanned = 0.0
    for a, b, ya, yb in zip(x[:-1], x[1:], y[:-1], y[1:], strict=True):
        first = bisect.bisect_right(ordered, a)
        if first < len(ordered) and ordered[first] <= b:
            continue  # a new largest batch came in this stretch
        grown += float(yb - ya)
        spanned += float(b - a)
    if spanned <= 0 or spanned < 0.5 * float(x[-1] - x[0]):
        return None
    return grown / spanned


def _late_slope(x: np.ndarray, y: np.ndarray) -> float | None:
    """The least-squares slope of the readings in the later half of the fitted steps: where a
    leak still grows at its rate and growth that stopped (a cache filled in the first epoch,
    the allocator grown to the longest batch seen) is flat or nearly."""
    late = x >= (x[0] + x[-1]) / 2
    if int(late.sum()) < 4 or float(np.ptp(x[late])) == 0:
        return None
    return float(np.polyfit(x[late], y[late], 1)[0])


def whole_run_phases(
    record: StepClockRecord, warmup_steps: int, shape: RunShape
) -> PhaseBreakdown | None:
    """The hook-timed phase split of every timed step, when those steps hold most of the run.

    Each step weighs the time it took (the sums of its phases), so a slow second half counts for
    what it cost. None when the timed steps hold less than half of the run's time: then only the
    profiled windows know the phases.
    """
    phases = hook_phases(record, warmup_steps)
    if phases is None or shape.total_s <= 0:
        return None
    weight = max(1, record.decimation)
    if phases.total_us / 1e6 * weight < REPRESENTS_SHARE * shape.total_s:
        return None
    return phases


def combine_windows(
    record: StepClockRecord,
    warmup_steps: int,
    windows: Sequence[tuple[int, int, PhaseBreakdown]],
) -> PhaseBreakdown | None:
    """One phase split for the run from several profiled windows, each weighted by the time of
    the steps it stands for: every step stands with the window whose unprofiled steps ran at
    its own pace (the step clock knows every step's time; a 10 ms step is like the window that
    saw 10 ms steps, wherever it lies). Paces and weights are the steps' own time (each less its
    wait for a core) when every step carries that wait, their wall time otherwise.

    The steps are the windows' own (their detail); the totals are the weighted estimate, scaled
    so that a step's figure in the phase table reads as an average step of the run, on the
    clock its paces are read on (own time, as each window's split is, where every step has it).
    """
    usable = [(first, n, b) for first, n, b in windows if b.total_us > 0 and b.steps]
    if not usable:
        return None
    if len(usable) == 1:
        return usable[0][2]
    steps = steady_steps(record, warmup_steps)
    # Paces are the steps' own time when every step carries its wait for a core (as the run's
    # shape reads them): on a loaded machine a cached window's steps waited 24 ms a step and
    # stood, on the wall, for input steps of 6 ms of their own (cached_then_slow: data 7%).
    own = own_step_times(steps)
    pace = own if own is not None else np.fromiter((s.duration_s for s in steps), dtype=float)
    refs = [_reference_time(steps, first, n, times=own) for first, n, _ in usable]
    speed = np.log(np.asarray([r if r and r > 0 else np.nan for r in refs], dtype=float))
    centres = np.asarray([first + n / 2 for first, n, _ in usable], dtype=float)
    stand_s = np.zeros(len(usable))
    for s, t in zip(steps, pace, strict=True):
        # Like the window whose unprofiled neighbours ran at its pace; the nearest by index
        # among equals (and when no pace is known).
        near = np.abs(centres - s.index) / max(1.0, float(len(steps)))
        if t > 0 and not np.isnan(speed).all():
            far = np.nan_to_num(np.abs(speed - np.log(t)), nan=np.inf)
            stand_s[int(np.argmin(far + 1e-3 * near))] += t
        else:
            stand_s[int(np.argmin(near))] += t
    if stand_s.sum() <= 0:
        return usable[0][2]
    weights = stand_s / stand_s.sum()
    steps_n = sum(len(b.steps) for _, _, b in usable)
    # The run's average step on the windows' own clock: each window's split is its steps' own
    # time (less their wait for a core) where every step carries that wait, so the wall mean
    # here read the wait twice, a loaded step's figures ~10x a single window's (unseen round
    # 11: "step 120 ms here -> 1.95 ms on an A100, 61.5x" against 7.4x from the same code's
    # one-window run, 12 ms of its own a step).
    mean_step_us = float(np.mean(pace) * 1e6) if steps else 0.0
    total_us = mean_step_us * steps_n
    measured = tuple(p for p in usable[0][2].measured if all(p in b.measured for _, _, b in usable))
    # Each window's steps are scaled so that together they stand for the time their window
    # stands for: the shares of the sum are the weighted estimate, the sum is the run's time.
    out_steps: list[StepPhases] = []
    totals = dict.fromkeys(measured, 0.0)
    # The same with each window's wait for a core left in (its wall split, scaled as its own
    # split is; a window with no wait taken out: its own): the verdict reads how much of the
    # split's time waited (``waited_share``), and where that wait could have gone.
    wall_totals = dict.fromkeys(measured, 0.0)
    wall_us = 0.0
    for w, (_, _, b) in zip(weights, usable, strict=True):
        scale = float(w) * total_us / b.total_us
        for step in b.steps:
            parts = {p: v * scale for p, v in step.phase_us.items()}
            out_steps.append(
                dataclasses.replace(step, duration_us=step.duration_us * scale, phase_us=parts)
            )
            for p in measured:
                totals[p] += parts.get(p, 0.0)
        wall = b.phase_total_us if b.wall_phase_total_us is None else b.wall_phase_total_us
        for p in measured:
            wall_totals[p] += wall.get(p, 0.0) * scale
        wall_us += (b.total_us if b.wall_total_us is None else b.wall_total_us) * scale
    waited = any(b.wall_phase_total_us is not None for _, _, b in usable) and wall_us > 0
    return PhaseBreakdown(
        source=usable[0][2].source,
        steps=tuple(out_steps),
        total_us=total_us,
        phase_total_us=totals,
        measured=measured,
        waited_share=max(0.0, 1.0 - total_us / wall_us) if waited else 0.0,
        wall_phase_total_us=wall_totals if waited else None,
        wall_total_us=wall_us if waited else None,
        comm_in_backward=_comm_in_backward(usable, weights, total_us),
    )


def _comm_in_backward(
    usable: Sequence[tuple[int, int, PhaseBreakdown]], weights: np.ndarray, total_us: float
) -> float | None:
    """The windows' part of their wait in collectives inside backward, each window weighing its
    comm time as the combined split scales it; None where a window with comm did not read it."""
    parts = [
        (float(w) * total_us / b.total_us * b.phase_total_us.get("comm", 0.0), b.comm_in_backward)
        for w, (_, _, b) in zip(weights, usable, strict=True)
    ]
    comm_us = sum(c for c, _ in parts)
    if comm_us <= 0 or any(c > 0 and part is None for c, part in parts):
        return None
    return sum(c * (part or 0.0) for c, part in parts) / comm_us


def data_split_phases(
    record: StepClockRecord,
    warmup_steps: int,
    shape: RunShape,
    window: PhaseBreakdown,
    skip: frozenset[int] = frozenset(),
) -> PhaseBreakdown | None:
    """The run's split from what every step carries: its data wait (the step clock times the
    loader's ``__next__`` in every step, lean or not), and the rest of the step divided as the
    window divides its own non-data time.

    For a window unlike the run when the run's steps were too short to keep every phase timed:
    a loop that turns input-bound after a cached start is then read from its whole run, not
    from the cached window. ``skip``: steps our own work disturbed. None: the window did not
    measure the data wait, or the steps with a data wait hold less than half of the run.
    """
    if "data" not in window.measured or shape.total_s <= 0:
        return None
    steps = [s for s in steady_steps(record, warmup_steps) if s.timed or record.lean_data]
    calm = [s for s in steps if s.index not in skip]
    steps = calm if len(calm) >= MIN_STEPS // 2 else steps
    weight = max(1, record.decimation)
    if not steps or sum(s.duration_s for s in steps) * weight < REPRESENTS_SHARE * shape.total_s:
        return None
    rest = {p: v for p, v in window.phase_total_us.items() if p != "data" and p in window.measured}
    rest_total = sum(rest.values())
    if rest_total <= 0:
        rest, rest_total = {"other": 1.0}, 1.0
    fractions = {p: v / rest_total for p, v in rest.items()}

    def split(s: StepTiming, dur_us: float) -> dict[str, float]:
        data_us = min(dur_us, s.data_s * 1e6)
        return {"data": data_us, **{p: (dur_us - data_us) * f for p, f in fractions.items()}}

    found = hook_breakdown(steps, split, window.measured)
    total_us = found.total_us
    run_data = found.phase_total_us["data"] / total_us if total_us > 0 else 0.0
    if max(run_data, window.share("data") or 0.0) < DATA_QUESTION:
        # The data wait is small in the run and in the window: what differs between them is
        # not the input, and the window's split of the rest would speak for steps it is unlike.
        return None
    return found


def periodic_cost(run: Run, period: int) -> PeriodicCost | None:
    """What work that runs every ``period`` steps costs, from the step clock alone: the steps of
    one phase (index mod ``period``) against the others of the same run, a natural A/B with no
    sampler (logging_steps=N, log_every_n_steps=N, ``if step % N == 0: print(...)``):
    ``(median of those steps - median of the others) x their count / the steps' total time``.

    The phase is the one whose steps are slowest (the framework's step count and the clock's
    index may be one apart); it counts only when its steps are slower than the others by a rank
    test at ``PERIODIC_LEVEL`` over all ``period`` phases tried, so a run with no periodic work
    reads None, not the largest of ``period`` noisy medians. Our own disturbed steps (profiler
    windows) and the warm-up are left out; each step's wait for a core too, where every step
    read it (``own_time``: the share is of the steps' own time). None: ``period`` < 2, too few steps, no such phase.
    """
    record = run.steps
    if period < 2:
        return None  # every step: no step without the work to set it against (the samplers)
    ours = disturbed_steps(run)
    steps = [
        s
        for s in steady_steps(record, run.window.warmup_steps)
        if s.index not in ours and s.duration_s > 0
    ]
    if len(steps) < max(MIN_STEPS, PERIODIC_MIN_ON * period):
        return None
    weight = max(1, record.decimation)
    # Where every step carries its wait for a core, its own time (the wait out): a busy machine
    # preempts steps of every phase alike and hides the logging's steps in its noise.
    own = own_step_times(steps)
    dur = own if own is not None else np.fromiter((s.duration_s for s in steps), dtype=float)
    phase_of = np.fromiter((s.index % period for s in steps), dtype=int)
    # One ranking of all the steps (ties share their mean rank): each phase's Mann-Whitney U
    # from its rank sum, so a long period costs one pass, not one sort per phase.
    ranks = _mean_ranks(dur)
    counts = np.bincount(phase_of, minlength=period)
    rank_sums = np.bincount(phase_of, weights=ranks, minlength=period)
    best: tuple[float, int] | None = None  # (z, phase)
    for phase in range(period):
        n1, n2 = int(counts[phase]), len(dur) - int(counts[phase])
        if n1 < PERIODIC_MIN_ON or n2 < PERIODIC_MIN_ON:
            continue
        greater = float(rank_sums[phase]) - n1 * (n1 + 1) / 2.0
        z = (greater - n1 * n2 / 2.0) / math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
        if best is None or z > best[0]:
            best = (z, phase)
    if best is None or 0.5 * math.erfc(best[0] / math.sqrt(2)) * period > PERIODIC_LEVEL:
        return None
    on = phase_of == best[1]
    on_med, off_med = float(np.median(dur[on])), float(np.median(dur[~on]))
    total_s = float(dur.sum() * weight)
    # Undecimated, the steps that ran it are counted; a decimated clock keeps some phases more
    # than others, so they are 1 in ``period`` of the run's steps.
    runs_it = float(on.sum()) if weight == 1 else len(steps) * weight / period
    return PeriodicCost(
        period=period,
        phase=best[1],
        on_steps=int(on.sum()) * weight,
        off_steps=int((~on).sum()) * weight,
        on_median_s=on_med,
        off_median_s=off_med,
        share=max(0.0, on_med - off_med) * runs_it / total_s if total_s > 0 else 0.0,
        total_s=total_s,
        own_time=own is not None,
    )


def _mean_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, tied values sharing their mean rank."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)
    mean = last - (counts - 1) / 2.0
    out: np.ndarray = mean[inverse]
    return out
