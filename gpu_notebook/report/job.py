"""One report for a multi-rank job: per-rank facts in, the straggler and the job's what-if out.

Why waiting time and not step time: DDP keeps ranks in lockstep, so every rank's step lasts
as long as the slowest rank's; the difference hides in the collectives. A rank that is late
makes every other rank wait for it inside the all-reduce, so the straggler is the rank that
waits *least* while the others wait. Its cause is its own phase that lies furthest above the
same phase on the other ranks (a sleep, a slow ``__getitem__``...). Where waits were not
measured (no trace), the old rule stands: a median step more than 10% above the median rank.

Over the whole run (each rank's step clock, summarised in ``RankShape``), the same lockstep
decides the reading of a drift, stalls or memory creep: one rank alone means the ranks do not
wait for each other there; every rank means work they all do, or one rank's delay the others
wait through (in backward, inside DDP's gradient all-reduce). The levels are the single-rank
findings' own (rules/run_shape.py), so the job report and each rank's report agree.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from gpu_notebook.analysis.gpu_bounds import gpu_busy_bounds
from gpu_notebook.analysis.own_cost import disturbed_steps
from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.analysis.steps import steady_steps
from gpu_notebook.records import (
    JobReport,
    JobShape,
    RankFacts,
    RankInfo,
    RankShape,
    Report,
    RunShape,
    SaturatedHost,
    StepPhases,
    Straggler,
    WhatIf,
)
from gpu_notebook.rules.run_shape import DRIFT_FACTOR, JITTER, STALL_SHARE, creeps

# A lockstep job loses the others' wait on every step: from a tenth of the step it is worth a
# line (the same 10% the straggler-by-step rule and the communication rule use).
STRAGGLER_THRESHOLD = 0.10
# Phases a straggler's cause can be: time a rank spends on its own, not waiting on a peer.
_OWN_PHASES = ("data", "copy", "forward", "backward", "optimizer", "sync", "other", "unattributed")
# A rank's step spread comes from its step clock (every step) from this many steps on; below,
# from its profiled steps. Three profiled steps give a 10th-90th range of min-max of three.
CLOCK_SPREAD_STEPS = 10


def rank_facts(report: Report, info: RankInfo | None, files: Sequence[str] = ()) -> RankFacts:
    """The compact summary of one rank's report (what crosses ranks: never the trace)."""
    analysis, _ = without_stalls(report.analysis)
    phases = analysis.phases
    n = max(1, len(phases.steps)) if phases is not None else 1
    phase_s = (
        {p: _short(phases.phase_total_us.get(p, 0.0) / n / 1e6) for p in phases.measured}
        if phases is not None and phases.total_us > 0
        else {}
    )
    comm: float | None = (
        phase_s.get("comm") if phases is not None and "comm" in phases.measured else None
    )
    gpu = analysis.gpu
    comm_low: float | None = None
    if gpu is not None and gpu.comm_us > 0 and phases is not None:
        # The rank waits only where no computation overlaps its collectives (exposed time).
        host_comm = comm or 0.0
        exposed_us = gpu.comm_exposed_us
        bounds = gpu_busy_bounds(analysis)
        if bounds is not None and bounds.partial:
            # A partial timeline: computation no clocked event shows may have overlapped its
            # exposed collectives, down to the least idle time can be; and collectives no clock
            # places may have run exposed in any idle gap, up to the busy time it leaves out.
            share = bounds.idle_least(gpu.comm_exposed_us / gpu.window_us)
            least = max(host_comm, share * gpu.window_us / n / 1e6)
            if gpu.unclocked_collectives:
                unseen = bounds.unseen
                exposed_us += min(
                    gpu.idle_us, gpu.idle_us if unseen is None else unseen * gpu.window_us
                )
            comm_low = _short(least) if least < max(host_comm, exposed_us / n / 1e6) else None
        comm = max(host_comm, exposed_us / n / 1e6)
    if comm is None and phases is not None and phases.source == "trace":
        comm = 0.0  # a trace with no collective: a rank that never waited on a peer
    hot = None
    if analysis.stacks is not None and analysis.stacks.lines:
        top = max(analysis.stacks.lines, key=lambda s: s.samples)
        hot = f"line {top.line} `{top.text.strip()}`"
    step = analysis.step_stats.median_s
    spread: dict[str, Any] = {}
    if phases is not None and phases.steps:
        step = statistics.median(s.duration_us for s in phases.steps) / 1e6
        spread = _spread(report, phases.steps)
    busy = [s.system_cpu_pct for s in report.run.samples.samples if s.system_cpu_pct is not None]
    clock = _clock_steps(report)
    split = run_split(report)
    return RankFacts(
        rank=info.rank if info is not None else 0,
        world_size=info.world_size if info is not None else 1,
        local_rank=info.local_rank if info is not None else None,
        host=info.host if info is not None else "",
        status=report.run.status,
        error=report.run.error,
        steps=analysis.step_stats.count,
        step_s=step,
        comm_s=comm,
        phase_s=phase_s,
        verdict=report.verdict.category,
        headline=report.verdict.headline,
        hot_line=hot,
        grad_bytes=(report.whatif.grad_bytes if report.whatif is not None else None)
        or report.run.steps.grad_bytes,
        files=tuple(files),
        shape=rank_shape(analysis.shape),
        host_busy_share=_short(statistics.fmean(busy) / 100.0) if busy else None,
        run_step_s=_short(statistics.median(clock)) if len(clock) >= CLOCK_SPREAD_STEPS else None,
        run_wait_share=(
            _short(analysis.shape.run_wait_share)
            if analysis.shape is not None and analysis.shape.run_wait_share is not None
            else None
        ),
        comm_low_s=comm_low,
        **spread,
        **split,
    )


def _spread(report: Report, steps: Sequence[StepPhases]) -> dict[str, Any]:
    """10th/90th percentiles of this rank's per-step comm wait and step time (order statistics).

    The step time's from the step clock, which timed every step (less the warm-up and the steps
    our own work disturbed), when it has ``CLOCK_SPREAD_STEPS``; the comm wait's from the
    profiled steps, the only ones that time it.
    """
    clock = _clock_steps(report)
    durations = (
        sorted(clock)
        if len(clock) >= CLOCK_SPREAD_STEPS
        else sorted(s.duration_us / 1e6 for s in steps)
    )
    out: dict[str, float | None] = {
        "step_p10_s": _short(_quantile(durations, 0.1)),
        "step_p90_s": _short(_quantile(durations, 0.9)),
    }
    if report.analysis.phases is not None and "comm" in report.analysis.phases.measured:
        comm = sorted(s.phase_us.get("comm", 0.0) / 1e6 for s in steps)
        out["comm_p10_s"] = _short(_quantile(comm, 0.1))
        out["comm_p90_s"] = _short(_quantile(comm, 0.9))
    return out


def run_split(report: Report) -> dict[str, Any]:
    """The step clock's split of this rank's steps over the run (``RankFacts.run_split_s``):
    per phase the median per step and half its 10th-90th range (order statistics), from the
    fully timed steps less the warm-up and the steps our own work disturbed; the per-step
    wait for a core when every such step read it. Empty below ``CLOCK_SPREAD_STEPS`` steps.

    The phases are the clock's, and "rest", what the step adds beyond them (a sleep, a print,
    a collective outside autograd); "cpu" is the loop thread's time on a core, which neither a
    wait for a peer nor a wait for a core adds to."""
    ours = disturbed_steps(report.run)
    steps = [
        s
        for s in steady_steps(report.run.steps, report.run.window.warmup_steps)
        if s.index not in ours and s.timed
    ]
    if len(steps) < CLOCK_SPREAD_STEPS:
        return {}
    series: dict[str, list[float]] = {
        "data": [s.data_s for s in steps],
        "forward": [s.forward_s for s in steps],
        "backward": [s.backward_s for s in steps],
        "optimizer": [s.optimizer_s for s in steps],
        "rest": [
            max(0.0, s.duration_s - s.data_s - s.forward_s - s.backward_s - s.optimizer_s)
            for s in steps
        ],
    }
    if all(s.cpu_s is not None for s in steps):
        series["cpu"] = [s.cpu_s or 0.0 for s in steps]
    median: dict[str, float] = {}
    spread: dict[str, float] = {}
    for name, values in series.items():
        ordered = sorted(values)
        mid = _short(round(_quantile(ordered, 0.5), 6))
        half = _short(round((_quantile(ordered, 0.9) - _quantile(ordered, 0.1)) / 2, 6))
        if mid or half:  # a phase the loop never enters (no loader...) is left out: 0
            median[name], spread[name] = mid, half
    waits = [s.wait_s for s in steps]
    core = (
        _short(statistics.median(w for w in waits if w is not None))
        if all(w is not None for w in waits)
        else None
    )
    return {"run_split_s": median, "run_split_spread_s": spread, "run_core_wait_s": core}


def _clock_steps(report: Report) -> list[float]:
    """The step clock's step times, less the warm-up and the steps our own work disturbed."""
    ours = disturbed_steps(report.run)
    steps = steady_steps(report.run.steps, report.run.window.warmup_steps)
    return [s.duration_s for s in steps if s.index not in ours]


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """The order statistic at ``q`` (nearest rank): no interpolation, no normal assumption."""
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[k])


def rank_shape(shape: RunShape | None) -> RankShape | None:
    """The few numbers of a rank's run shape the job report compares across ranks."""
    if shape is None:
        return None
    # Each step's own time (less its wait for a core) when the rank read it per step, as the
    # single-rank drift and stall findings judge it: a rank preempted by its host's other work
    # neither drifts nor stalls for that.
    own = shape.own
    stalls = own.stalls if own is not None else shape.stalls
    first_s, last_s = (
        (own.first_median_s, own.last_median_s)
        if own is not None
        else (shape.first_median_s, shape.last_median_s)
    )
    growing = {m.kind: m for m in shape.memory if creeps(m)}
    # The trend the single-rank memory finding reports: the GPU's first.
    first = growing.get("gpu") or growing.get("rss")
    return RankShape(
        first_s=_short(first_s),
        last_s=_short(last_s),
        jitter=_short(shape.jitter),
        stalls=stalls.count if stalls is not None else 0,
        stall_period_steps=stalls.period_steps if stalls is not None else None,
        stall_share=_short(stalls.share) if stalls is not None else 0.0,
        stall_phase=stalls.phase if stalls is not None else None,
        rss_bytes_per_step=_short(growing["rss"].bytes_per_step) if "rss" in growing else None,
        gpu_bytes_per_step=_short(growing["gpu"].bytes_per_step) if "gpu" in growing else None,
        full_at_step=first.full_at_step if first is not None else None,
        represents=shape.represents,
    )


def _short(x: float) -> float:
    """Four significant digits: what the job report prints needs no more, and a float of numpy's
    full precision is 20 characters of every rank's summary."""
    return float(f"{x:.4g}")


# What a rank's shape shows, by the single-rank rules' own levels (rules/run_shape.py).


def drift_factor(s: RankShape) -> float | None:
    """Last fifth's median step over the first fifth's, when the run slows by the drift level."""
    if s.first_s <= 0 or s.last_s / s.first_s < DRIFT_FACTOR:
        return None
    return s.last_s / s.first_s


def stalls_matter(s: RankShape) -> bool:
    """Stalls that cost at least the share the periodic-stall finding starts at."""
    return s.stalls > 0 and s.stall_share >= STALL_SHARE


def jitters(s: RankShape) -> bool:
    """Uneven steps that neither stalls nor a drift explain (the jitter finding's condition)."""
    return s.jitter >= JITTER and s.stalls == 0 and drift_factor(s) is None


def memory_creeps(s: RankShape) -> bool:
    return s.rss_bytes_per_step is not None or s.gpu_bytes_per_step is not None


def job_shapes(ranks: Sequence[RankFacts]) -> tuple[JobShape, ...]:
    """The patterns of the run's shape across the ranks: which ranks drift, stall or creep.

    Needs two ranks with a shape: one rank alone is its own report's business.
    """
    shaped = [(r.rank, r.shape) for r in ranks if r.shape is not None]
    if len(shaped) < 2:
        return ()
    out = []
    drifting = tuple(rank for rank, s in shaped if drift_factor(s) is not None)
    if drifting:
        out.append(JobShape("drift", drifting, len(shaped)))
    stalling = [(rank, s) for rank, s in shaped if stalls_matter(s)]
    if stalling:
        periods = {s.stall_period_steps for _, s in stalling}
        period = periods.pop() if len(periods) == 1 else None
        origin = _stall_origin(stalling) if len(stalling) == len(shaped) else ()
        out.append(JobShape("stall", tuple(r for r, _ in stalling), len(shaped), period, origin))
    creeping = tuple(rank for rank, s in shaped if memory_creeps(s))
    if creeping:
        out.append(JobShape("memory", creeping, len(shaped)))
    return tuple(out)


def _stall_origin(stalling: Sequence[tuple[int, RankShape]]) -> tuple[int, ...]:
    """The ranks a shared stall starts on: their stalled time is their own work while every
    other rank's goes to backward, where DDP's gradient all-reduce waits for a late peer."""
    if any(s.stall_phase is None for _, s in stalling):
        return ()
    own = tuple(rank for rank, s in stalling if s.stall_phase != "backward")
    return own if 0 < len(own) < len(stalling) else ()


def find_straggler(ranks: Sequence[RankFacts]) -> Straggler | None:
    """The straggler where the ranks' comm waits name it at both ends (``straggler_at_ends``)."""
    return straggler_at_ends(ranks)[0]


def straggler_at_ends(ranks: Sequence[RankFacts]) -> tuple[Straggler | None, int | None]:
    """The straggler read at the ranks' most comm wait and at their least (partial GPU
    timelines: ``RankFacts.comm_low_s``), and the rank named at one end only (None: they agree).
    Where both name the same rank, the straggler with its waiting ranks' wait as a range."""
    high = _find_straggler(ranks)
    if all(r.comm_low_s is None for r in ranks):
        return high, None
    low = _find_straggler([_at_least(r) for r in ranks])
    if high is None and low is None:
        return None, None
    if high is not None and low is not None and (high.rank, high.reason) == (low.rank, low.reason):
        return dataclasses.replace(high, wait_low_s=low.wait_s), None
    return None, (high or low).rank  # type: ignore[union-attr]


def _at_least(r: RankFacts) -> RankFacts:
    return r if r.comm_low_s is None else dataclasses.replace(r, comm_s=r.comm_low_s)


def _find_straggler(ranks: Sequence[RankFacts]) -> Straggler | None:
    measured = [r for r in ranks if r.comm_s is not None and r.step_s]
    if len(measured) >= 2:
        step = statistics.median(r.step_s or 0.0 for r in measured)
        least = min(measured, key=lambda r: (r.comm_s or 0.0, r.rank))
        others = [r for r in measured if r.rank != least.rank]
        wait = statistics.median(r.comm_s or 0.0 for r in others)
        if (
            step > 0
            and wait - (least.comm_s or 0.0) >= STRAGGLER_THRESHOLD * step
            and wait - (least.comm_s or 0.0) >= _no_difference_spread(measured)
            and not _window_only(measured, wait - (least.comm_s or 0.0))
            and not _starved(least, others, wait - (least.comm_s or 0.0))
            and _run_shows(least, others)
        ):
            return _cause(least, others, "waits-least", wait)
    timed = [r for r in ranks if r.step_s]
    if len(timed) >= 2:
        # Every rank's step over the run when each has one (the same steps its spread is read
        # from), else the profiled steps' median.
        over_run = all(r.run_step_s for r in timed)

        def step_of(r: RankFacts) -> float:
            return (r.run_step_s if over_run else r.step_s) or 0.0

        center = statistics.median(step_of(r) for r in timed)
        slowest = max(timed, key=lambda r: (step_of(r), -r.rank))
        if (
            center > 0
            and step_of(slowest) > center * (1 + STRAGGLER_THRESHOLD)
            and step_of(slowest) - center >= _spread_of(timed, "step")
            and not _starved(
                slowest,
                [r for r in timed if r.rank != slowest.rank],
                step_of(slowest) - center,
            )
            and _run_shows(slowest, [r for r in timed if r.rank != slowest.rank])
        ):
            return _cause(
                slowest, [r for r in timed if r.rank != slowest.rank], "slowest-step", None
            )
    return None


# A gap in comm wait over this many times the run's median step is the window's alone.
WINDOW_GAP = 1.5


def _window_only(ranks: Sequence[RankFacts], gap_s: float) -> bool:
    """The others waited longer in the profiled window than the run's steps last: a wait is
    part of its step, so a straggler's delay paid every step makes every step at least that
    long. Such a gap is the window's (our profiler, a preemption in it), not the run's (seen:
    no straggler planted, rank 0 waited 11 ms a profiled step, the run's steps took 1.8 ms)."""
    steps = [r.run_step_s for r in ranks if r.run_step_s]
    return len(steps) == len(ranks) and gap_s > WINDOW_GAP * statistics.median(steps)


def _starved(slow: RankFacts, others: Sequence[RankFacts], gap_s: float) -> bool:
    """The late rank's thread waited for a core (schedstat) by at least half the gap more than
    the others' did: the machine held it back, not its code."""
    if slow.run_wait_share is None or not slow.step_s:
        return False
    theirs = [r.run_wait_share * (r.step_s or 0.0) for r in others if r.run_wait_share is not None]
    if not theirs:
        return False
    extra_s = slow.run_wait_share * slow.step_s - statistics.median(theirs)
    return extra_s >= 0.5 * gap_s


def _run_shows(slow: RankFacts, others: Sequence[RankFacts]) -> bool:
    """The run's every step shows the late rank's own work: a phase of its step clock split (or
    its thread's time on a core) above the other ranks' by more than that phase's spread when
    nothing differs between the ranks, and by a tenth of the step, less the extra time its
    thread waited for a core. A straggler's delay is paid every step, so its own phase holds it
    every step while the others wait for it in the collective's; two equal ranks on a busy host
    trade who waits from step to step, and their splits over the run agree, whatever the few
    profiled steps caught (seen: no straggler planted, rank 1's profiled backward 3.5 ms against
    rank 0's 0.3 ms, while over the run both ranks' backward took 5 ms a step).
    Summaries without a split (a lean clock, an older gpucheck): the window's rules alone."""
    ranks = [slow, *others]
    if not others or any(not r.run_split_s for r in ranks):
        return True
    steps = [r.run_step_s or r.step_s or 0.0 for r in ranks]
    level = STRAGGLER_THRESHOLD * statistics.median(steps)
    their_waits = [r.run_core_wait_s for r in others if r.run_core_wait_s is not None]
    extra_wait = (
        max(0.0, slow.run_core_wait_s - statistics.median(their_waits))
        if slow.run_core_wait_s is not None and their_waits
        else 0.0
    )
    for name, mine in slow.run_split_s.items():
        if name == "cpu" and any("cpu" not in r.run_split_s for r in others):
            continue  # a rank that did not read its time on a core: nothing to compare
        theirs = [r.run_split_s.get(name, 0.0) for r in others]
        spreads = [r.run_split_spread_s.get(name, 0.0) for r in ranks]
        # Time on a core is the rank's own already; a phase's wall time holds its core waits.
        excess = mine - statistics.median(theirs) - (0.0 if name == "cpu" else extra_wait)
        if excess >= max(level, statistics.median(spreads)):
            return True
    return False


def _no_difference_spread(ranks: Sequence[RankFacts]) -> float:
    """The spread a gap in comm wait must exceed: the comm wait's own spread over the profiled
    steps, and at least the step time's over the run. A rank's wait in a step is the other
    ranks' lateness in it, which varies as their steps do; three profiled steps cannot tell
    that spread (seen: no straggler planted, a busy host, rank 0 named from a 3-step spread)."""
    return max(_spread_of(ranks, "comm"), _spread_of(ranks, "step"))


def _spread_of(ranks: Sequence[RankFacts], what: str) -> float:
    """The ranks' no-difference spread of ``what`` ("comm" or "step"): the median over ranks of
    half their own 10th-90th percentile range across steps. A gap between ranks inside it is
    what any rank's steps do anyway. Unknown spreads (older summaries, no trace): 0, so the
    level alone decides, as before."""
    halves = []
    for r in ranks:
        low, high = getattr(r, f"{what}_p10_s"), getattr(r, f"{what}_p90_s")
        if low is not None and high is not None:
            halves.append((high - low) / 2)
    return statistics.median(halves) if halves else 0.0


def _cause(
    slow: RankFacts, others: Sequence[RankFacts], reason: str, wait: float | None
) -> Straggler:
    best: tuple[float, str] | None = None
    for name in _OWN_PHASES:
        if name not in slow.phase_s:
            continue
        seen = [r.phase_s[name] for r in others if name in r.phase_s]
        excess = slow.phase_s[name] - (statistics.median(seen) if seen else 0.0)
        if best is None or excess > best[0]:
            best = (excess, name)
    phase = best[1] if best is not None else None
    theirs = [r.phase_s[phase] for r in others if phase is not None and phase in r.phase_s]
    return Straggler(
        rank=slow.rank,
        reason="waits-least" if reason == "waits-least" else "slowest-step",
        phase=phase,
        phase_share=(slow.phase_s[phase] / slow.step_s) if phase and slow.step_s else None,
        phase_s=slow.phase_s.get(phase) if phase else None,
        others_phase_s=statistics.median(theirs) if theirs else None,
        waiting_ranks=tuple(
            sorted(r.rank for r in others if wait is None or (r.comm_s or 0.0) > 0)
        ),
        wait_s=wait,
        hot_line=slow.hot_line,
    )


def _roles(ranks: Sequence[RankFacts], straggler: Straggler | None) -> dict[str, str]:
    """Each rank's role in the job, worded by ``words.job`` (the job report's JSON holds it)."""
    from gpu_notebook.words.job import role_words

    roles: dict[str, str] = {}
    for r in ranks:
        if r.status != "ok":
            roles[str(r.rank)] = role_words("failed", error=r.error)
        elif straggler is not None and r.rank == straggler.rank:
            roles[str(r.rank)] = role_words("straggler")
        elif straggler is not None and r.rank in straggler.waiting_ranks and straggler.wait_s:
            roles[str(r.rank)] = role_words("waits", straggler=straggler.rank)
        elif r.comm_s is not None and r.step_s and r.comm_s >= STRAGGLER_THRESHOLD * r.step_s:
            # A partial timeline's comm wait is at most ``comm_s``: comm-bound only if the least
            # it can be is past the line too.
            least = r.comm_s if r.comm_low_s is None else r.comm_low_s
            measured = least >= STRAGGLER_THRESHOLD * r.step_s
            roles[str(r.rank)] = role_words("comm" if measured else "comm_at_most")
        else:
            roles[str(r.rank)] = r.verdict
    return roles


# A host whose CPUs were this busy over the run (every process on it, the ranks included) is
# saturated: its ranks slow each other and any other job's work lands on one of them at random.
SATURATED_HOST = 0.9


def _saturated_hosts(rows: Sequence[RankFacts]) -> tuple[SaturatedHost, ...]:
    """Each host whose ranks shared a saturated machine."""
    by_host: dict[str, list[RankFacts]] = {}
    for r in rows:
        by_host.setdefault(r.host, []).append(r)
    out = []
    for host, ranks in by_host.items():
        busy = [r.host_busy_share for r in ranks if r.host_busy_share is not None]
        if len(ranks) < 2 or not busy or statistics.median(busy) < SATURATED_HOST:
            continue
        out.append(SaturatedHost(host, tuple(r.rank for r in ranks), statistics.median(busy)))
    return tuple(out)


def job_report(
    ranks: Iterable[RankFacts],
    world_size: int,
    *,
    source: str,
    whatif: WhatIf | None = None,
    notes: Sequence[str] = (),
) -> JobReport:
    """The job report from the summaries that arrived (the rest are named as missing)."""
    rows = tuple(sorted(ranks, key=lambda r: r.rank))
    present = {r.rank for r in rows}
    missing = tuple(r for r in range(world_size) if r not in present)
    shares = [r.comm_s / r.step_s for r in rows if r.comm_s is not None and r.step_s]
    lows = [r.comm_s / r.step_s for r in map(_at_least, rows) if r.comm_s is not None and r.step_s]
    steps = [r.step_s for r in rows if r.step_s]
    straggler, undecided = straggler_at_ends(rows)
    return JobReport(
        kind="gpucheck-job",
        world_size=world_size,
        ranks=rows,
        missing=missing,
        source="run" if source == "run" else "traces",
        comm_share=statistics.fmean(shares) if shares else None,
        step_s=statistics.median(steps) if steps else None,
        straggler=straggler,
        roles=_roles(rows, straggler),
        whatif=whatif,
        notes=tuple(notes),
        shapes=job_shapes(rows),
        saturated_hosts=_saturated_hosts(rows),
        comm_share_low=statistics.fmean(lows)
        if lows and any(r.comm_low_s is not None for r in rows)
        else None,
        straggler_undecided=undecided,
    )
