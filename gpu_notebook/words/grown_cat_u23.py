"""Words of the grown-by-concatenation rule (rules/grown_cat_u23.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.grown_cat_u23 import GrownByCat
from gpu_notebook.words.common import Words, worder, words


@worder(GrownByCat)
def grown_by_cat(s: GrownByCat) -> Words:
    names = ", ".join(f"`{n}`" for n in s.names)
    where = ", ".join(str(n) for n in s.lines)
    evidence = [
        f"line {s.line}: `{s.text}` copies everything {names} holds so far into a new tensor to "
        "add the step's rows, every step: the copy grows with the steps run, so n steps copy "
        "about n*n/2 steps' rows",
    ]
    if s.share is not None:
        evidence.append(f"line(s) {where}: {fmt_share(s.share)} of the sampled step time")
    else:
        evidence.append(f"line(s) {where} were not sampled enough to read their share")
    if s.op is not None:
        evidence.append(
            f"the traced steps' time in that operator (all its calls): {fmt_share(s.op)}"
        )
    if s.bound is not None:
        evidence.append(f"gain if the rows are concatenated once: {fmt_gain(s.bound, s.low)}")
    else:
        floor = f" (at least {s.low:.2f}x)" if s.low is not None and s.low > 1.005 else ""
        evidence.append(
            "gain if the rows are concatenated once: no upper bound read: the copy grows with "
            f"the steps run and the profiled steps read it at their place in the loop{floor}"
        )
    return words(
        f"Each step copies all of {names} to add the step's rows",
        evidence,
        "Append each step's rows to a list (`parts.append(new)`) and concatenate once where the "
        "whole is read (`torch.cat(parts)` after the loop): the same tensor, each row copied "
        "once. Where the loop reads the whole every step, keep the running figure it needs "
        "(a count, a sum) instead. No patch: where the whole is read decides where the one "
        "concatenation goes.",
        "PyTorch docs: torch.cat",
    )
