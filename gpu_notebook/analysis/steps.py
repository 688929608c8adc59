"""Step statistics and the hooks-only phase split, from what the step clock saw."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np

from gpu_notebook.analysis.interference import own_phase_split, wait_share
from gpu_notebook.records import (
    PhaseBreakdown,
    RunPhase,
    StepClockRecord,
    StepPhases,
    StepStats,
    StepTiming,
)

HOOK_PHASES: tuple[str, ...] = ("data", "forward", "backward", "optimizer", "other")


def steady_steps(record: StepClockRecord, warmup_steps: int) -> tuple[StepTiming, ...]:
    """The steps after the warm-up, or every step when too few remain to skip any."""
    kept = tuple(s for s in record.steps if s.index >= warmup_steps)
    return kept if len(kept) >= 2 else record.steps


def step_stats(record: StepClockRecord, warmup_steps: int) -> StepStats:
    steps = steady_steps(record, warmup_steps)
    if not steps:
        return StepStats(count=record.step_count, median_s=None, p90_s=None)
    durations = np.fromiter((s.duration_s for s in steps), dtype=float)
    median_s = float(np.median(durations))
    p90_s = float(np.percentile(durations, 90))
    sized = [s.batch_size for s in steps if s.batch_size]
    sizes = Counter(sized)
    batch = sizes.most_common(1)[0][0] if sizes else None
    # The samples a step trains on average over the median step: where batches differ (a short
    # last batch an epoch, a bucketing sampler) the modal batch overstated it (32 + 16 an epoch
    # read 373 samples/s "batch 32" where the steps trained 24 each, unseen round 18's HF
    # Trainer); alike, it is the batch.
    per_s = sum(sized) / len(sized) / median_s if batch and median_s > 0 else None
    return StepStats(
        count=record.step_count,
        median_s=median_s,
        p90_s=p90_s,
        batch_size=batch,
        samples_per_s=per_s,
    )


def hook_phases(record: StepClockRecord, warmup_steps: int) -> PhaseBreakdown | None:
    """Phases as the hooks timed them: data, forward, backward, optimizer; the rest is "other".

    Copies and syncs happen inside these ranges and cannot be told apart without a trace, so
    they are "not measured" here rather than zero. The phases never sum past the step (see
    ``_within_step``).
    """
    steps = tuple(s for s in steady_steps(record, warmup_steps) if s.timed)
    if not steps:
        return None

    def split(s: StepTiming, dur_us: float) -> dict[str, float]:
        parts = {
            "data": s.data_s * 1e6,
            "forward": s.forward_s * 1e6,
            "backward": s.backward_s * 1e6,
            "optimizer": s.optimizer_s * 1e6,
        }
        parts = _within_step(parts, dur_us)
        parts["other"] = max(0.0, dur_us - sum(parts.values()))
        return parts

    return hook_breakdown(steps, split, HOOK_PHASES)


def hook_breakdown(
    steps: Iterable[StepTiming],
    split: Callable[[StepTiming, float], dict[str, float]],
    measured: tuple[str, ...],
) -> PhaseBreakdown:
    """The step clock's steps as a breakdown, each step's time divided by ``split(step,
    duration_us)``; ``measured``: the phases it measures (and any ``split`` adds, after them)."""
    out: list[StepPhases] = []
    totals = dict.fromkeys(measured, 0.0)
    total_us = 0.0
    for s in steps:
        # Our own work in the step (a profiler starting at its boundary) is taken out: the
        # step as the code ran it (the data wait never holds it: the step clock leaves it out).
        dur_us = max(0.0, s.duration_s - s.ours_s) * 1e6
        parts = split(s, dur_us)
        for k, v in parts.items():
            totals[k] = totals.get(k, 0.0) + v
        total_us += dur_us
        out.append(
            StepPhases(index=s.index, start_us=s.start_s * 1e6, duration_us=dur_us, phase_us=parts)
        )
    return PhaseBreakdown(
        source="hooks",
        steps=tuple(out),
        total_us=total_us,
        phase_total_us=totals,
        measured=tuple(dict.fromkeys((*measured, *totals))),
    )


def _within_step(parts: dict[str, float], dur_us: float) -> dict[str, float]:
    """Hook-timed phases trimmed so that they never sum past the step they belong to.

    The one known overlap: a closure optimizer (``opt.step(closure)``: LBFGS, Lightning's
    automatic optimization) runs forward and backward inside the optimizer's span, so both
    counted them in records made before the step clock timed the closure's calls apart; the
    excess is taken from the optimizer first. What still exceeds the step
    (clock granularity, a hook that saw a nested call twice) is scaled down evenly.
    """
    excess = sum(parts.values()) - dur_us
    if excess <= 0:
        return parts
    out = dict(parts)
    out["optimizer"] = max(0.0, out["optimizer"] - excess)
    total = sum(out.values())
    if total > dur_us > 0:
        out = {k: v * dur_us / total for k, v in out.items()}
    elif dur_us <= 0:
        out = dict.fromkeys(out, 0.0)
    return out


# Fewer steps than this with the phase timed outside our own work: no run-wide figure.
RUN_PHASE_MIN_STEPS = 8


def run_phase(
    record: StepClockRecord,
    warmup_steps: int,
    phase: Literal["data", "forward", "optimizer"],
    skip: frozenset[int] = frozenset(),
    *,
    cpu_clock: bool = False,
) -> RunPhase | None:
    """The data wait's, the forward span's or the optimizer step's share of the step time over
    the run, as the step clock timed it (the forward span: from the data's end to the backward,
    so the model's forward and what the loop does before it, a host-to-device copy among them): every steady step that timed the phase (timed steps, and lean ones
    when the record says lean steps keep it: ``lean_data``, ``lean_optimizer``), leaving out
    ``skip`` (the profiled windows and other steps our own work disturbed, ``analysis.own_cost``).

    The profiler's cost lands on every operator, so a phase of many small ops reads larger in
    the window than in the run (an unfused optimizer's 14% in a window, 3.7% over the run), and
    the other phases smaller (a data wait beside a model of small ops: a workers fix measured
    2.3x against a bound of 1.57x from the window). A fix's bound rests on this figure where it
    exists. None: the phase was not timed over enough steps (the optimizer does not end the
    steps; lean steps with the optimizer hooks off; fewer than ``RUN_PHASE_MIN_STEPS``).

    ``cpu_clock`` (the optimizer on a CPU run): also the update's share as its CPU time over
    the steps' own time (``RunPhase.cpu_share``).
    """
    if phase == "optimizer":
        if record.anchor != "optimizer":
            return None
        lean = record.lean_optimizer
    elif phase == "forward":
        lean = False  # lean steps time no forward
    else:
        lean = record.lean_data
    steps = [
        s for s in steady_steps(record, warmup_steps) if (s.timed or lean) and s.index not in skip
    ]
    if len(steps) < RUN_PHASE_MIN_STEPS:
        return None
    # Each step's own time, its wait for a core taken off the phases it went to
    # (``own_phase_split``): a time slice lost to another process is not the phase it hit.
    rows = np.array([_step_parts(s) for s in steps], dtype=float)
    waits = np.fromiter(
        (wait_share(s) * max(0.0, s.duration_s - s.ours_s) for s in steps),
        dtype=float,
        count=len(steps),
    )
    own = own_phase_split(rows, waits)
    phase_s = own[:, _PART_COLUMNS.index(phase)]
    own_s = own.sum(axis=1)
    total = float(own_s.sum())
    if total <= 0:
        return None
    spent = float(phase_s.sum())
    low, high = share_interval(phase_s, own_s)
    wall = float(rows.sum())
    parts = [(float(phase_s[k].sum()), float(own_s[k].sum())) for k in _fifths(len(steps))]
    fifths = [a / b for a, b in parts if b > 0] if all(b > 0 for _, b in parts) else []
    cpu = _update_cpu_share(record, steps, own_s) if cpu_clock and phase == "optimizer" else None
    return RunPhase(
        min(1.0, spent / total),
        len(steps),
        spent / len(steps),
        total / len(steps),
        low,
        high,
        wait_share=min(1.0, float(waits.sum()) / wall) if wall > 0 else 0.0,
        wall_share=float(rows[:, _PART_COLUMNS.index(phase)].sum()) / wall if wall > 0 else None,
        fifths_low=min(fifths) if fifths else None,
        fifths_high=max(fifths) if fifths else None,
        cpu_share=cpu[0] if cpu else None,
        cpu_low_share=cpu[1] if cpu else None,
        cpu_high_share=cpu[2] if cpu else None,
        cpu_fifths_low=cpu[3] if cpu else None,
        cpu_fifths_high=cpu[4] if cpu else None,
    )


def _update_cpu_share(
    record: StepClockRecord, steps: list[StepTiming], own_s: np.ndarray
) -> tuple[float, float, float, float, float] | None:
    """The optimizers' own CPU time a training step (their CPU a call, times the calls a
    training step) over the mean own time of ``steps`` whose wait for a core was read,
    its 90% interval over those steps and the least and the most its fifths read. None: a class timed under ``RUN_PHASE_MIN_STEPS``
    steps, or as few steps with a wait read.

    On a loaded machine the wait is read at step ends, not where it fell, and is taken off
    each phase's excess over its least (``own_phase_split``): the update, whose least is its
    own time, lost slices it never waited in (save_every_step's Adam read 4.6% at load 25 where
    its 3.6 ms of CPU are 21% of the step's 17 ms own time; lr_finder_runs' SGD 10% and 15%).
    Its CPU clock has no wait in it."""
    timed = record.optimizer_cpu
    if not timed or any(n < RUN_PHASE_MIN_STEPS for _, n in timed.values()):
        return None
    read = np.array([s.wait_s is not None for s in steps], dtype=np.bool_)
    if int(read.sum()) < RUN_PHASE_MIN_STEPS:
        return None
    own = own_s[read]
    if float(own.sum()) <= 0:
        return None
    # A class's steps may be several a training step (a GAN's G and D, both Adam): its CPU a
    # call, times the optimizer calls a training step.
    calls = record.event_counts.get("optimizer", record.step_count) / max(1, record.step_count)
    update_s = sum(c for c, _ in timed.values()) / sum(n for _, n in timed.values()) * calls
    per_step = np.full(own.size, update_s)
    low, high = share_interval(per_step, own)
    share = min(1.0, update_s * own.size / float(own.sum()))
    # A fifth whose steps read no own time (all ours, or all a wait for a core) has no share
    # of its own: the whole run's stands for every fifth.
    parts = [(k.size, float(own[k].sum())) for k in _fifths(own.size)]
    fifths = (
        [min(1.0, update_s * n / t) for n, t in parts] if all(t > 0 for _, t in parts) else [share]
    )
    return share, min(low, share), max(high, share), min(fifths), max(fifths)


def _fifths(n: int) -> list[np.ndarray]:
    """The indices 0..n-1 in five runs of consecutive steps, as even as they divide."""
    return [k for k in np.array_split(np.arange(n), 5) if k.size]


_PART_COLUMNS = ("data", "forward", "backward", "optimizer", "other")


def _step_parts(s: StepTiming) -> list[float]:
    """The step's phases as the hooks timed them (``_PART_COLUMNS``, seconds), summing to the
    step less our own work in it (as ``hook_phases`` splits it)."""
    dur = max(0.0, s.duration_s - s.ours_s)
    parts = _within_step(
        {"data": s.data_s, "forward": s.forward_s, "backward": s.backward_s,
         "optimizer": s.optimizer_s},
        dur,
    )  # fmt: skip
    return [*parts.values(), max(0.0, dur - sum(parts.values()))]


# What a run's phase share is known to (a 90% interval, as compare_samples' speedups), over this
# many seeded resamples: the same steps give the same interval.
SHARE_LEVEL = 0.9
SHARE_RESAMPLES = 1000


def share_interval(
    phase_s: np.ndarray, step_s: np.ndarray, *, seed: int = 0
) -> tuple[float, float]:
    """The 90% interval of a run's phase share ``sum(phase) / sum(step)``: a seeded moving-block
    bootstrap over the steps (blocks of ~n^(1/3) steps keep a slow drift or a periodic pattern
    together), read off by order statistics, no distribution assumed.

    It is how well the run's steps pin the share down, not how much each step varies: a phase
    that takes 40% of one step in four is a steady 10% of the run, while a phase seen in 2 of
    30 steps gives a wide interval reaching down towards 0 (a fix for it may show nothing).
    """
    n = len(phase_s)
    if n == 0 or float(step_s.sum()) <= 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    block = max(1, round(n ** (1 / 3)))
    blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(SHARE_RESAMPLES, blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(SHARE_RESAMPLES, -1)
    idx = idx[:, :n]
    shares = np.minimum(1.0, phase_s[idx].sum(axis=1) / np.maximum(step_s[idx].sum(axis=1), 1e-12))
    tail = (1.0 - SHARE_LEVEL) / 2 * 100
    return float(np.percentile(shares, tail)), float(np.percentile(shares, 100 - tail))
