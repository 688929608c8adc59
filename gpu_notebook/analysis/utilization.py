"""Summaries of the sampler's series: GPU utilization and memory, CPU and RSS, over the whole
run and inside the steps (the loop's own figures)."""

from __future__ import annotations

import numpy as np

from gpu_notebook.analysis.interference import others_cores
from gpu_notebook.records import InSteps, Run, SampleSeries, StepClockRecord, UtilizationStats

__all__ = ["IN_STEPS_MIN_TICKS", "in_steps", "run_utilization", "utilization_stats"]

# Sampler ticks inside the steps before the loop's figures are read from them (fewer: a tick or
# two of a short run say little of its steps, and the whole run's means stand, said so).
IN_STEPS_MIN_TICKS = 3


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def utilization_stats(
    series: SampleSeries, steps: StepClockRecord | None = None, host_cores: int | None = None
) -> UtilizationStats:
    """None wherever nothing was measured (no GPU, metric unsupported, no samples).
    ``steps``: the step clock's record, for the figures inside the steps (``in_steps``)."""
    util: list[float] = []
    mem_peak: int | None = None
    mem_total: int | None = None
    for sample in series.samples:
        for gpu in sample.gpus:
            if gpu.utilization_pct is not None:
                util.append(gpu.utilization_pct)
            if gpu.memory_used_bytes is not None:
                mem_peak = max(mem_peak or 0, gpu.memory_used_bytes)
            if gpu.memory_total_bytes is not None:
                mem_total = max(mem_total or 0, gpu.memory_total_bytes)
    proc = [s.process_cpu_pct for s in series.samples if s.process_cpu_pct is not None]
    kids = [s.children_cpu_pct for s in series.samples if s.children_cpu_pct is not None]
    system = [s.system_cpu_pct for s in series.samples if s.system_cpu_pct is not None]
    rss = [s.rss_bytes for s in series.samples if s.rss_bytes is not None]
    arr = np.asarray(util, dtype=float)
    return UtilizationStats(
        gpu_util_mean_pct=float(arr.mean()) if util else None,
        gpu_util_p5_pct=float(np.percentile(arr, 5)) if util else None,
        gpu_util_p95_pct=float(np.percentile(arr, 95)) if util else None,
        gpu_memory_peak_bytes=mem_peak,
        gpu_memory_total_bytes=mem_total,
        process_cpu_mean_pct=_mean(proc),
        children_cpu_mean_pct=_mean(kids),
        system_cpu_mean_pct=_mean(system),
        rss_peak_bytes=max(rss) if rss else None,
        in_steps=None if steps is None else in_steps(series, steps, host_cores),
    )


def run_utilization(run: Run) -> UtilizationStats:
    """``utilization_stats`` of a run: its samples, with the figures inside its steps."""
    return utilization_stats(run.samples, run.steps, run.env.cpu_count)


def in_steps(
    series: SampleSeries, steps: StepClockRecord, host_cores: int | None = None
) -> InSteps | None:
    """The ticks whose interval (a tick reads the ``interval_s`` before it) lies between the
    first step's start and the last step's end; None: no step clocked."""
    timed = steps.steps
    if not timed:
        return None
    start = timed[0].start_s
    end = timed[-1].start_s + timed[-1].duration_s
    inside = [s for s in series.samples if start <= s.t_s - series.interval_s and s.t_s <= end]
    enough = len(inside) >= IN_STEPS_MIN_TICKS
    util = [g.utilization_pct for s in inside for g in s.gpus if g.utilization_pct is not None]
    ours = [pct for s in inside if (pct := s.ours_cpu_pct()) is not None]
    cores = float(np.median(ours)) / 100.0 if enough and len(ours) >= IN_STEPS_MIN_TICKS else None
    others = [x for s in inside if host_cores and (x := others_cores(s, host_cores)) is not None]
    run_wait = [s.run_wait_pct / 100.0 for s in inside if s.run_wait_pct is not None]
    read = [s for s in timed if s.wait_s is not None and s.duration_s > 0]
    wall_s = sum(s.duration_s for s in read)
    wait = min(1.0, sum(s.wait_s or 0.0 for s in read) / wall_s) if wall_s > 0 else None
    quiet = cores
    if cores is not None and wait is not None and wait < 1.0:
        quiet = cores / (1.0 - wait)
        if host_cores:
            quiet = min(quiet, float(host_cores))
    return InSteps(
        ticks=len(inside),
        min_ticks=IN_STEPS_MIN_TICKS,
        gpu_util_mean_pct=float(np.mean(util)) if enough and util else None,
        ours_cores=cores,
        wait_share=wait,
        quiet_cores=quiet,
        others_cores=_median(others) if enough else None,
        run_wait=_median(run_wait) if enough else None,
    )


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if len(values) >= IN_STEPS_MIN_TICKS else None
