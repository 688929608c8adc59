"""Words of the parameter-loop rule (rules/param_loops.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.param_loops import ParameterLoop
from gpu_notebook.words.common import Words, worder, words


@worder(ParameterLoop)
def parameter_loop(s: ParameterLoop) -> Words:
    ops = f"{s.ops} in-place op{'s' if s.ops > 1 else ''}"
    evidence = [
        f"line {s.line}: `{s.text}` runs {ops} per parameter tensor, each its own call from "
        "Python, every step" + (f" ({s.count} such loops)" if s.count > 1 else "")
    ]
    if s.own is not None:
        evidence.append(f"the loop's lines: {fmt_share(s.own)} of the sampled step time")
    if s.residual is not None:
        evidence.append(
            f"time outside data, forward, backward and optimizer: {fmt_share(s.residual)} of the "
            "step (holds the loop's ops and Python)"
        )
    evidence.append(f"gain if the per-tensor dispatch goes: {fmt_gain(s.bound, s.low)}")
    if s.cpu:
        how = (
            "No patch on the CPU: there a foreach call still runs its op tensor by tensor and "
            "only the Python between the ops goes; on a GPU the calls become a few fused kernels."
        )
    elif s.patched:
        how = (
            "The patch writes the loop as torch._foreach_* calls over lists of the same tensors "
            "(the same arithmetic; the last digits can differ)."
        )
    else:
        how = "Its arguments are not the loop's tensors themselves, so no patch is offered."
    return words(
        "A Python loop over the parameters runs every step",
        evidence,
        "Do each op for all tensors in one call: torch._foreach_mul_/_foreach_add_/"
        "_foreach_lerp_ over the parameter lists (an EMA: torch.optim.swa_utils.AveragedModel "
        "with get_ema_multi_avg_fn does this), or run it every few steps. " + how,
        "PyTorch torch.optim foreach implementations; torch.optim.swa_utils (EMA with foreach)",
    )
