"""Words of the restacked-bank rule (rules/restacked_bank.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.restacked_bank import RestackedBank
from gpu_notebook.words.common import Words, worder, words


@worder(RestackedBank)
def restacked_bank(s: RestackedBank) -> Words:
    grown = ", ".join(str(g) for g in s.grown)
    evidence = [
        f"line {s.line}: `{s.text}` stacks the whole of `{s.bank}` (a Python {s.kind} of "
        f"tensors) every step, one tensor handle per row, while line(s) {grown} add only the "
        "step's new rows to it"
    ]
    if s.share is not None:
        evidence.append(f"those lines: {fmt_share(s.share)} of the sampled step time")
    else:
        evidence.append("those lines were not sampled enough to read their share")
    if s.op is not None:
        evidence.append(
            f"the traced steps' time in that operator (all its calls): {fmt_share(s.op)}"
        )
    if s.bound is not None:
        evidence.append(f"gain if the bank is one preallocated tensor: {fmt_gain(s.bound, s.low)}")
    return words(
        f"Each step rebuilds the `{s.bank}` bank from a Python {s.kind} of tensors",
        evidence,
        f"Keep `{s.bank}` as one preallocated tensor and write the new rows in place at a moving "
        f"pointer (`bank[ptr:ptr + b] = k; ptr = (ptr + b) % len(bank)`, a ring buffer, as "
        "MoCo's queue does): the step then reads the bank as it is, with no per-row copy. No "
        "patch: the pointer and the first fill depend on the loop. torch.compile and a bigger "
        "batch do not shorten this copy.",
        "MoCo (He et al., 2020), its reference code's queue: a (dim, K) buffer and a pointer",
    )
