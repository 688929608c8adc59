"""The loader's time blocked off a core, told apart: its own wait (a sleep, a read, a worker's
queue) or host contention (the GIL another thread of the process holds).

The step clock reads the loader's calls apart on the steps it reads the loop thread's CPU clock
on (``capture.stepclock``: the first 40, then 1 in 8): their time blocked (neither the thread's
CPU nor its wait for a core), the part no worker's queue explains, and the part of that while
other threads of the process computed (the GIL's holder on a core: out of ``data_s`` there).
A GIL holder that waits for a core computes nothing meanwhile (our samplers' threads on a busy
machine: framework share "cause 2", benchmarks/README.md): what the loader's own blocking is
not comes and goes with the machine, where its own (a sleep, a read a sample) recurs every step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpu_notebook.records import StepTiming

__all__ = ["FLOOR_PERCENTILE", "blocked_kept"]

# The loader's own block in a step: the least over the read steps (this percentile, so that a
# few steps read short, a batch ready early, do not set it).
FLOOR_PERCENTILE = 10.0


def blocked_kept(steps: Sequence[StepTiming]) -> float | None:
    """The share of the loader's blocked time (over the steps that read it apart) that is a wait
    for the loader: a worker's empty queue, and of the rest its least a step (``FLOOR_PERCENTILE``)
    when no other thread computed meanwhile. The rest is host contention: blocked while another
    thread of the process computed (the step clock's reading), or beyond the loader's own block
    (a GIL holder waiting for a core). None: none read, or the loader never blocked. A loader
    whose own block varies from step to step (reads from a cold disk) reads its excess as
    contention: not told apart."""
    read = [
        (s.data_blocked_s, s.data_unqueued_s, s.data_contention_s)
        for s in steps
        if s.data_blocked_s is not None
        and s.data_unqueued_s is not None
        and s.data_contention_s is not None
    ]
    if not read:
        return None
    blocked = np.array([r[0] for r in read], dtype=float)
    unqueued = np.array([r[1] for r in read], dtype=float)
    contention = np.array([r[2] for r in read], dtype=float)
    total = float(blocked.sum())
    if total <= 0:
        return None
    rest = np.maximum(0.0, unqueued - contention)
    floor = float(np.percentile(rest, FLOOR_PERCENTILE))
    taken = float(contention.sum()) + float(np.maximum(0.0, rest - floor).sum())
    return max(0.0, 1.0 - taken / total)
