"""Words of the machine rules (rules/machine.py)."""

from __future__ import annotations

from gpu_notebook.analysis.steady import STALL_FACTOR
from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.machine import BusySteps, Oversubscribed, Shared, Slowed
from gpu_notebook.rules.run_shape import BUSY_SLOWDOWN
from gpu_notebook.words.common import Words, worder, words
from gpu_notebook.words.run_shape import read_where

_SOURCE = "gpu_notebook's own levels (rules/machine.py), from the sampler's whole-machine readings"


@worder(BusySteps)
def busy_steps(s: BusySteps) -> Words:
    shape = s.shape
    slowdown = shape.busy_slowdown or 0.0
    loud, quiet = shape.busy_load_cores or 0.0, shape.quiet_load_cores or 0.0
    evidence = [
        f"other processes used {loud:.2f} cores during those steps, {quiet:.2f} during the rest",
        f"those steps' median is {slowdown:.2f}x the other steps'",
    ]
    if s.stalled:
        # Steps the same as the rest in the median, a few preempted for a time slice each.
        evidence.append(
            f"{shape.busy_stalls} of them stalled (over {STALL_FACTOR:.0f}x the median step), "
            f"{fmt_share(shape.busy_stall_share or 0.0)} of the run's step time"
        )
    evidence.append(
        "they are left out of the run's drift, jitter and stalls above; the code did not change"
    )
    slower = (
        f", {slowdown:.1f}x slower"
        if slowdown >= BUSY_SLOWDOWN
        else f", {shape.busy_stalls} of them stalled"
    )
    return words(
        f"The machine, not your code: {shape.busy_steps} steps ran while other processes were "
        f"busy{slower}",
        evidence,
        "Nothing to fix in the code. Measure on a quieter machine (or with the other jobs off "
        "these cores) before comparing runs.",
        _SOURCE,
    )


@worder(Slowed)
def slowed(s: Slowed) -> Words:
    shape = s.shape
    return words(
        f"The machine, not your code: steps slowed {s.factor:.1f}x while this thread waited for a core",
        [
            f"first fifth {shape.first_median_s * 1e3:.2f} ms a step, last fifth "
            f"{shape.last_median_s * 1e3:.2f} ms ({s.factor:.1f}x)",
            (
                f"each step less its own wait for a core (schedstat run-queue wait, "
                f"{read_where(shape.own)}): {shape.own_drift:.2f}x"
                if shape.own is not None
                else f"with the most the thread's wait for a core (schedstat run-queue wait, "
                f"read around each fifth) explains taken out: {shape.own_drift:.2f}x"
            ),
            "the code's own work per step did not grow; other processes took the cores",
        ],
        "Nothing to fix in the code. Measure on a quieter machine before comparing runs.",
        _SOURCE,
    )


@worder(Oversubscribed)
def oversubscribed(s: Oversubscribed) -> Words:
    m = s.machine
    free = m.free_cores
    evidence = [
        f"torch runs {m.torch_threads} intra-op threads"
        + (f" and {m.workers} DataLoader worker process(es)" if m.workers else "")
        + f" on {m.cores} usable core(s)",
        f"other processes used {m.others_median_cores or 0.0:.2f} cores (median over the run): {free:.2f} left to this one",
        f"threads wanted / cores free: {s.stretch:.2f}x: each operator waits for its slowest thread",
    ]
    if s.used is not None:
        evidence.append(f"this process used {s.used:.2f} cores while the steps ran")
    if s.starved:
        evidence.append(f"the loop's thread waited for a core {fmt_share(s.starved)} of a step")
    return words(
        f"More threads than free cores: {m.threads_wanted} wanted, {free:.1f} free",
        evidence,
        f"Call torch.set_num_threads({s.target}) before the loop"
        + (" (and use fewer DataLoader workers)" if m.workers > free else "")
        + "; measure again with the same machine load.",
        _SOURCE + "; OpenMP's spin-wait at every parallel region (PyTorch CPU threading notes)",
    )


@worder(Shared)
def shared(s: Shared) -> Words:
    notes = []
    if s.others is not None:
        notes.append(
            f"other processes used {s.others:.2f} of {s.cores} cores over most of the run "
            f"({fmt_share(s.others / s.cores)})"
        )
    if s.steal_pct is not None:
        notes.append(f"the hypervisor took {s.steal_pct:.0f}% of the cores' time (steal)")
    if s.wait is not None:
        notes.append(
            f"the loop's thread waited for a core {fmt_share(s.wait)} of a step (run queue)"
        )
    if s.gpu_others:
        notes.append(f"{s.gpu_others} other process(es) computed on the GPU")
    return words(
        "The machine is shared: these figures are those of a busy machine",
        [*notes, "step times, shares and bounds are slower or noisier than on a free machine"],
        "Compare runs only under the same load (gpucheck's before/after says when it changed).",
        _SOURCE,
    )
