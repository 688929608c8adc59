"""Words of the shape rule (rules/shapes.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.shapes import ShapesChange
from gpu_notebook.words.common import Words, worder, words


@worder(ShapesChange)
def shapes_change(s: ShapesChange) -> Words:
    evidence = [
        f"the model's input batch size changed on {fmt_share(s.change)} of {s.steps} steps "
        f"({len(s.sizes)} sizes, {s.sizes[0]}..{s.sizes[-1]})",
        "best-effort: only the leading dimension of the first input is seen (no record_shapes)",
    ]
    if s.spread is not None:
        evidence.append(f"step time p90/median: {s.spread:.1f}x")
    if s.compiled:
        evidence.append("torch.compile is used: each new shape can trigger a recompilation")
    if s.benchmark and s.gpu:
        evidence.append("cudnn.benchmark is on: each new shape is autotuned again")
    if not (s.compiled or s.gpu):
        evidence.append(
            "eager mode on the CPU: little cost here; on a GPU with cudnn.benchmark or torch.compile each new shape costs a re-tune or a recompile"
        )
    evidence.append(
        "no gain bound: the per-shape cost (re-tuning, recompiling) is not separated in the measurement"
    )
    return words(
        "The input shape changes every step",
        evidence,
        "Pad or bucket inputs to a few fixed sizes (drop_last=True for the last batch); with "
        "torch.compile use dynamic=True or torch._dynamo.mark_dynamic.",
        "PyTorch performance tuning guide (cuDNN autotuner needs fixed sizes); torch._dynamo "
        "recompile_limit (8)",
    )
