"""The machine, not your code: interference and oversubscription, named with their evidence.

- ``machine.busy``: steps that ran while other processes were busier than the run's quiet level
  took notably longer (>= ``BUSY_SLOWDOWN`` x the quiet steps' median), or stalled for
  ``STALL_SHARE`` of the run's time (a spinning process preempts every few tiny steps and
  leaves the median as it was). Those steps are left out
  of the run's drift, jitter and stalls (analysis/run_trend.py); this finding says so.
- ``machine.oversubscribed``: this process asks for more runnable threads than the cores left to
  it (torch's intra-op threads + DataLoader workers > usable cores - others' load). torch's
  OpenMP threads spin and wait for each other at every operator: with one of them descheduled,
  every operator waits for it (measured: a nanoGPT loop at 2.33 s a step with the default
  threads on a loaded 2-core machine, 210 ms with one). Fix: ``torch.set_num_threads``.
- ``machine.shared``: other processes used at least ``SHARED_SHARE`` of the cores over most of
  the run, or the hypervisor stole ``STEAL_PCT``, or other processes computed on the GPU: every
  figure of the report is that of a shared machine.

The loop thread's wait for a core that a thread of this process accounts for
(``Analysis.side_threads``: a spinning monitor beside the loop) is not the machine's: the wait
``machine.shared`` reads is the other processes' part of it (rules/own_threads_spin.py names the
thread). A thread that spins all along does not change over the run: the steps that slowed
while others were busier (``machine.busy``, ``machine.slowed``) stay the machine's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, MachineFacts, Run, RunShape, Said, Severity
from gpu_notebook.rules.common import found
from gpu_notebook.rules.run_shape import (
    BUSY_SLOWDOWN,
    STALL_SHARE,
    matching_block,
    slowed_by_waits,
)

BUSY_OURS = 0.75  # this process uses at least this share of the cores left to it
STARVED = 0.2  # or its thread waits for a core at least this share of a step
# or its threads use more than one core between them while the steps run: the pool computes
# (an oversubscribed pool itself leaves cores idle at its barriers, so "most of the cores" alone
# misses it on a quiet machine).
POOL_ACTIVE = 1.2
SHARED_SHARE = 0.5
STEAL_PCT = 10.0


@dataclass(frozen=True)
class BusySteps(Said):
    shape: RunShape
    stalled: bool  # some of those steps stalled (a spinning process preempts a few)


@dataclass(frozen=True)
class Slowed(Said):
    shape: RunShape
    factor: float  # the run's drift


@dataclass(frozen=True)
class Oversubscribed(Said):
    machine: MachineFacts
    stretch: float  # threads wanted / cores free
    starved: float  # share of a step the loop's thread waited for a core
    target: int  # the thread count to set
    used: float | None = None  # cores this process's threads used while the steps ran


@dataclass(frozen=True)
class Shared(Said):
    """What made the machine shared (None / 0: not that)."""

    others: float | None  # cores other processes used over most of the run
    cores: int
    steal_pct: float | None  # the hypervisor's steal
    wait: float | None  # share of a step the loop's thread waited for a core
    gpu_others: int | None  # other processes computing on the GPU


def busy_steps(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    shape = analysis.shape
    if shape is None or not shape.busy_steps or shape.busy_slowdown is None:
        return None
    # Stalls that match a periodic block of the cell stay the code's (run.periodic_stall).
    stalled = (shape.busy_stall_share or 0.0) >= STALL_SHARE and (
        shape.stalls is None or matching_block(run, facts, shape.stalls.period_steps) is None
    )
    if shape.busy_slowdown < BUSY_SLOWDOWN and not stalled:
        return None
    return found("machine.busy", "low", BusySteps(shape, stalled))


def slowed_by_machine(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The steps slowed down over the run, and the time the thread waited for a core explains it."""
    shape = analysis.shape
    if shape is None or shape.drift is None or not slowed_by_waits(shape):
        return None
    return found("machine.slowed", "low", Slowed(shape, shape.drift))


def _own_held(analysis: Analysis) -> float:
    """The share of the loop thread's wait for a core a thread of this process held
    (``SideThreads.held``; 0: none read): not the machine's."""
    side = analysis.side_threads
    return side.held if side is not None else 0.0


def _thread_fix(m: MachineFacts) -> int:
    return max(1, math.floor(m.free_cores) - m.workers)


def oversubscribed(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    m = analysis.machine
    if m is None:
        return None
    wanted = m.threads_wanted
    if wanted is None or m.torch_threads is None or m.torch_threads <= 1:
        return None
    free = m.free_cores
    if wanted <= free + 0.5:
        return None
    # Threads that wait (on data, on sleep) compete for nothing: only a process that uses
    # most of what the others leave it, or whose thread waits for a core, is slowed by its pool.
    starved = (analysis.shape.run_wait_share or 0.0) if analysis.shape is not None else 0.0
    # What the loop's own threads used (the step clock's readings); else the sampler's median.
    ours = m.loop_process_cores if m.loop_process_cores is not None else m.ours_median_cores
    busy = ours is not None and ours >= min(BUSY_OURS * free, POOL_ACTIVE)
    if not busy and starved < STARVED:
        return None
    target = _thread_fix(m)
    if target >= m.torch_threads:
        return None
    # Bound: the threads wanted over the cores free is how far the pool is stretched, over the
    # part of the step that computes (the data wait is not stretched): Amdahl. Spinning OpenMP
    # threads can lose more than that (11x on the loop).
    stretch = wanted / free
    data = (analysis.phases.share("data") if analysis.phases is not None else None) or 0.0
    bound = 1.0 / (data + (1.0 - data) / stretch)
    severity: Severity = "high" if bound >= 1.5 else "medium" if bound >= 1.2 else "low"
    said = Oversubscribed(m, stretch, starved, target, ours)
    return found("machine.oversubscribed", severity, said, bound=bound)


def shared_machine(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    m = analysis.machine
    if m is None:
        return None
    others = m.others_median_cores or 0.0
    wait = analysis.shape.run_wait_share if analysis.shape is not None else None
    if wait is not None:
        wait *= 1.0 - _own_held(analysis)  # the part other programs account for
    said = Shared(
        others if others >= SHARED_SHARE * m.cores else None,
        m.cores,
        m.steal_pct if m.steal_pct is not None and m.steal_pct >= STEAL_PCT else None,
        wait if wait is not None and wait >= STARVED else None,
        m.gpu_other_processes,
    )
    if said.others is None and said.steal_pct is None and said.wait is None and not said.gpu_others:
        return None
    return found("machine.shared", "info", said)


TIE = 190  # where its findings tie: the verdict table's order (rules._families)
RULES = (oversubscribed, busy_steps, slowed_by_machine, shared_machine)
