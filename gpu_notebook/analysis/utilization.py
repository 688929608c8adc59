"""Summaries of the sampler's series: GPU utilization and memory, CPU and RSS."""

from __future__ import annotations

import numpy as np

from gpu_notebook.records import SampleSeries, UtilizationStats


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def utilization_stats(series: SampleSeries) -> UtilizationStats:
    """None wherever nothing was measured (no GPU, metric unsupported, no samples)."""
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
    )
