"""Words of the sliced-loss rule (rules/sliced_loss_loop.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.sliced_loss_loop import SlicedLossLoop
from gpu_notebook.words.common import Words, worder, words


@worder(SlicedLossLoop)
def sliced_loss_loop(s: SlicedLossLoop) -> Words:
    evidence = [
        f"line {s.line}: `{s.text}` calls `{s.loss}` once per slice of `{s.tensor}` along "
        f"`{s.var}`: each slice's backward fills a zero gradient of the whole `{s.tensor}` and "
        "adds the slice into it, a whole-size buffer per slice, every step",
    ]
    if s.fills is not None and s.op_share is not None:
        evidence.append(
            f"the trace: {s.fills:.0f} zero fills a step; fills and adds "
            f"{fmt_share(s.op_share)} of the traced steps"
        )
    if s.backward is not None:
        evidence.append(f"the backward: {fmt_share(s.backward)} of the step")
    if s.bound is not None:
        evidence.append(f"gain if the loss is one call: {fmt_gain(s.bound, None)}")
    return words(
        f"The loss is taken one slice of `{s.tensor}` at a time in Python",
        evidence,
        f"Call `{s.loss}` once over the whole tensors: over a class dimension V as "
        f"`{s.loss}(logits.reshape(-1, V), y.reshape(-1))`, an element-wise loss (`mse_loss`, "
        "`binary_cross_entropy_with_logits`) on the tensors as they are. Its default mean over "
        "every element is the per-slice means' average where every slice holds as many "
        "elements; for their sum, multiply it by the number of slices. No patch: the matching "
        "reduction depends on the loss and its weights.",
        "PyTorch docs: torch.nn.functional.cross_entropy",
    )
