"""Words of the inference rule (rules/inference.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_share
from gpu_notebook.rules.inference import AutogradOn
from gpu_notebook.words.common import Words, at, worder, words


@worder(AutogradOn)
def autograd_on(s: AutogradOn) -> Words:
    evidence = ["no backward and no optimizer step in this cell (step clock)"]
    if s.loop is not None:
        evidence.append(f"{at(s.loop)}: `{s.loop.text}` runs the model with autograd on")
    evidence += [
        f"`{m}` is in train mode (dropout and batch norm act as in training)" for m in s.train_mode
    ]
    if s.forward is not None:
        evidence.append(f"forward passes: {fmt_share(s.forward)} of the step")
    evidence.append(
        "no gain bound: autograd's bookkeeping is inside each forward op and not separated"
    )
    return words(
        "Inference runs with autograd on"
        if s.loop is not None
        else "Inference runs with the model in train mode",
        evidence,
        "Wrap the loop in torch.inference_mode() and call model.eval() first.",
        "PyTorch docs (inference_mode, Module.eval)",
    )
