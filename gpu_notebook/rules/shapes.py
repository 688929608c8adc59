"""Shape rule: the model's input shape changes from step to step (best-effort).

What is measured: the step clock records the samples of each step's DataLoader batches
(``StepTiming.batch_size``; no hook of ours sits on modules, so a loop over in-memory tensors
gives none); the trace has no shapes (``record_shapes`` is off: it costs
~20%). So only batch-size changes are seen, not sequence lengths or image sizes: best-effort,
and the evidence says so. A last, smaller batch of an epoch is normal and ignored (at most two
distinct sizes).

Why it matters: with ``cudnn.benchmark`` each new shape is re-tuned, ``torch.compile``
recompiles (up to its recompile limit, 8 by default), and caching allocators fragment; in eager
mode on a CPU it costs little. Severity follows that: medium where a GPU or torch.compile is in
play, low otherwise. No gain bound: the per-shape cost is not separated in the measurement.
"""

from __future__ import annotations

from itertools import pairwise

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import finding, has_gpu

CHANGE_SHARE = 0.5  # the shape changes on at least half of the steps
MIN_DISTINCT = 3  # a smaller last batch gives two sizes; three or more is a pattern


def batch_sizes(run: Run) -> list[int]:
    """Leading dimension of the model's first input per timed step (the lean clock stops reading it)."""
    return [s.batch_size for s in run.steps.steps if s.timed and s.batch_size is not None]


def changing_shapes(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    sizes = batch_sizes(run)
    if len(sizes) < 4:
        return None
    distinct = sorted(set(sizes))
    changes = sum(1 for a, b in pairwise(sizes) if a != b)
    change_share = changes / (len(sizes) - 1)
    if len(distinct) < MIN_DISTINCT or change_share < CHANGE_SHARE:
        return None
    compiled = facts.compiled or any(m.compiled for m in facts.live.models)
    benchmark = facts.cudnn_benchmark or facts.live.cudnn_benchmark
    evidence = [
        f"the model's input batch size changed on {fmt_share(change_share)} of {len(sizes)} steps "
        f"({len(distinct)} sizes, {distinct[0]}..{distinct[-1]})",
        "best-effort: only the leading dimension of the first input is seen (no record_shapes)",
    ]
    st = analysis.step_stats
    if st.median_s and st.p90_s:
        evidence.append(f"step time p90/median: {st.p90_s / st.median_s:.1f}x")
    if compiled:
        evidence.append("torch.compile is used: each new shape can trigger a recompilation")
    if benchmark and has_gpu(run):
        evidence.append("cudnn.benchmark is on: each new shape is autotuned again")
    if not (compiled or has_gpu(run)):
        evidence.append(
            "eager mode on the CPU: little cost here; on a GPU with cudnn.benchmark or torch.compile each new shape costs a re-tune or a recompile"
        )
    evidence.append(
        "no gain bound: the per-shape cost (re-tuning, recompiling) is not separated in the measurement"
    )
    return finding(
        "shapes.changing",
        "The input shape changes every step",
        "medium" if compiled or has_gpu(run) else "low",
        evidence,
        "Pad or bucket inputs to a few fixed sizes (drop_last=True for the last batch); with "
        "torch.compile use dynamic=True or torch._dynamo.mark_dynamic.",
        "PyTorch performance tuning guide (cuDNN autotuner needs fixed sizes); torch._dynamo "
        "recompile_limit (8)",
    )


RULES = (changing_shapes,)
