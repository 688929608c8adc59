"""Memory rule: GPU memory peaks near the card's capacity.

Thresholds: > 90% of the card -> checkpointing / AMP (PyTorch TensorBoard profiler plugin);
TraceML calls 80% high (our "medium"). No gain bound: freeing memory does not shorten a step by
itself, it makes room for a bigger batch or model; the evidence says so. Not measured without
NVML (None), and then the rule is silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import compute_capability, found
from gpu_notebook.rules.precision import autocast_dtype

FULL = 0.90
HIGH = 0.80


@dataclass(frozen=True)
class NearOom(Said):
    peak_bytes: int
    total_bytes: int
    autocast: bool  # already on: the fix is checkpointing or accumulation

    @property
    def share(self) -> float:
        return self.peak_bytes / self.total_bytes


def near_oom(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    util = analysis.utilization
    if not util.gpu_memory_peak_bytes or not util.gpu_memory_total_bytes:
        return None
    said = NearOom(util.gpu_memory_peak_bytes, util.gpu_memory_total_bytes, facts.autocast)
    if said.share < HIGH:
        return None
    severity: Severity = "high" if said.share >= FULL else "medium"
    if facts.autocast:
        return found("memory.near_oom", severity, said)
    dtype = autocast_dtype(compute_capability(run))
    return found("memory.near_oom", severity, said, fix_id="autocast",
                 fix_params={"dtype": dtype, "device_type": "cuda"})  # fmt: skip


TIE = 130  # where its findings tie: the verdict table's order (rules._families)
RULES = (near_oom,)
