"""Words of rules/frozen_forward: a frozen model's no_grad forward every step."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.frozen_forward import FrozenForward
from gpu_notebook.words.common import Words, at, phase_source, worder, words

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); PyTorch knowledge distillation "
    "tutorial (teacher in eval mode, no_grad)"
)


@worder(FrozenForward)
def frozen_forward(s: FrozenForward) -> Words:
    first = s.lines[0]
    evidence = [
        f"{at(first)}: `{first.text}`: a model run under no_grad every step, its outputs "
        "read by the loss (a teacher's targets, a frozen encoder)",
        f"the step outside the trained model, its optimizer step and its data: "
        f"{fmt_share(s.other)} ({phase_source(s.phases)}); autograd numbers no operator under "
        "no_grad, so that forward reads there, not as forward",
        f"gain if its outputs were computed once: {fmt_gain(s.bound)} (Amdahl, the whole share)",
    ]
    return words(
        f"A frozen model's forward takes {fmt_share(s.other)} of every step",
        evidence,
        "If its inputs are the same every epoch (no random augmentation), compute its outputs "
        "once before the loop and index them with the batch; otherwise make each call cheaper: "
        "torch.inference_mode(), bf16 autocast, or torch.compile on that model (no backward to "
        "compile).",
        _SOURCE,
    )
