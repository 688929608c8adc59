"""Words of the element-loop rule (rules/element_loop_u23.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.element_loop_u23 import ElementLoop
from gpu_notebook.words.common import Words, worder, words


@worder(ElementLoop)
def element_loop(s: ElementLoop) -> Words:
    names = ", ".join(f"`{n}`" for n in s.names)
    evidence = [
        f"line {s.line}: `{s.text}` walks {names} one element at a time, every step: each "
        "index, comparison and read of a value is a tensor operation of its own",
    ]
    if s.share is not None:
        evidence.append(
            f"lines {s.lines[0]}-{s.lines[1]}: {fmt_share(s.share)} of the sampled step time"
        )
    if s.bound is not None:
        evidence.append(f"gain if it is one operation over the batch: {fmt_gain(s.bound, s.low)}")
    return words(
        "Each step loops over the batch's elements in Python",
        evidence,
        "Write it as one tensor operation over the batch: a count as `int((preds == y).sum())`, "
        "a pair mask as `(y[:, None] == y[None, :])`, a per-element lookup as an index "
        "tensor (`w[y]`). No patch: the batched form depends on what the loop computes.",
        "PyTorch docs: Broadcasting semantics",
    )
