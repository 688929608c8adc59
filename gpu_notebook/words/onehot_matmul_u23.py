"""Words of the one-hot product rule (rules/onehot_matmul_u23.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.onehot_matmul_u23 import OneHotProduct
from gpu_notebook.words.common import Words, worder, words


@worder(OneHotProduct)
def onehot_product(s: OneHotProduct) -> Words:
    made = f"line {s.onehot_line}'s" if s.onehot_line != s.line else "its"
    evidence = [
        f"line {s.line}: `{s.text}` multiplies {made} one-hot matrix (a float row of the whole "
        "vocabulary for every index) by a table: a dense product forward, and another for the "
        "table's gradient, where each index only picks one row",
    ]
    if s.share is not None:
        evidence.append(f"those lines (the forward): {fmt_share(s.share)} of the sampled step time")
    if s.bound is not None:
        evidence.append(
            f"gain if the rows are gathered (the backward's product goes too): "
            f"{fmt_gain(s.bound, s.low)}"
        )
    return words(
        "Each step does an embedding lookup as a one-hot matrix product",
        evidence,
        "Gather the rows instead: `F.embedding(ids, table)` (or `table[ids]`) for a [V, D] "
        "table, an `nn.Embedding(V, D)` for a layer (`linear.weight.T[ids]` plus its bias keeps "
        "an `nn.Linear(V, D)`'s values): the same values and the same gradient for the rows "
        "used, with no [.., V] tensor. No patch: the table's orientation and a bias decide "
        "the spelling.",
        "PyTorch docs: torch.nn.functional.embedding",
    )
