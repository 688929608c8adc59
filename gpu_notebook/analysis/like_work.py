"""Steps that do different work, compared like with like: each run's figure at one common mix.

A step's work is what the step clock counts in every step, lean or timed: its optimizer
closure's calls and its loader reads (``StepTiming.closure_calls``/``loader_reads``). Steps of
different work take different times by design, the same in every run of the code: LBFGS calls
its closure 5 times a step until its line search settles, then once (lbfgs_closure: 4.4 ms and
1.7 ms steps); an accumulation loop reads 4 micro-batches a step, then 8; a validation pass
reads a loader's worth. A run's figure over its steps as they come (its mean, the median of its
fifths' means, a moving block of them) then moves with the share of each work in the run or in
the block, not with the code's speed: lbfgs_closure's ``log_every_n`` trial read rounds of
0.78x-1.42x, "undecided" over 15 rounds, where each work's steps hardly moved.

``like_work`` reads every run of a comparison (a fix trial's runs of both arms,
``tryfix.trials``; the notebook's before/after, ``report.compare``) together:

- the works every run holds (``MIN_GROUP_STEPS`` steps or more in each) are the common ones;
  where they cover less than ``MIN_COMMON_SHARE`` of some run's steps, the arms do work of other
  kinds (a fix that folds micro-batches reads one batch a step where the script read four): they
  are compared as they are (``None``), each run by its whole throughput;
- a run's figure is its mean step of each common work, weighted by that work's share of the
  steps of every run together: what the run's time would be at the trial's one mix, so that a
  fix is read on the work both arms do, whatever share of it each run happened to do;
- each step is put in its work's units (its time over its work's mean step over every run,
  times the trial's figure), so the steps of one run are alike and a resampled block of them
  no longer draws a mix; then each run's steps are scaled together to its figure (one factor a
  run: their spread is kept). The steps of a work not common to every run stay in the run at
  their own work's units; the figure is the common works'.

With the same time per work in both arms, a different mix reads 1x; with each work 1.3x
faster, 1.3x. Pure: the same steps and works give the same steps back.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence

from gpu_notebook.analysis.work_spread import lean_work
from gpu_notebook.records import StepTiming

__all__ = ["MIN_COMMON_SHARE", "MIN_GROUP_STEPS", "WorkKey", "like_work", "step_work"]

# A step's work: (closure calls, loader reads[, samples]), what the step clock counts lean or
# timed.
WorkKey = tuple[int, ...]


def step_work(step: StepTiming) -> WorkKey | None:
    """A step's work as comparisons read it; None: not counted (an older record). Its samples
    where the loader's batches were read (a short last batch, a bucketing sampler: steps of
    16 samples are another work than steps of 32, lean or timed)."""
    work = lean_work(step)  # what the step clock counts on every step, lean or timed
    if None in work:
        return None
    counts = tuple(w for w in work if w is not None)
    return counts if step.batch_size is None else (*counts, step.batch_size)


# A work is common where every run has at least this many of its steps (a mean of one step is
# that step's noise).
MIN_GROUP_STEPS = 2
# The common works must cover at least this share of every run's steps: else the runs do work
# of other kinds and are compared as they are.
MIN_COMMON_SHARE = 0.8


def like_work(
    runs: Sequence[Sequence[float]],
    works: Sequence[Sequence[WorkKey | None] | None],
    arms: Sequence[int] | None = None,
) -> tuple[tuple[float, ...], ...] | None:
    """Each run's steps (aligned with ``works``: each step's work, None: not counted) put at the
    trial's common mix of work (module docstring). None: nothing to do or nothing to read: every
    step does one work, a step's work was not counted, the runs share too little work, or the
    arms' mixes differ as arms (``arms``: each run's arm, ``_mix_moved``).

    Where an arm has several runs, a work whose share of the steps moved between the arms
    beyond how much it moves between runs of one arm (every run of one arm above every run of
    the other) is what the change did (a validation pass run less often, the every-N steps
    that now skip it), not a mix a run happened to draw: the runs are compared as they are,
    their throughput carrying the work the change saved."""
    keyed = _keyed(runs, works)
    if keyed is None:
        return None
    every = Counter(k for run in keyed for _, k in run)
    if len(every) < 2:
        return None  # one work: the steps are alike already
    per_run = [Counter(k for _, k in run) for run in keyed]
    common = {k for k in every if all(c[k] >= MIN_GROUP_STEPS for c in per_run)}
    if not common or any(
        sum(c[k] for k in common) < MIN_COMMON_SHARE * len(run)
        for c, run in zip(per_run, keyed, strict=True)
    ):
        return None
    if arms is not None and _mix_moved(per_run, [len(r) for r in keyed], arms, set(every)):
        return None
    pooled: dict[WorkKey, list[float]] = defaultdict(list)
    for run in keyed:
        for t, k in run:
            pooled[k].append(t)
    mean = {k: statistics.fmean(ts) for k, ts in pooled.items()}
    total = sum(every[k] for k in common)
    weight = {k: every[k] / total for k in common}
    overall = sum(weight[k] * mean[k] for k in common)
    if overall <= 0 or any(mean[k] <= 0 for k in mean):
        return None
    out = []
    for run in keyed:
        figure = _figure(run, weight)
        units = [t * overall / mean[k] for t, k in run]
        scale = figure / statistics.fmean(units) if statistics.fmean(units) > 0 else 1.0
        out.append(tuple(u * scale for u in units))
    return tuple(out)


def _mix_moved(
    per_run: list[Counter[WorkKey]], sizes: list[int], arms: Sequence[int], keys: set[WorkKey]
) -> bool:
    """Whether some work's share of the steps separates the arms: every run of one arm holds
    more of it than every run of the other. Read where each arm has 2 runs or more (one run a
    side cannot tell a change from a draw)."""
    if len(arms) != len(per_run):
        return False
    by_arm: dict[int, list[int]] = defaultdict(list)
    for i, arm in enumerate(arms):
        by_arm[arm].append(i)
    if len(by_arm) != 2 or any(len(ix) < 2 for ix in by_arm.values()):
        return False
    a, b = by_arm.values()
    for k in keys:
        sa = [per_run[i][k] / sizes[i] for i in a]
        sb = [per_run[i][k] / sizes[i] for i in b]
        if min(sa) > max(sb) or min(sb) > max(sa):
            return True
    return False


def _keyed(
    runs: Sequence[Sequence[float]], works: Sequence[Sequence[WorkKey | None] | None]
) -> list[list[tuple[float, WorkKey]]] | None:
    """Each run's (step time, its work), or None where a run's works were not all counted."""
    if len(works) != len(runs) or not runs:
        return None
    keyed = []
    for run, work in zip(runs, works, strict=True):
        if work is None or len(work) != len(run) or not run:
            return None
        steps = []
        for t, k in zip(run, work, strict=True):
            if k is None:
                return None
            steps.append((float(t), tuple(k)))
        keyed.append(steps)
    return keyed


def _figure(run: list[tuple[float, WorkKey]], weight: dict[WorkKey, float]) -> float:
    """The run's mean step of each common work, weighted by that work's share over every run."""
    by: dict[WorkKey, list[float]] = defaultdict(list)
    for t, k in run:
        if k in weight:
            by[k].append(t)
    return sum(w * statistics.fmean(by[k]) for k, w in weight.items())
