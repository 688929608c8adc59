"""Steps of like work within one run: its jitter read between steps that did the same work.

Steps of one run may do different work the same in every run: LBFGS's closure called 5 times a
step, then once; accumulation cycles of 1 then 4 micro-batches; an epoch's short last batch
(an HF Trainer run of tiny epochs: 32 then 16 samples a step, "p90 1.9x" on a quiet machine);
a validation pass's loader reads. Their spread is the work's, not jitter. The step clock keeps
each step's work (``StepTiming``: model calls, a closure's calls, loader reads, batch size), so
each step is read against the median of its own kind of work; a kind with too few steps to
give a median is left out of the figure (its steps did work unlike the rest: a handful cannot
tell uneven times from uneven work).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpu_notebook.records import StepTiming

__all__ = ["MIN_LIKE", "WorkSpread", "lean_work", "timed_work", "work_of", "work_spread"]

# A kind of work needs this many steps for its median to stand for it (the middle of five).
MIN_LIKE = 5
# ... and the kinds that have them this many steps together for a p90 (a tenth of them above).
MIN_READ = 10


def timed_work(step: StepTiming) -> tuple[int | None, ...]:
    """A timed step's work: its model calls (forward, backward), a closure's calls and loader
    reads where counted."""
    return (step.forward_calls, step.backward_calls, step.closure_calls, step.loader_reads)


def lean_work(step: StepTiming) -> tuple[int | None, ...]:
    """A lean step's work: no forward or backward is counted there; a closure's calls and the
    loader's reads are (None in an older record: every lean step alike)."""
    return (step.closure_calls, step.loader_reads)


def work_of(step: StepTiming) -> tuple[object, ...]:
    """The step's kind of work for its jitter: timed or lean (the hooks' own cost is ours), its
    counts, and its batch size (lean steps count theirs too: a lean run of 32- and 16-sample
    steps holds the two kinds its timed twin does)."""
    if step.timed:
        return (True, *timed_work(step), step.batch_size)
    return (False, *lean_work(step), step.batch_size)


@dataclass(frozen=True)
class WorkSpread:
    """Each step's time over the median of its own kind of work."""

    jitter: float  # p90 / median of those ratios (1.0 when ``kinds`` is 0: not read)
    kinds: int  # kinds of work with MIN_LIKE steps or more that the figure is read over
    steps: int  # their steps
    # The median of each read kind, by ``work_of``: what a step of that work takes.
    medians: dict[tuple[object, ...], float]

    def reference_s(self, step: StepTiming) -> float:
        """What the step would take at its kind's median: its own time where its kind is not
        read (too few steps of it: no time above a median of its own)."""
        return self.medians.get(work_of(step), step.duration_s)


def work_spread(steps: Sequence[StepTiming]) -> WorkSpread:
    """The steps' p90/median, each step's time over its own kind's median (one kind of work:
    the plain p90/median of the steps)."""
    by_work: dict[tuple[object, ...], list[float]] = defaultdict(list)
    for s in steps:
        by_work[work_of(s)].append(s.duration_s)
    medians = {
        k: float(np.median(v))
        for k, v in by_work.items()
        if len(v) >= MIN_LIKE and float(np.median(v)) > 0
    }
    ratios = np.asarray(
        [t / medians[k] for k, v in by_work.items() if k in medians for t in v], dtype=float
    )
    if len(ratios) < MIN_READ:
        return WorkSpread(jitter=1.0, kinds=0, steps=0, medians={})
    median = float(np.median(ratios))
    jitter = float(np.percentile(ratios, 90)) / median if median > 0 else 1.0
    return WorkSpread(jitter=jitter, kinds=len(medians), steps=len(ratios), medians=medians)
