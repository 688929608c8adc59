"""Words of the gradient rule (rules/grads.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.grads import ZeroFilledGrads
from gpu_notebook.words.common import Words, at, worder, words


@worder(ZeroFilledGrads)
def zero_filled(s: ZeroFilledGrads) -> Words:
    how = (
        "fills every gradient with zeros (one fill per parameter); the backward then adds into them"
        if s.form == "zero_grad"
        else "fills this gradient with zeros; the backward then adds into it"
    )
    evidence = [
        f"{at(s.where)}: `{s.where.text}` {how}"
        + (f" ({s.count} such lines)" if s.count > 1 else "")
    ]
    if s.optimizer is not None:
        evidence.append(
            f"optimizer step and zero_grad together: {fmt_share(s.optimizer)} of the step "
            "(the fill is part of it; not timed apart)"
        )
    return words(
        "Gradients are zeroed every step instead of freed",
        evidence,
        "Use zero_grad(set_to_none=True) (torch's default) or `p.grad = None`: no fill, and the "
        "backward writes the gradient. Code that reads .grad before the next backward sees None.",
        "PyTorch performance tuning guide: use parameter.grad = None instead of zero_grad()",
    )
