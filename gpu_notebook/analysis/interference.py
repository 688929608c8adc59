"""What else used the machine while the code ran, step by step.

The sampler reads the whole machine's busy share per core, this process and its children
(DataLoader workers) a few times a second. What the machine did beyond us is the other
processes' load, in cores: ``system% x cores - (ours + children)``. Each step is placed on that
series by its middle (the step clock's times and the sampler's share one origin), so a step
knows how busy the rest of the machine was while it ran.

A step ran *under load* when the others' load then was at least ``BUSY_CORES`` above the run's
own quiet level (its 10th percentile): a machine busy from start to end is the run's normal,
named by the shared-machine finding (rules/machine.py), not a change within the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from gpu_notebook.records import (
    PhaseBreakdown,
    ProfileWindow,
    Run,
    Sample,
    StepPhases,
    StepTiming,
)

__all__ = [
    "BUSY_CORES",
    "busy_steps",
    "counted_step_times",
    "in_step_waits",
    "marked_step_waits_s",
    "marked_waits",
    "others_cores",
    "own_phase_split",
    "own_step_times",
    "own_time_phases",
    "partly_read_own_times",
    "run_wait_readings",
    "sample_series",
    "step_load_cores",
    "step_run_wait",
    "wait_share",
    "window_waits",
]

# Other processes busier than the run's quiet level by this many cores: the step ran under load.
BUSY_CORES = 0.5
# Or the measured thread waited for a core this much more of the step than at its quietest.
BUSY_WAIT = 0.2


def usable_cores(run: Run) -> int:
    """Cores this process may run on (its affinity when known), at least 1."""
    return max(1, run.env.usable_cores or run.env.cpu_count)


def others_cores(sample: Sample, cores: int) -> float | None:
    """Cores busy with other processes at ``sample`` (not ours, not our children), or None."""
    ours_pct = sample.ours_cpu_pct()  # None: a worker listed, not read (not "idle")
    if sample.system_cpu_pct is None or ours_pct is None:
        return None
    return max(0.0, sample.system_cpu_pct / 100.0 * cores - ours_pct / 100.0)


def sample_series(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(t_s, others' cores) of every sample that has both figures."""
    cores = run.env.cpu_count
    t: list[float] = []
    load: list[float] = []
    for s in run.samples.samples:
        value = others_cores(s, cores)
        if value is not None:
            t.append(s.t_s)
            load.append(value)
    return np.asarray(t, dtype=float), np.asarray(load, dtype=float)


def step_load_cores(run: Run, steps: Sequence[StepTiming]) -> np.ndarray | None:
    """Others' load (cores) while each step ran, aligned with ``steps``; None: not sampled.

    A sample reads the interval before it, so a step is given the sample that follows its middle.
    """
    t, load = sample_series(run)
    if len(t) < 2 or not steps:
        return None
    mid = np.fromiter((s.start_s + s.duration_s / 2 for s in steps), dtype=float)
    at = np.clip(np.searchsorted(t, mid, side="left"), 0, len(t) - 1)
    out: np.ndarray = load[at]
    return out


def step_run_wait(run: Run, steps: Sequence[StepTiming]) -> np.ndarray | None:
    """Share of each step the measured thread waited for a core (schedstat), aligned with
    ``steps``; None: not sampled (not Linux, or an older record)."""
    found = run_wait_readings(run, steps)
    if found is None:
        return None
    at, w = found
    out: np.ndarray = w[at]
    return out


def run_wait_readings(
    run: Run, steps: Sequence[StepTiming]
) -> tuple[np.ndarray, np.ndarray] | None:
    """(the reading each step falls in, aligned with ``steps``; every run-wait reading, as a
    share): a reading reads the interval before it, so a step is given the one after its
    middle. None: fewer than two readings, or no steps."""
    t = [s.t_s for s in run.samples.samples if s.run_wait_pct is not None]
    w = [s.run_wait_pct / 100.0 for s in run.samples.samples if s.run_wait_pct is not None]
    if len(t) < 2 or not steps:
        return None
    mid = np.fromiter((s.start_s + s.duration_s / 2 for s in steps), dtype=float)
    at = np.clip(np.searchsorted(np.asarray(t), mid, side="left"), 0, len(t) - 1)
    return at, np.asarray(w, dtype=float)


def marked_waits(window: ProfileWindow) -> dict[int, float] | None:
    """Each recorded step's wait for a core (s) by step index, as the window read it at the
    trace's own step marks (``ProfileWindow.step_waits_s``): the trace's steps exactly, where
    the step clock's waits (read at its own step ends) fall up to a time slice off them. None:
    not read."""
    if window.step_waits_s is None or window.first_step is None:
        return None
    return {window.first_step + k: w for k, w in enumerate(window.step_waits_s)}


def marked_step_waits_s(
    phases: PhaseBreakdown, marked: Mapping[int, float] | None
) -> Mapping[int, float] | None:
    """The waits for a core (s, by step index) the window read at the trace's own step marks
    (``marked_waits``), where they cover every step of ``phases``. The one source of the
    traced steps' waits for every consumer (the phases' own time, the host figures): where it
    is None (a split from the step clock's hooks, a record from before the marks, no
    schedstat, a step the marks did not read) each falls back to the step clock's readings,
    which lie a step off the trace's near a window's edges.

    The window reads the wait just after each mark (capture/profiler.py ``_mark``): a time
    slice taken between a mark and its reading is read in the step before the mark, yet lies
    in the step after it. A slice inside a step lengthens the step by as much, so a step read
    waiting longer than it lasted holds such a slice: its reading is the next step's (the last
    step's: after the window, no step's). Seen under load on a tiny-step loop, 2 windows in
    12: a 0.39 ms step read 24 ms waiting, the 25 ms step after it none."""
    if phases.source != "trace" or marked is None or not phases.steps:
        return None
    if any(p.index not in marked for p in phases.steps):
        return None
    out: dict[int, float] = {}
    carried = 0.0
    for k, p in enumerate(phases.steps):
        span_s = p.duration_us / 1e6
        read = marked[p.index]
        own_read = 0.0 if read > span_s else read
        out[p.index] = min(span_s, own_read + carried)
        nxt = phases.steps[k + 1].index if k + 1 < len(phases.steps) else None
        carried = read if read > span_s and nxt == p.index + 1 else 0.0
    return out


def own_step_times(steps: Sequence[StepTiming]) -> np.ndarray | None:
    """Each step's wall time less its thread's wait for a core during it (the step clock reads
    schedstat at each step end): the part of the step the machine did not take. Sleeping,
    blocking on I/O or on the GPU stay the step's own. None when a step carries no reading (not
    Linux, steps too short to pay for it, an older record): the sampler's readings then."""
    if not steps or any(s.wait_s is None for s in steps):
        return None
    waits = in_step_waits(steps)
    out: np.ndarray = np.fromiter(
        (max(0.0, s.duration_s - w) for s, w in zip(steps, waits, strict=True)),
        dtype=float,
        count=len(steps),
    )
    return out


def in_step_waits(steps: Sequence[StepTiming]) -> list[float]:
    """Each step's wait for a core, put in the step whose wall time holds it. The step clock
    takes a step's end time, then reads schedstat: a wait between the two (the loop thread
    handed the GIL to another thread of the process at a bytecode between them and, woken,
    waited for a core) is read with the step that ended but lies in the next one's wall time.
    A reading longer than its step's wall time crossed so where the next step, read too, holds
    it beside its own reading (a 0.37 ms step read 7.5 ms of wait, the 8.2 ms step after it 0:
    on 2 cores others held 1.8, the run's own median read 0 and its window 'unlike' it): the
    wait is the next step's, and the step's own time its wall time (the few microseconds it
    waited on its own are not known apart). Elsewhere a step keeps what it read (its own time
    clamps at 0): a next step that cannot hold it, or one not read (steps too short to read at
    every end, where a slow step's reading holds the earlier steps' waits since the last one).
    0.0 for a step not read."""
    out = [s.wait_s or 0.0 for s in steps]
    for k in range(len(steps) - 1):
        s, nxt = steps[k], steps[k + 1]
        if (
            s.wait_s is not None
            and nxt.wait_s is not None
            and nxt.index == s.index + 1
            and out[k] > s.duration_s
            and out[k + 1] + out[k] <= nxt.duration_s
        ):
            out[k + 1] += out[k]
            out[k] = 0.0
    return out


# The step clock reads a step's wait after it whenever the step took at least this long, even
# where steps are too short to read at every end (capture/stepclock.py, ``_STALL_READ_NS``).
SLOW_READ_S = 0.001


def partly_read_own_times(steps: Sequence[StepTiming]) -> np.ndarray | None:
    """Each step's own time where the steps carry their wait for a core only in part: a step
    with a wait counts its wall time less it (a wait read after a slow step is the one since
    the last reading, and may hold earlier steps' too: never more than the step itself), a step
    without one its wall time. The step clock reads every step at least ``SLOW_READ_S`` long
    while it reads at all (capture/stepclock.py), so an unread step is one under that level:
    its wait, if any, is under it too, and left in (the code's, in the machine's disfavour).
    None: no step carries a wait (no schedstat, an older record), or an unread step is slower
    than that level (it was not read for another reason: the sampler's readings then)."""
    if not steps or not any(s.wait_s is not None for s in steps):
        return None
    if any(s.wait_s is None and s.duration_s >= SLOW_READ_S for s in steps):
        return None
    waits = in_step_waits(steps)
    out: np.ndarray = np.fromiter(
        (max(0.0, s.duration_s - w) for s, w in zip(steps, waits, strict=True)),
        dtype=float,
        count=len(steps),
    )
    return out


def own_phase_split(parts: np.ndarray, waits: np.ndarray) -> np.ndarray:
    """Each step's phases (``parts``: steps x phases, each row summing to the step) less its
    thread's wait for a core (``waits``, aligned; 0 where not read): the phases the code spent.

    Which phase a time slice hit is not read (the step clock reads the wait at step ends), and
    the step's split is not where it went: a sub-millisecond step held 10 ms in its optimizer
    read 95% optimizer, and a few such steps moved a run's optimizer share between 5% and 27%
    and its 90% interval to 4-50% (a level below or above a line by where the slices fell).
    A phase never takes less than the code needs, so the wait comes off what each phase spent
    beyond its least over these steps (in proportion to that excess). A step whose wait is
    larger than all that excess shows that some phase's least held a wait too (no step ran it
    at its own pace): its wait comes off its phases in proportion to their wall time, as the
    wall split holds it. From the least it did not: the unfused-optimizer scenario's window at
    load 20-29 on 2 cores (8 steps of ~8 ms of its own, each waiting 93-97% in two or three
    slices of 30-500 ms) read the optimizer at 2.7%, 35% and 93% of the step where a phase's
    slice in every step set its least, and 42% quiet; the wall split read 58% and 60%. A step
    without a wait is left as it was: a quiet run reads exactly its wall times. Deterministic
    over the steps given, no history."""
    parts = np.asarray(parts, dtype=float)
    if parts.ndim != 2 or parts.shape[0] == 0:
        return parts
    total = parts.sum(axis=1)
    wait = np.clip(np.asarray(waits, dtype=float), 0.0, total)
    excess = parts - parts.min(axis=0)
    spare = excess.sum(axis=1)
    taken = np.minimum(wait, spare)
    out = parts - excess * (taken / np.maximum(spare, 1e-300))[:, None]
    scaled = parts * ((total - wait) / np.maximum(total, 1e-300))[:, None]
    kept: np.ndarray = np.maximum(np.where((wait > spare)[:, None], scaled, out), 0.0)
    return kept


def window_waits(
    parts: np.ndarray,
    indices: Sequence[int],
    matched_us: np.ndarray,
    clock_us: Mapping[int, float],
) -> np.ndarray:
    """The waits of a trace's profiled steps (``parts``: steps x phases, their ``indices``),
    read off the window as a whole: the step clock's waits over the window's steps (each
    window: a run of consecutive indices), at most its steps' time, go first to the steps'
    time beyond the window's least per phase (in proportion to it), the rest (up to what the
    steps' own readings took) to the steps as each one's own reading (``matched_us``, the
    clock's share of the step with the same index) has it.

    The trace's steps span the clock's only nearly (the profiler's step starts where the
    clock's does not): host_tiny_ops' loaded window put the clock's 54 ms wait of step 3 in the
    trace's step 2 (55 ms, 11 ms of its optimizer left after its own 79%) and took 98% off the
    trace's step 3 (0.8 ms, 12 us left); the data share read 1.6% (low) against 14-16%. Which
    step of a window the wait fell in is not read, as which phase is not: it is where the
    window's time exceeds its floors."""
    out: np.ndarray = np.array(matched_us, dtype=float)
    if len(indices) == 0:
        return out
    total = parts.sum(axis=1)
    spare = (parts - parts.min(axis=0)).sum(axis=1)
    cuts = [0, *(k for k in range(1, len(indices)) if indices[k] != indices[k - 1] + 1)]
    for a, b in zip(cuts, [*cuts[1:], len(indices)], strict=True):
        room = float(spare[a:b].sum())
        # Never more than the window's excess or, beyond it, what the steps' own readings
        # took: a clock step's wait can fall outside the trace's spans.
        clock = sum(clock_us.get(i, 0.0) for i in indices[a:b])
        pool = min(clock, max(room, float(out[a:b].sum())), float(total[a:b].sum()))
        if pool <= 0:
            continue
        first = spare[a:b] * min(1.0, pool / room) if room > 0 else np.zeros(b - a)
        rest = pool - float(first.sum())
        left = np.maximum(out[a:b] - first, 0.0)
        weight = left if left.sum() > 0 else total[a:b] - first
        out[a:b] = first + (rest * weight / weight.sum() if rest > 0 and weight.sum() > 0 else 0.0)
    capped: np.ndarray = np.minimum(out, total)
    return capped


def wait_share(step: StepTiming) -> float:
    """The share of ``step`` its thread waited for a core, 0..1 (0: not read). A step too short
    to be read at its end but read as slow carries the wait since the last reading, which may
    exceed it: the whole step then."""
    if not step.wait_s or step.duration_s <= 0:
        return 0.0
    return min(1.0, step.wait_s / step.duration_s)


def own_time_phases(
    phases: PhaseBreakdown,
    steps: Sequence[StepTiming],
    marked: Mapping[int, float] | None = None,
) -> PhaseBreakdown:
    """``phases`` (a window's or the timed steps' split) with each step's wait for a core taken
    out (``own_phase_split``). A trace's steps take the waits the window read at their own
    marks (``marked``: ``marked_waits``, through ``marked_step_waits_s``): each is its step's
    exactly. Without them, the share of the step the step clock read it waiting
    (``wait_share``), placed over the window as a whole (``window_waits``: a trace's step spans
    the clock's only nearly). A step that only waited is left out (unless all did): it shows
    nothing of the code's split. No step with a wait: ``phases`` as it is."""
    marks_s = marked_step_waits_s(phases, marked)
    share = {s.index: wait_share(s) for s in steps}
    if not phases.steps or not any(
        (marks_s if marks_s is not None else share).get(p.index) for p in phases.steps
    ):
        return phases
    names = sorted({k for p in phases.steps for k in p.phase_us})
    rows = np.array(
        [
            [
                *(p.phase_us.get(k, 0.0) for k in names),
                max(0.0, p.duration_us - sum(p.phase_us.values())),
            ]
            for p in phases.steps
        ],
        dtype=float,
    )
    if marks_s is not None:
        waits_us = np.fromiter((marks_s[p.index] * 1e6 for p in phases.steps), dtype=float)
    else:
        waits_us = np.fromiter(
            (share.get(p.index, 0.0) * p.duration_us for p in phases.steps), dtype=float
        )
        if phases.source == "trace":
            clock_us = {s.index: (s.wait_s or 0.0) * 1e6 for s in steps}
            waits_us = window_waits(rows, [p.index for p in phases.steps], waits_us, clock_us)
    own = own_phase_split(rows, waits_us)
    kept = [i for i in range(len(phases.steps)) if own[i].sum() > 0] or list(range(len(own)))
    out = tuple(
        StepPhases(
            index=phases.steps[i].index,
            start_us=phases.steps[i].start_us,
            duration_us=float(own[i].sum()),
            phase_us={
                k: float(v)
                for k, v in zip(names, own[i], strict=False)
                if k in phases.steps[i].phase_us
            },
        )
        for i in kept
    )
    totals = {
        k: float(own[kept, j].sum()) for j, k in enumerate(names) if k in phases.phase_total_us
    }
    wall_us = float(rows[kept].sum())
    own_us = float(own[kept].sum())
    return dataclasses.replace(
        phases,
        steps=out,
        total_us=own_us,
        phase_total_us=totals,
        waited_share=max(0.0, 1.0 - own_us / wall_us) if wall_us > 0 else 0.0,
        wall_phase_total_us={
            k: float(rows[kept, j].sum()) for j, k in enumerate(names) if k in phases.phase_total_us
        },
        wall_total_us=wall_us,
    )


def counted_step_times(
    walls_s: Sequence[Sequence[float]],
    waits_s: Sequence[Sequence[float | None] | None],
    processes: Sequence[int | None],
) -> tuple[tuple[tuple[float, ...], ...], bool]:
    """(each run's step times as runs of a before/after or a fix trial compare them, whether
    they are own times): where every step of every run carries its thread's wait for a core
    (``waits_s[i][k]``, the step clock's schedstat reading) and every run ran as many processes
    (its DataLoader workers and other children, known), each step counts its own time: its wall
    time less that wait. Else wall times.

    On a busy machine a sub-millisecond step held up 4-13 ms by a time slice in one step of five
    moved the mean ratio of the same fused-Adam change between 0.41x and 4.01x over four runs
    while the median step was faster in every one: the slices, not the change, decided. A
    change that added processes (workers) keeps wall times: the wait their CPU causes the loop's
    thread is its cost. The one rule for the notebook's before/after (report/compare) and
    ``--try-fixes`` (tryfix/trials)."""
    walls = tuple(tuple(float(x) for x in run) for run in walls_s)
    same = len(set(processes)) == 1 and None not in processes
    read = len(waits_s) == len(walls) and all(
        w is not None and len(w) == len(run) and all(x is not None for x in w)
        for run, w in zip(walls, waits_s, strict=True)
    )
    if not walls or not same or not read:
        return walls, False
    own = tuple(
        tuple(max(0.0, d - (x or 0.0)) for d, x in zip(run, w or (), strict=True))
        for run, w in zip(walls, waits_s, strict=True)
    )
    return own, True


def busy_steps(run: Run, steps: Sequence[StepTiming]) -> frozenset[int]:
    """Indices of the steps that ran while other processes were busier than the run's quiet
    level, or while the measured thread waited for a core notably more than it usually did."""
    out: set[int] = set()
    load = step_load_cores(run, steps)
    if load is not None:
        quiet = float(np.percentile(load, 10))
        out.update(s.index for s, x in zip(steps, load, strict=True) if x >= quiet + BUSY_CORES)
    wait = step_run_wait(run, steps)
    if wait is not None:
        usual = float(np.percentile(wait, 10))
        out.update(s.index for s, x in zip(steps, wait, strict=True) if x >= usual + BUSY_WAIT)
    return frozenset(out)
