"""Words of rules/unstepped_params: parameters that get gradients no optimizer steps."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.unstepped_params import UnsteppedParams
from gpu_notebook.words.common import Words, worder, words


@worder(UnsteppedParams)
def unstepped(s: UnsteppedParams) -> Words:
    where = ", ".join(f"`{m}`" for m in s.modules)
    evidence = [
        f"{where}: {s.count} parameter tensor(s), {s.numel:,} values, get a gradient every "
        "backward and are in no optimizer's param_groups",
        f"that is {fmt_share(s.fraction)} of the trained models' parameters with requires_grad",
    ]
    if s.backward is not None:
        evidence.append(
            f"backward: {fmt_share(s.backward)} of the step; their gradients' part of it up to "
            f"{fmt_share(s.backward * s.fraction)} (by parameter count: from nothing measurable "
            f"if they sit late in the graph, to all of it if early): gain {fmt_gain(s.bound)}"
        )
    fix = (
        f"If {s.target} is not meant to train, freeze it: `{s.target}.requires_grad_(False)` "
        "once, before the loop (or give its parameters to the optimizer if it is)."
        if s.target is not None
        else "Set requires_grad_(False) on the parameters you do not train (or add them to an "
        "optimizer if you do)."
    )
    return words(
        f"The parameters of {where} get gradients that no optimizer uses",
        evidence,
        fix,
        "PyTorch fine-tuning tutorial (feature extraction: requires_grad = False)",
    )
