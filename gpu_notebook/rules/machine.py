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
"""

from __future__ import annotations

import math

from gpu_notebook.analysis.steady import STALL_FACTOR
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import Analysis, Finding, MachineFacts, Run
from gpu_notebook.rules.common import finding
from gpu_notebook.rules.run_shape import BUSY_SLOWDOWN, DRIFT_FACTOR, STALL_SHARE

BUSY_OURS = 0.75  # this process uses at least this share of the cores left to it
STARVED = 0.2  # or its thread waits for a core at least this share of a step
SHARED_SHARE = 0.5
STEAL_PCT = 10.0
_SOURCE = "gpu_notebook's own levels (rules/machine.py), from the sampler's whole-machine readings"


def busy_steps(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    shape = analysis.shape
    if shape is None or not shape.busy_steps or shape.busy_slowdown is None:
        return None
    stalled = (shape.busy_stall_share or 0.0) >= STALL_SHARE
    if shape.busy_slowdown < BUSY_SLOWDOWN and not stalled:
        return None
    loud, quiet = shape.busy_load_cores or 0.0, shape.quiet_load_cores or 0.0
    evidence = [
        f"other processes used {loud:.2f} cores during those steps, {quiet:.2f} during the rest",
        f"those steps' median is {shape.busy_slowdown:.2f}x the other steps'",
    ]
    if stalled:
        # Steps the same as the rest in the median, a few preempted for a time slice each.
        evidence.append(
            f"{shape.busy_stalls} of them stalled (over {STALL_FACTOR:.0f}x the median step), "
            f"{fmt_share(shape.busy_stall_share or 0.0)} of the run's step time"
        )
    evidence.append(
        "they are left out of the run's drift, jitter and stalls above; the code did not change"
    )
    slower = (
        f", {shape.busy_slowdown:.1f}x slower"
        if shape.busy_slowdown >= BUSY_SLOWDOWN
        else f", {shape.busy_stalls} of them stalled"
    )
    return finding(
        "machine.busy",
        f"The machine, not your code: {shape.busy_steps} steps ran while other processes were "
        f"busy{slower}",
        "low",
        evidence,
        "Nothing to fix in the code. Measure on a quieter machine (or with the other jobs off "
        "these cores) before comparing runs.",
        _SOURCE,
    )


def slowed_by_machine(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The steps slowed down over the run, and the time the thread waited for a core explains it."""
    shape = analysis.shape
    if shape is None or shape.own_drift is None or shape.drift is None:
        return None
    factor = shape.drift
    if factor < DRIFT_FACTOR or shape.own_drift >= DRIFT_FACTOR:
        return None
    return finding(
        "machine.slowed",
        f"The machine, not your code: steps slowed {factor:.1f}x while this thread waited for a core",
        "low",
        [
            f"first fifth {shape.first_median_s * 1e3:.2f} ms a step, last fifth "
            f"{shape.last_median_s * 1e3:.2f} ms ({factor:.1f}x)",
            f"with the most the thread's wait for a core (schedstat run-queue wait, read "
            f"around each fifth) explains taken out: {shape.own_drift:.2f}x",
            "the code's own work per step did not grow; other processes took the cores",
        ],
        "Nothing to fix in the code. Measure on a quieter machine before comparing runs.",
        _SOURCE,
    )


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
    busy = m.ours_median_cores is not None and m.ours_median_cores >= BUSY_OURS * free
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
    others = m.others_median_cores or 0.0
    evidence = [
        f"torch runs {m.torch_threads} intra-op threads"
        + (f" and {m.workers} DataLoader worker process(es)" if m.workers else "")
        + f" on {m.cores} usable core(s)",
        f"other processes used {others:.2f} cores (median over the run): {free:.2f} left to this one",
        f"threads wanted / cores free: {stretch:.2f}x: each operator waits for its slowest thread",
    ]
    if starved:
        evidence.append(f"the loop's thread waited for a core {fmt_share(starved)} of a step")
    return finding(
        "machine.oversubscribed",
        f"More threads than free cores: {wanted} wanted, {free:.1f} free",
        "high" if bound >= 1.5 else "medium" if bound >= 1.2 else "low",
        evidence,
        f"Call torch.set_num_threads({target}) before the loop"
        + (" (and use fewer DataLoader workers)" if m.workers > free else "")
        + "; measure again with the same machine load.",
        _SOURCE + "; OpenMP's spin-wait at every parallel region (PyTorch CPU threading notes)",
        bound=bound,
    )


def shared_machine(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    m = analysis.machine
    if m is None:
        return None
    others = m.others_median_cores or 0.0
    notes = []
    if others >= SHARED_SHARE * m.cores:
        notes.append(
            f"other processes used {others:.2f} of {m.cores} cores over most of the run "
            f"({fmt_share(others / m.cores)})"
        )
    if m.steal_pct is not None and m.steal_pct >= STEAL_PCT:
        notes.append(f"the hypervisor took {m.steal_pct:.0f}% of the cores' time (steal)")
    wait = analysis.shape.run_wait_share if analysis.shape is not None else None
    if wait is not None and wait >= STARVED:
        notes.append(f"the loop's thread waited for a core {fmt_share(wait)} of a step (run queue)")
    if m.gpu_other_processes:
        notes.append(f"{m.gpu_other_processes} other process(es) computed on the GPU")
    if not notes:
        return None
    return finding(
        "machine.shared",
        "The machine is shared: these figures are those of a busy machine",
        "info",
        [*notes, "step times, shares and bounds are slower or noisier than on a free machine"],
        "Compare runs only under the same load (gpucheck's before/after says when it changed).",
        _SOURCE,
    )


RULES = (oversubscribed, busy_steps, slowed_by_machine, shared_machine)
