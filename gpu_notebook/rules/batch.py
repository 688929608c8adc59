"""Batch rule: the GPU is underused and the batch is small, with memory to spare.

Thresholds: GPU utilization < 50% suggests a bigger batch (PyTorch TensorBoard profiler plugin);
TraceML calls < 30% low (our "medium") and 30-70% moderate. Memory headroom: peak below half the
card, so doubling the batch fits. Skipped when data wait or syncs are >= 10% (TraceML warn):
those rules name the cause, and a bigger batch would not fix them.
Gain bound: a step of 2B samples takes at least as long as a step of B, so the model side per
sample at most halves while data loading per sample stays: ``1 / (d + (1 - d) / 2)``; the fix scales the learning rate linearly (Goyal et al., 2017): check that
training still converges.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import WARN, bigger_batch_bound, finding, gpu_busy_share, share

LOW_UTIL = 0.50  # TensorBoard profiler plugin
VERY_LOW_UTIL = 0.30  # TraceML "low"
MEMORY_HEADROOM = 0.50
FACTOR = 2


def small_batch(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    batch = analysis.step_stats.batch_size
    util = analysis.utilization
    busy = gpu_busy_share(analysis)
    source = "trace (GPU busy time)"
    if busy is None and util.gpu_util_mean_pct is not None:
        busy, source = util.gpu_util_mean_pct / 100.0, "NVML utilization"
    if busy is None or batch is None or busy >= LOW_UTIL:
        return None
    if not util.gpu_memory_peak_bytes or not util.gpu_memory_total_bytes:
        return None  # without memory figures we cannot say a bigger batch fits
    memory = util.gpu_memory_peak_bytes / util.gpu_memory_total_bytes
    if memory >= MEMORY_HEADROOM:
        return None
    for phase in ("data", "sync"):
        value = share(analysis, phase)
        if value is not None and value >= WARN:
            return None
    bound = bigger_batch_bound(FACTOR, analysis)
    return finding(
        "batch.small_batch",
        f"The GPU is {fmt_share(busy)} busy with a batch of {batch}: room for a bigger batch",
        "medium" if busy < VERY_LOW_UTIL else "low",
        [
            f"GPU busy {fmt_share(busy)} ({source}), batch size {batch}",
            f"peak GPU memory {fmt_share(memory)} of the card: a batch of {batch * FACTOR} should fit",
            f"gain: samples/s {fmt_gain(bound)} (the model side per sample shrinks at most "
            f"x{FACTOR}, data loading per sample not at all)",
            "the learning rate scales with the batch (linear scaling rule); check convergence",
        ],
        f"Multiply the batch size by {FACTOR} and the learning rate by {FACTOR}.",
        "PyTorch TensorBoard profiler plugin (GPU utilization < 50% -> bigger batch); TraceML "
        "(< 30% low); Goyal et al. 2017 (linear LR scaling)",
        bound=bound,
        fix_id="bigger_batch",
        fix_params={"factor": FACTOR, "scale_lr": True},
    )


RULES = (small_batch,)
