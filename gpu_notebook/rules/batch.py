"""Batch rule: the GPU is underused and the batch is small, with memory to spare.

Thresholds: GPU utilization < 50% suggests a bigger batch (PyTorch TensorBoard profiler plugin);
TraceML calls < 30% low (our "medium") and 30-70% moderate. Memory headroom: peak below half the
card, so doubling the batch fits. Skipped when data wait or syncs are >= 10% (TraceML warn):
those rules name the cause, and a bigger batch would not fix them.
Gain bound: ``rules.common.bigger_batch_bound``. The fix scales the learning rate linearly
(Goyal et al., 2017): check that training still converges.

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import (
    bigger_batch_bound,
    bigger_batch_bound_low,
    found,
    gpu_busy_share,
    input_or_sync_speaks,
)
from gpu_notebook.rules.input_pipeline import per_start_cost

LOW_UTIL = 0.50  # TensorBoard profiler plugin
VERY_LOW_UTIL = 0.30  # TraceML "low"
MEMORY_HEADROOM = 0.50
FACTOR = 2


@dataclass(frozen=True)
class SmallBatch(Said):
    busy: float  # the GPU's busy share
    busy_from: Literal["trace", "nvml"]  # the trace's GPU busy time, or NVML's utilization
    batch: int
    memory: float  # peak GPU memory's share of the card
    bound: float  # samples/s gain of a batch FACTOR times bigger
    # A remade loader's start-ups, of the run's step time, left out of what the batch shares
    # out (``rules.input_pipeline.per_start_cost``); None: none read.
    start_ups: float | None = None
    # GPU events the trace's timeline holds without timestamps (``GpuTimeline.partial``): its
    # busy share is only a lower bound, so NVML's (an upper bound) is read instead. 0: none.
    unclocked_events: int = 0


def small_batch(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    batch = analysis.step_stats.batch_size
    util = analysis.utilization
    gpu = analysis.gpu
    busy = gpu_busy_share(analysis)
    source: Literal["trace", "nvml"] = "trace"
    partial = gpu is not None and gpu.partial
    if busy is None or partial:
        # A partial timeline's share is a lower bound: a small batch is not read on it, only on
        # NVML's (inside the steps: ``nvml_busy``), which counts any time a kernel ran. Neither:
        # the GPU's busy share is not measured, no finding.
        busy, source = util.nvml_busy, "nvml"
    if busy is None or batch is None or busy >= LOW_UTIL:
        return None
    if not util.gpu_memory_peak_bytes or not util.gpu_memory_total_bytes:
        return None  # without memory figures we cannot say a bigger batch fits
    memory = util.gpu_memory_peak_bytes / util.gpu_memory_total_bytes
    if memory >= MEMORY_HEADROOM:
        return None
    if input_or_sync_speaks(analysis):
        return None  # the input or sync rule names the cause
    starts = per_start_cost(run, analysis, facts)  # once an epoch: not shared out per sample
    bound = bigger_batch_bound(FACTOR, analysis, starts)
    said = SmallBatch(
        busy,
        source,
        batch,
        memory,
        bound,
        None if starts is None else starts.share,
        gpu.unclocked_events if gpu is not None and partial else 0,
    )
    severity: Severity = "medium" if busy < VERY_LOW_UTIL else "low"
    return found("batch.small_batch", severity, said, bound=bound, fix_id="bigger_batch",
                 fix_params={"factor": FACTOR, "scale_lr": True},
                 bound_low=bigger_batch_bound_low(FACTOR, analysis, starts),
                 ceiling=float(FACTOR))  # fmt: skip


TIE = 70  # where its findings tie: the verdict table's order (rules._families)
RULES = (small_batch,)
