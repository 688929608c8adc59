"""Findings about the whole run rather than its typical step: a window that does not represent
the run, drift, jitter, periodic stalls and memory that grows step after step.

They read ``Analysis.shape`` (analysis/run_trend.py: every step the step clock saw). Each one
gives the share of the run's time it stands for and an Amdahl bound on that share. Our levels,
stated in each finding's ``source``: a drift is the last fifth of the run at >= 1.5x the first
fifth's median step; jitter is p90/median >= 1.5 not already explained by stalls or drift; a
stall is a step over 3x the median (analysis/steady.py), worth a finding from 2% of the run's
time; memory creeps when a straight line (R^2 >= 0.8) fits it after the first tenth of the run,
grows by >= 16 MiB over it, and the later half of the run alone still grows at >= half the
line's rate (growth that levelled off is no leak).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.blocks import (
    PROFILER_SETTING,
    Periodic,
    epoch_blocks,
    kept_graph_line,
    periodic_blocks,
)
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, MemoryTrend, Run, RunShape, Said, StallPattern
from gpu_notebook.rules.common import (
    SUGGEST,
    WARN,
    Rule,
    data_wait,
    found,
    gain_bound,
    severity_of,
    share,
)
from gpu_notebook.rules.input_pipeline import remade_loader
from gpu_notebook.rules.restarted_workers import restarted_workers

DRIFT_FACTOR = 1.5
BUSY_SLOWDOWN = 1.3  # steps under load this much slower than the others: the machine's
JITTER = 1.5
# ... and the time its steps spend above the median is at least this share of the run: below it,
# making every step the median would gain less than the run-to-run noise (1.05x).
JITTER_SHARE = 0.05
STALL_SHARE = 0.02
MOSTLY = 0.5  # of the stalls' extra time: the phase that explains them
MEMORY_R2 = 0.8
MEMORY_GROWTH_BYTES = 16 * 2**20
# The later half's own rate against the whole line's: a leak grows at one rate to the end (1.0);
# growth that stops after warm-up (a per-item cache filled once, the caching allocator or malloc
# grown to the largest batch so far, whose new highs thin out as the run goes on) keeps under
# half of it in the run's later half.
MEMORY_LATE_SHARE = 0.5


@dataclass(frozen=True)
class WindowUnrepresentative(Said):
    shape: RunShape
    covers: float  # steps like the window's: their share of the run's step time
    ratio: float  # the run's median step / the window's
    whole_phases: bool  # hook timings give every step's phase split


@dataclass(frozen=True)
class Drift(Said):
    shape: RunShape
    factor: float  # last fifth / first fifth
    removed: float | None  # time above the first fifth's pace
    bound: float | None
    unread: int | None  # readings of the machine's load, when too few to rule it out
    # The first and last fifths hold too few steps we did not disturb to give the slowdown a
    # range (a short run whose first fifth is mostly the profiled window): no bootstrap low end.
    unbounded: bool = False


@dataclass(frozen=True)
class Jitter(Said):
    shape: RunShape
    above: float | None  # time above the median step
    bound: float | None


@dataclass(frozen=True)
class PeriodicStall(Said):
    stalls: StallPattern
    median_s: float | None
    bound: float | None
    block: Periodic | None  # the cell's periodic block that matches
    at_random: bool  # no period and no block: often the machine
    own_time: bool = False  # judged on the steps' own time (each less its wait for a core)


@dataclass(frozen=True)
class MemoryCreep(Said):
    trend: MemoryTrend
    kept: tuple[int, str, str] | None  # (line, text, name) keeping its autograd graph


# The loop's thread waits for a core at least this share of a step: a machine this busy
# preempts steps at random, so uneven steps say nothing of the code.
MACHINE_WAIT = 0.2
# The wait is the median of the sampler's readings (a few a second), the stalls' extra time a
# sum over steps: two clocks reading the same preemptions, each off by a reading's share.
MACHINE_COVER = 1.25


def machine_explains(shape: RunShape, excess_share: float | None) -> bool:
    """The time the loop's thread waited for a core (schedstat) covers the extra time of uneven
    or stalled steps (``excess_share`` of the run; None: jitter): the machine's, not the code's.
    A stall that matches a periodic block of the cell stays the code's (callers check)."""
    wait = shape.run_wait_share
    if excess_share is not None and shape.stall_wait_share is not None:
        # Stalls are read against the wait of the readings they fall in (a run busy in its
        # second half: 44% over the run, 77% around its stalls).
        wait = max(wait or 0.0, shape.stall_wait_share)
    if wait is None or wait < MACHINE_WAIT:
        return False
    return excess_share is None or excess_share <= MACHINE_COVER * wait


def window_unrepresentative(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The profiled window saw steps unlike most of the run."""
    shape = analysis.shape
    if shape is None or shape.represents is not False or shape.window_median_s is None:
        return None
    covers = shape.window_covers or 0.0
    run_median = shape.window_run_median_s
    ratio = run_median / shape.window_median_s if shape.window_median_s > 0 else float("inf")
    said = WindowUnrepresentative(shape, covers, ratio, analysis.window_phases is not None)
    return found("run.window_unrepresentative", "medium", said)


def drift(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Steps get slower (or faster) over the run."""
    shape = analysis.shape
    factor = shape.drift if shape is not None else None
    if shape is None or factor is None or factor < DRIFT_FACTOR:
        return None
    if slowed_by_waits(shape):
        return None  # the steps slowed by the time they waited for a core: machine.slowed says so
    if _pool_starved(shape, analysis):
        return None  # machine.oversubscribed says so
    if (
        shape.window_gpu_paced
        and shape.window_median_s is not None
        and shape.last_median_s <= shape.window_median_s * DRIFT_FACTOR
    ):
        # The host ran ahead of the GPU: its first steps only filled CUDA's launch queue, and
        # the run's end goes at the GPU's pace for the profiled steps (an fp32 MLP on an H200:
        # 2.6 ms a step while the queue filled, 31.7 ms after): no step grew.
        return None
    if (
        shape.busy_slowdown is not None
        and shape.busy_slowdown >= BUSY_SLOWDOWN
        and factor <= shape.busy_slowdown * 1.25
    ):
        return None  # the slowdown is that of the steps run under load: machine.busy says so
    if shape.drift_low is not None and shape.drift_low <= 1.0:
        return None  # the fifths' ranges overlap: a few noisy steps, not a measured slowdown
    own = shape.own
    if own is not None and own.drift_low is not None and own.drift_low <= 1.0:
        return None  # the steps' own time (their wait for a core out) did not measurably grow
    if shape.slope_s_per_step is not None and shape.slope_s_per_step <= 0:
        # Fifths apart over a flat or falling trend are where the load happened to be, not a
        # slowdown (a conv net at load 12: slow, faster, slow again; "1.7x" beside "trend:
        # -563888 us more every 100 steps").
        return None
    removed = shape.drift_share
    bound = gain_bound(removed, analysis)
    severity = severity_of(removed, low=0.05) or "low"
    readings = sum(1 for s in run.samples.samples if s.run_wait_pct is not None)
    unread = None
    if shape.own_drift is None and readings < 2:
        # A short run sees fewer than two readings of the thread's wait for a core, so no
        # machine guard above could apply: a loaded machine's slowdown reads as the code's
        # (a 30-step run under load: "Steps slow down" [high] over its real cause).
        severity, unread = "low", readings
    unbounded = shape.drift_low is None and (own is None or own.drift_low is None)
    if unbounded:
        # No range: a level shift in 30 steps (torch's two threads on two cores switching
        # between 0.6 and 2 ms a step, quiet or loaded) must not outrank the cell's causes.
        severity = "low"
    said = Drift(shape, factor, removed, bound, unread, unbounded)
    return found("run.drift", severity, said, phase_share=removed, bound=bound)


def slowed_by_waits(shape: RunShape) -> bool:
    """The run drifted, and its steps' own time (each less its wait for a core) did not."""
    drift, own = shape.drift, shape.own_drift
    return drift is not None and own is not None and drift >= DRIFT_FACTOR > own


def _pool_starved(shape: RunShape, analysis: Analysis) -> bool:
    """The loop's own time grew while the work in it did not, in a process whose torch pool
    wants more threads than the cores the others leave: the loop thread waits for pool threads
    that wait for a core. Asleep, its time on a core stays (4 threads on 2 cores under a
    spinner: 7 ms of own time a step became 65 ms as the other job got busier, with 7-10 ms on
    a core throughout); spinning at the region's barrier, that grows too (2 threads, the loop
    waiting 66% then 89% of a step: own time and time on a core both 3-4x), and the work, own
    time less the share the pool waited (``OwnTime.pool_drift``), stays; so does the pace of
    the steps nobody preempted (``OwnTime.quiet_drift``: ~1 ms steps of per-sample gradients,
    each preempted one 5-50 ms of own time, the pool's)."""
    m = analysis.machine
    own = shape.own
    if m is None or own is None or m.threads_wanted is None:
        return False
    if (m.torch_threads or 1) <= 1 or m.threads_wanted <= m.free_cores + 0.5:
        return False
    kept = [d for d in (own.cpu_drift, own.pool_drift, own.quiet_drift) if d is not None]
    return any(d < DRIFT_FACTOR for d in kept)


def jitter(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Step times spread widely, without a drift or a stall pattern to explain them."""
    shape = analysis.shape
    if shape is None or shape.jitter < JITTER or shape.stalls is not None:
        return None
    if machine_explains(shape, None):
        return None
    if shape.drift is not None and shape.drift >= DRIFT_FACTOR:
        return None
    above = shape.above_median_share
    if above is None or above < JITTER_SHARE:
        return None  # a few slow steps that cost the run nothing measurable
    bound = gain_bound(above, analysis)
    said = Jitter(shape, above, bound)
    return found("run.jitter", "low", said, phase_share=above, bound=bound)


def periodic_stall(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Some steps take several times the median; every N steps when they recur regularly."""
    shape = analysis.shape
    stalls = shape.stalls if shape is not None else None
    own = shape.own if shape is not None else None
    if own is not None:
        # Every step's wait for a core is known: a stall is a step whose own time (its wall
        # time less that wait) is over STALL_FACTOR x the median own time. Preemptions (a
        # spinner's time slice every few steps) are the machine's; stalls the code makes
        # (a checkpoint's write, a validation pass) are still there.
        stalls = own.stalls
    if stalls is None or stalls.share < STALL_SHARE:
        return None
    block = matching_block(run, facts, stalls.period_steps, own_time=own is not None)
    if own is None and shape is not None and block is None and shape.busy_stalls:
        # Stalls of steps that ran while other processes' load rose above the run's quiet
        # level are the machine's (machine.busy names them); the code answers for the rest.
        stalls = shape.quiet_stalls
        if stalls is None or stalls.share < STALL_SHARE:
            return None
        block = matching_block(run, facts, stalls.period_steps)
    if (
        (own is None or not stalls.period_steps)
        and shape is not None
        and machine_explains(shape, stalls.share)
        and block is None
    ):
        # Own-time stalls at random on a thread that waits for a core most of its time are
        # the machine's too: a thread of this process (the sampler) preempted while it holds
        # the GIL makes the loop's thread sleep, not wait for a core (seen: syncs loaded, the
        # thread waiting 92% of a step, 4 steps at 12-24 ms of own time among 3 ms ones).
        # The thread waited for a core as long as the stalls' extra time: preemptions. On a
        # core shared with a spinning process they even keep a period (the scheduler's time
        # slice, every ~N uniform steps), so a period alone is no evidence of the code; a
        # periodic block in the cell that matches it is (a checkpoint on a busy machine).
        return None
    if block is None and _phase_rule_speaks(stalls, analysis):
        # The stalled steps' extra time is the data wait (workers handing batches over together)
        # or the host syncs, with no periodic block of the cell behind it: the input or sync
        # rule names that cause, with a fix; a stall finding would count the same time again.
        return None
    if block is None:
        loader = remade_loader(run, analysis, facts)
        if loader is not None and loader.gain_bound is not None:
            # The stalls are the start-up of a DataLoader made anew every epoch, which
            # input.remade_loader names with their cost and its fix (build it once): a stall
            # finding beside it said "make the periodic work cheaper or rarer" of the same time.
            return None
        kept = restarted_workers(run, analysis, facts)
        if kept is not None and kept.gain_bound is not None:
            # The same start-ups of one loader iterated again each epoch without persistent
            # workers (a Lightning Trainer's train_dataloader): input.restarted_workers names
            # them with their fix (unseen round 21: "every 6 steps a step stalls", no cause).
            return None
    bound = gain_bound(stalls.share, analysis)
    severity = severity_of(stalls.share, low=STALL_SHARE) or "low"
    at_random = not stalls.period_steps and block is None
    if block is not None and block.setting == PROFILER_SETTING:
        # The cell's own profiler, run on purpose: said, with its cost, never ranked above the
        # training's own causes (nothing in the training removes it).
        severity = "low"
    if at_random:
        # No schedule and no periodic block in the cell: stalls at random are most often the
        # machine (other processes taking the cores), not the code. Said, not ranked first.
        severity = "low"
    median_s = own.median_s if own is not None else shape.median_s if shape else None
    said = PeriodicStall(stalls, median_s, bound, block, at_random, own is not None)
    return found("run.periodic_stall", severity, said, phase_share=stalls.share, bound=bound,
                 line=block.line if block is not None else None)  # fmt: skip


def _phase_rule_speaks(stalls: StallPattern, analysis: Analysis) -> bool:
    """Most of the stalled steps' extra time went to the data wait (or the host syncs), and
    that phase reaches its own rule's level over the run (the rules read ``analysis`` with the
    stalled steps left out: the data wait of the whole run is ``run_data``)."""
    if (stalls.phase_share or 0.0) < MOSTLY:
        return False
    if stalls.phase == "data":
        data = data_wait(analysis)
        return data is not None and data >= SUGGEST
    sync = share(analysis, "sync") if stalls.phase == "sync" else None
    return sync is not None and sync >= WARN


def matching_block(
    run: Run, facts: SourceFacts, period: int | None, own_time: bool = False
) -> Periodic | None:
    blocks = periodic_blocks(facts.tree, facts.live.ints)
    if period is not None and not blocks:
        return _epoch_block(facts)
    if not blocks:
        return None
    if period is None:
        # Stalls of the steps' own time (each less its wait for a core) with no period match
        # a block whose period is set at run time (`% cfg.every`), not one with a literal
        # period: that block would have given them its period (REINFORCE's episodes of random
        # length read "(logging)" [high] from `if episode % 10 == 0: print(...)`). On wall
        # times a busy machine's preemptions may hide a checkpoint's period: any one block.
        if own_time and blocks[0].every:
            return None
        return blocks[0] if len(blocks) == 1 else None
    # A decimated step list sees the period as a multiple of the decimation.
    tolerance = max(1, run.steps.decimation)
    close = [
        b
        for b in blocks
        if b.every
        and (abs(b.every - period) <= tolerance or (period % b.every == 0 and b.every > tolerance))
    ]
    if close:
        return min(close, key=lambda b: abs(b.every - period))
    unknown = [b for b in blocks if not b.every]  # `% eval_interval` read from a config
    if unknown:
        return unknown[0] if len(unknown) == 1 else None
    return _epoch_block(facts)


def _epoch_block(facts: SourceFacts) -> Periodic | None:
    """The one loop the epoch loop runs beside its step loop (a validation pass each epoch):
    stalls with a period that no ``if step % N`` block gives are the epoch's (its length in
    steps is the loader's, known at run time only). Of several, the one validation loop."""
    blocks = epoch_blocks(facts.tree)
    if len(blocks) > 1:
        blocks = [b for b in blocks if b.work == "validation"]
    return blocks[0] if len(blocks) == 1 else None


def memory_creep(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Memory grows in a straight line with the step count: something keeps every step's tensors."""
    shape = analysis.shape
    if shape is None:
        return None
    growing = [m for m in shape.memory if creeps(m)]
    if not growing:
        return None
    trend = max(growing, key=lambda m: (m.kind == "gpu", m.bytes_per_step))
    kept = kept_graph_line(facts.tree)
    params: dict[str, str | int | float | bool | None] = {}
    fix_id = None
    if kept is not None:
        fix_id, params = "detach_kept_tensors", {"names": kept[2]}
    soon = trend.full_at_step is not None and trend.full_at_step < 10 * max(1, shape.steps)
    return found("run.memory_creep", "high" if soon else "medium", MemoryCreep(trend, kept),
                 line=kept[0] if kept is not None else None, fix_id=fix_id, fix_params=params)  # fmt: skip


def creeps(m: MemoryTrend) -> bool:
    """Memory that grows in a straight line by at least the creep level and still grows at half
    that line's rate over the run's later half and over its last epoch (the job report asks
    too): a line fitted through growth that levelled off reads straight enough, its later half
    does not grow; growth that slows each epoch has little left in the last one."""
    growth = m.bytes_per_step * (m.last_step - m.first_step)
    if not (m.bytes_per_step > 0 and m.r2 >= MEMORY_R2 and growth >= MEMORY_GROWTH_BYTES):
        return False
    late = m.late_bytes_per_step
    if late is not None and late < MEMORY_LATE_SHARE * m.bytes_per_step:
        return False
    # Growth that slows each epoch: the last epoch keeps little of the line's rate.
    last_epoch = m.last_epoch_bytes_per_step
    if last_epoch is not None and last_epoch < MEMORY_LATE_SHARE * m.bytes_per_step:
        return False
    # Growth only where the batches reached a new largest size: the allocator's, not a leak.
    between = m.between_highs_bytes_per_step
    return between is None or between >= MEMORY_LATE_SHARE * m.bytes_per_step


TIE = 180  # where its findings tie: the verdict table's order (rules._families)
RULES: tuple[Rule, ...] = (window_unrepresentative, periodic_stall, memory_creep, drift, jitter)
