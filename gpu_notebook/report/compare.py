"""Before/after: find the run a report should be compared with, and put the measured gain beside the bound.

A report is *comparable* with an earlier one when the user re-ran the same cell, or ran the cell
that one of its findings proposed (the proposal's ``source_after``, whose first line is
``# gpucheck fix: ...``). In the second case the fix is known, so the comparison carries that
fix's predicted gain bound next to the measured speedup: the loop the product exists to close.

Speedup is throughput: samples (or steps, when the batch size is unknown) per second over the
steady steps (the warm-up left out), from the *mean* step time. Not the median: two DataLoader
workers that finish together make steps alternate fast/slow, and the median of such a series
says nothing about throughput. A bigger-batch fix makes each step slower and the epoch faster,
which samples/s captures. "N more GPUs" assumes linear data-parallel scaling, which
real clusters never quite reach, so it reads "at least as good as N more GPUs of this kind".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpu_notebook.analysis.compare_samples import compare_samples, fix_outcome
from gpu_notebook.analysis.interference import counted_step_times, step_load_cores
from gpu_notebook.analysis.like_work import like_work, step_work
from gpu_notebook.analysis.own_cost import disturbed_steps
from gpu_notebook.analysis.steps import steady_steps
from gpu_notebook.records import (
    Comparison,
    Finding,
    FixRunBefore,
    NoStepAfter,
    Report,
    Run,
    SampleComparison,
    SlowerAfterFix,
    StepTiming,
)

FIX_HEADER = "# gpucheck fix: "


def normalize_cell(source: str) -> str:
    """The cell as compared: no leading ``%%`` magic lines, no trailing spaces or blank lines.

    The magic line carries options (``-s 10``) that do not change the code being measured; a
    patched cell keeps the magics stacked above it too (``%%time``).
    """
    while source.startswith("%%"):
        source = source.partition("\n")[2]
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _is_fix_cell(source: str) -> bool:
    # A fix placed after the line binding what it sets has its header below the first line.
    return any(line.startswith(FIX_HEADER) for line in normalize_cell(source).split("\n"))


def proposing_finding(baseline: Report, report: Report) -> Finding | None:
    """The finding of ``baseline`` whose proposed cell is the cell ``report`` measured."""
    if not _is_fix_cell(report.run.cell_source):
        return None
    cell = normalize_cell(report.run.cell_source)
    for finding in baseline.findings:
        proposal = finding.proposal
        if (
            proposal is not None
            and proposal.source_after is not None
            and normalize_cell(proposal.source_after) == cell
        ):
            return finding
    return None


def _measured(report: Report) -> bool:
    return report.analysis.step_stats.median_s is not None


def find_baseline(history: Sequence[Report], report: Report) -> Report | None:
    """The most recent earlier report comparable with ``report`` (see the module docstring).

    ``history`` is oldest first (``GpuCheckMagics.reports``) and may already hold ``report``;
    reports without a measured step time are skipped: they have nothing to compare.
    """
    cell = normalize_cell(report.run.cell_source)
    for earlier in reversed(history):
        # started_at has one-second resolution: two quick runs can share it, so identity only.
        if earlier is report:
            continue
        if not _measured(earlier):
            continue
        if normalize_cell(earlier.run.cell_source) == cell or proposing_finding(earlier, report):
            return earlier
    return None


def _shares(report: Report) -> dict[str, float]:
    """Measured phase shares only: a phase that was not measured is absent, not zero."""
    phases = report.analysis.phases
    if phases is None:
        return {}
    out: dict[str, float] = {}
    for name in phases.measured:
        value = phases.share(name)
        if value is not None:
            out[name] = value
    return out


def _ran_on_a_gpu(report: Report) -> bool:
    env = report.run.env
    return env.cuda_available or bool(env.gpus) or report.analysis.gpu is not None


def _gpus_used(report: Report) -> int:
    """GPUs the run used: the devices in its trace, else 1 (one process drives one GPU)."""
    gpu = report.analysis.gpu
    return max(1, len(gpu.devices)) if gpu is not None else 1


def mean_step_s(report: Report) -> float | None:
    """Mean duration of the steady steps (decimation keeps every Nth step: still unbiased)."""
    steps = steady_steps(report.run.steps, report.run.window.warmup_steps)
    if not steps:
        return report.analysis.step_stats.median_s
    return sum(s.duration_s for s in steps) / len(steps)


def _compared_steps(run: Run) -> tuple[StepTiming, ...]:
    """The steady steps, our own disturbed ones left out (all of them when fewer than 5 stay)."""
    ours = disturbed_steps(run)
    steps = steady_steps(run.steps, run.window.warmup_steps)
    calm = tuple(s for s in steps if s.index not in ours)
    return calm if len(calm) >= 5 else tuple(steps)


def _processes(run: Run) -> int:
    """The most child processes (DataLoader workers) the sampler saw during the run."""
    return max((s.children or 0 for s in run.samples.samples), default=0)


def measured_samples(baseline: Report, report: Report) -> SampleComparison | None:
    """The two runs' steady steps compared as distributions (analysis.compare_samples): our own
    disturbed steps left out, each step with the other processes' load while it ran.

    Each step counts its own time (its wall time less its thread's wait for a core) where
    every step of both runs carries that wait and both ran as many processes; else its wall
    time (analysis.interference.counted_step_times, the rule --try-fixes follows too), and
    steps of other work are read at one mix (``analysis.like_work``)."""
    runs = (baseline.run, report.run)
    chosen = [_compared_steps(r) for r in runs]
    times, own = counted_step_times(
        [[s.duration_s for s in steps] for steps in chosen],
        [[s.wait_s for s in steps] for steps in chosen],
        [_processes(r) for r in runs],
    )
    # Steps of other work (LBFGS's 5-call and 1-call steps) read at one mix: the runs' shares
    # of each work do not decide (analysis.like_work, as --try-fixes reads its runs).
    times = like_work(times, [[step_work(s) for s in steps] for steps in chosen]) or times
    series = []
    for r, steps, counted in zip(runs, chosen, times, strict=True):
        load = step_load_cores(r, steps)
        series.append((list(counted), None if load is None else load.tolist()))
    (before, before_load), (after, after_load) = series
    shares = [_wait_share(r, steps, own) for r, steps in zip(runs, chosen, strict=True)]
    result = compare_samples(
        before,
        after,
        before_batch=baseline.analysis.step_stats.batch_size,
        after_batch=report.analysis.step_stats.batch_size,
        before_load_cores=before_load,
        after_load_cores=after_load,
        wait_shares=(shares[0], shares[1]),
    )
    return dataclasses.replace(result, own_time=True) if result is not None and own else result


def _wait_share(run: Run, steps: Sequence[StepTiming], own: bool) -> float | None:
    """The compared steps' wait for a core over their wall time that their count leaves in
    (``compare_samples``: at half or more, too busy to judge). Own times take out the loop
    thread's wait alone: where torch ran one intra-op thread that is all of it (None), else
    its other threads' waits for a core, and the loop thread's for them at each parallel
    region's end, stay in and grow with the load. None: a step's wait was not read."""
    if own and run.env.torch_threads == 1:
        return None
    waits = [s.wait_s for s in steps]
    wall_s = sum(s.duration_s for s in steps)
    if not steps or wall_s <= 0 or any(w is None for w in waits):
        return None
    return sum(w or 0.0 for w in waits) / wall_s


def throughput_speedup(baseline: Report, report: Report) -> float | None:
    """Samples/s after over samples/s before (steps/s when a batch size is unknown)."""
    before_s, after_s = mean_step_s(baseline), mean_step_s(report)
    if not before_s or not after_s:
        return None
    before_batch = baseline.analysis.step_stats.batch_size
    after_batch = report.analysis.step_stats.batch_size
    if before_batch and after_batch:
        return (after_batch / after_s) / (before_batch / before_s)
    return before_s / after_s


def compare(
    baseline: Report, report: Report, price_per_gpu_hour: float | None = None
) -> Comparison:
    """``report`` against ``baseline``: speedup, throughput, shares, and the fix's predicted bound.

    ``price_per_gpu_hour`` (any currency) prices the saving per 1,000 baseline steps' worth of
    samples; on a run without a GPU it is read as the price of the machine per hour.
    """
    before, after = baseline.analysis.step_stats, report.analysis.step_stats
    samples = measured_samples(baseline, report)
    speedup = samples.speedup if samples is not None else throughput_speedup(baseline, report)
    finding = proposing_finding(baseline, report)
    gpus = _gpus_used(report)
    gpu_equivalent = gpus * (speedup - 1.0) if speedup is not None else None
    if not _ran_on_a_gpu(report):
        gpu_equivalent = None  # "more GPUs of this kind" means nothing on a machine without one
    saved: float | None = None
    before_mean_s = mean_step_s(baseline)
    if price_per_gpu_hour is not None and speedup and before_mean_s:
        # The same samples as 1,000 baseline steps take 1/speedup of the time after the change.
        seconds = 1000 * before_mean_s * (1.0 - 1.0 / speedup)
        saved = seconds / 3600.0 * price_per_gpu_hour * _gpus_used(baseline)
    return Comparison(
        baseline_started_at=baseline.run.started_at,
        baseline_step_median_s=before.median_s,
        step_median_s=after.median_s,
        speedup=speedup,
        baseline_samples_per_s=before.samples_per_s,
        samples_per_s=after.samples_per_s,
        baseline_phase_share=_shares(baseline),
        phase_share=_shares(report),
        baseline_gpu_util_pct=_nvml_pct(baseline),
        gpu_util_pct=_nvml_pct(report),
        fix_id=finding.fix_id if finding is not None else None,
        predicted_bound=finding.stated_high if finding is not None else None,
        predicted_low=finding.stated_low if finding is not None else None,
        predicted_model_bound=finding.gain_bound if finding is not None else None,
        predicted_model_low=finding.gain_low if finding is not None else None,
        gpu_equivalent=gpu_equivalent,
        cost_saved_per_1000_steps=saved,
        samples=samples,
        baseline_status=baseline.run.status,
        baseline_error=baseline.run.error,
        baseline_steps=baseline.run.steps.step_count,
        status=report.run.status,
        error=report.run.error,
        steps=report.run.steps.step_count,
    )


# A measured speedup below this is "slower", not noise (steady means over several steps).
SLOWER_THAN = 0.95


def slower_after_fix(baseline: Report, report: Report, comparison: Comparison) -> Finding | None:
    """The fix the user ran made the loop slower: say so and point back to the earlier cell.

    Without this, the same family's rules read the new run afresh and escalate (more workers
    and still waiting: "the dataset is slow"); the honest answer is that this fix does not pay
    here, and the earlier cell was faster.
    """
    proposing = proposing_finding(baseline, report)
    speedup = comparison.speedup
    if proposing is None or speedup is None:
        return None
    if comparison.samples is not None:
        if comparison.samples.outcome != "slower":
            return None
    elif speedup >= SLOWER_THAN:
        return None
    before, after = comparison.baseline_phase_share, comparison.phase_share
    grown = tuple(
        (phase, before[phase], after[phase])
        for phase in ("data", "forward", "backward", "optimizer", "sync", "other", "unattributed")
        if phase in before and phase in after and after[phase] > before[phase] + 0.05
    )
    said = SlowerAfterFix(
        proposing.fix_id,
        baseline.run.started_at,
        proposing.title,
        speedup,
        proposing.gain_bound,
        proposing.stated_low,
        grown,
    )
    return _found("compare.slower_after_fix", said, gain_bound=1.0 / speedup)


def _found(rule_id: str, said: SlowerAfterFix | NoStepAfter, gain_bound: float | None) -> Finding:
    """The comparison's own finding, worded (``words.compare``) as the report's findings are."""
    from gpu_notebook.words import word_finding

    return word_finding(Finding(rule_id, "", "high", (), None, gain_bound, "", said=said))


def no_step_after(baseline: Report, report: Report) -> Finding | None:
    """The cell ran again (as it was, or as a fix of it) and took no step where the earlier run
    took some: there is nothing to compare, and the usual reason is an object of an earlier cell
    that the earlier run used up (a Trainer at its max_epochs or max_steps fits nothing again; an
    iterator or generator ends after one pass). Said first, so a before/after without figures
    is not read as the fix's."""
    if report.run.steps.step_count > 0 or report.run.status != "ok":
        return None
    before = baseline.run.steps.step_count
    if before == 0:
        return None
    proposing = proposing_finding(baseline, report)
    fix_id = proposing.fix_id if proposing is not None else None
    said = NoStepAfter(fix_id, baseline.run.started_at, before)
    return _found("compare.no_step_after", said, gain_bound=None)


def family(rule_id: str) -> str:
    return rule_id.split(".", 1)[0]


def findings_after(baseline: Report, report: Report, comparison: Comparison) -> tuple[Finding, ...]:
    """``report``'s findings; after a run that took no step where the earlier took some, that
    first; after a fix that made the loop slower, that answer first and the fixed cause's own
    findings (which would escalate on the slower run) left out."""
    nothing = no_step_after(baseline, report)
    if nothing is not None:
        return (nothing, *report.findings)
    slower = slower_after_fix(baseline, report, comparison)
    proposing = proposing_finding(baseline, report)
    if proposing is None:
        return report.findings
    if slower is None:
        return _not_offered_again(report.findings, proposing, comparison)
    cause = family(proposing.rule_id)
    return (slower, *(f for f in report.findings if family(f.rule_id) != cause))


def _not_offered_again(
    findings: tuple[Finding, ...], tried: Finding, comparison: Comparison
) -> tuple[Finding, ...]:
    """A fix the user ran that had no measurable effect is not offered again as it is: a finding
    offering that fix keeps its evidence, says what the fix measured, and loses its patch (the
    card then shows why instead of an Insert button). Whichever rule offers it now: the run
    after a fix reads its own cause afresh (workers that did not reach the loop leave a data
    wait that reads as a slow dataset, whose fix is the same change with more workers). One
    whose range still holds its predicted gain (undecided, ``fix_outcome``) keeps its patch and
    says so: the run could not have told."""
    s = comparison.samples
    if s is None or tried.fix_id is None or s.too_busy is not None:
        return findings  # runs too busy to judge say nothing of the fix: its card stands
    earned = fix_outcome(s, tried.gain_low)
    if earned not in ("no measurable effect", "undecided"):
        return findings
    from gpu_notebook.words.compare import fix_run_line, not_offered_again

    run = FixRunBefore(
        tried.fix_id, s.speedup, s.low, s.high, earned, tried.gain_bound, tried.stated_low
    )
    said = fix_run_line(run)
    out = []
    for f in findings:
        if f.fix_id == tried.fix_id:
            proposal = f.proposal
            if proposal is not None and earned == "no measurable effect":
                proposal = dataclasses.replace(
                    proposal,
                    source_after=None,
                    diff=None,
                    refusal=not_offered_again(run),
                )
            f = dataclasses.replace(f, evidence=(*f.evidence, said), proposal=proposal)
        out.append(f)
    return tuple(out)


__all__ = [
    "FIX_HEADER",
    "compare",
    "find_baseline",
    "findings_after",
    "mean_step_s",
    "measured_samples",
    "no_step_after",
    "normalize_cell",
    "proposing_finding",
    "slower_after_fix",
    "throughput_speedup",
]


def _nvml_pct(report: Report) -> float | None:
    """NVML's utilization inside the steps where enough ticks fell there, else the run's."""
    busy = report.analysis.utilization.nvml_busy
    return None if busy is None else 100.0 * busy
