"""Memory rule: GPU memory peaks near the card's capacity.

Thresholds: > 90% of the card -> checkpointing / AMP (PyTorch TensorBoard profiler plugin);
TraceML calls 80% high (our "medium"). No gain bound: freeing memory does not shorten a step by
itself, it makes room for a bigger batch or model; the evidence says so. Not measured without
NVML (None), and then the rule is silent.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import compute_capability, finding

FULL = 0.90
HIGH = 0.80


def near_oom(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    util = analysis.utilization
    if not util.gpu_memory_peak_bytes or not util.gpu_memory_total_bytes:
        return None
    memory = util.gpu_memory_peak_bytes / util.gpu_memory_total_bytes
    if memory < HIGH:
        return None
    evidence = [
        f"peak GPU memory {util.gpu_memory_peak_bytes / 2**30:.1f} GiB of "
        f"{util.gpu_memory_total_bytes / 2**30:.1f} GiB ({fmt_share(memory)})",
        "no speed bound: freeing memory makes room for a bigger batch, it does not shorten a step",
    ]
    cc = compute_capability(run)
    fix_id: str | None = None
    params: dict[str, str | int | float | bool | None] = {}
    if not facts.autocast:
        fix_id = "autocast"
        params = {
            "dtype": "bfloat16" if cc is not None and cc >= 8.0 else "float16",
            "device_type": "cuda",
        }
        fix = "Mixed precision (torch.autocast) halves activation memory; then activation checkpointing or gradient accumulation."
    else:
        evidence.append("autocast is already on")
        fix = "Activation checkpointing (torch.utils.checkpoint) or gradient accumulation with a smaller micro-batch."
    return finding(
        "memory.near_oom",
        f"GPU memory peaks at {fmt_share(memory)} of the card",
        "high" if memory >= FULL else "medium",
        evidence,
        fix,
        "PyTorch TensorBoard profiler plugin (> 90% of memory); TraceML (80% high)",
        fix_id=fix_id,
        fix_params=params,
    )


RULES = (near_oom,)
