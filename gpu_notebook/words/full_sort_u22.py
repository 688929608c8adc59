"""Words of the full-sort rule (rules/full_sort_u22.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.full_sort_u22 import SortedForTopk
from gpu_notebook.words.common import Words, worder, words


@worder(SortedForTopk)
def sorted_for_topk(s: SortedForTopk) -> Words:
    which = "first" if s.first else "last"
    evidence = [
        f"line {s.line}: `{s.text}` sorts every entry of each row and keeps the {which} "
        f"`{s.k}` of them, every step"
    ]
    if s.share is not None:
        evidence.append(f"that line: {fmt_share(s.share)} of the sampled step time")
    else:
        evidence.append("that line was not sampled enough to read its share")
    if s.op is not None:
        evidence.append(f"the traced steps' time in aten::sort (all its calls): {fmt_share(s.op)}")
    if s.bound is not None:
        evidence.append(f"gain if the sort's time goes: {fmt_gain(s.bound, s.low)}")
    act = (
        f"Select them with topk({s.k}, dim=...): the same entries in the same order (up to "
        "ties), without ordering the rest of each row."
        if s.first
        else f"Select them with topk({s.k}, dim=..., largest=...) and .flip(dim) for the "
        "ascending order the slice keeps: no patch (the order is the sort's)."
    )
    return words(f"Each step sorts whole rows to keep {s.k} entries", evidence, act,
                 "PyTorch docs: torch.topk")  # fmt: skip
