"""Words of the memory rule (rules/memory.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.memory import NearOom
from gpu_notebook.words.common import Words, worder, words


@worder(NearOom)
def near_oom(s: NearOom) -> Words:
    evidence = [
        f"peak GPU memory {s.peak_bytes / 2**30:.1f} GiB of "
        f"{s.total_bytes / 2**30:.1f} GiB ({fmt_share(s.share)})",
        "no speed bound: freeing memory makes room for a bigger batch, it does not shorten a step",
    ]
    if s.autocast:
        evidence.append("autocast is already on")
        fix = "Activation checkpointing (torch.utils.checkpoint) or gradient accumulation with a smaller micro-batch."
    else:
        fix = "Mixed precision (torch.autocast) halves activation memory; then activation checkpointing or gradient accumulation."
    return words(
        f"GPU memory peaks at {fmt_share(s.share)} of the card",
        evidence,
        fix,
        "PyTorch TensorBoard profiler plugin (> 90% of memory); TraceML (80% high)",
    )
