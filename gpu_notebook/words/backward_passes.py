"""Words of the several-backward-passes rule (rules/backward_passes.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.backward_passes import RetainedBackwards
from gpu_notebook.words.common import Words, worder, words


@worder(RetainedBackwards)
def retained_backwards(s: RetainedBackwards) -> Words:
    joined = " + ".join(s.losses) if s.losses else "the losses"
    backward = (
        f"backward {fmt_share(s.backward)} of the step: {s.passes} passes, each walking the "
        "shared part of the graph again"
        if s.backward is not None
        else "the backward phase was not measured"
    )
    return words(
        f"The step runs {s.passes} backward passes over one graph (retain_graph=True)",
        [
            f"line {s.line}: `{s.text}` keeps the graph for another backward over the same "
            "forward: the part the losses share runs backward once per loss",
            backward,
            f"gain with one pass: {fmt_gain(s.bound)} (every pass but one removed whole: the most, "
            "when the part each loss has alone is small)",
        ],
        f"Sum the losses and call backward once: ({joined}).backward(). The gradients are the "
        "same sums (the float additions in another order: the last digits can differ), and the "
        "graph is not kept.",
        "PyTorch autograd mechanics (gradients accumulate; retain_graph); TraceML step_time "
        "policy (suggest 5%, warn 10%, critical 20%)",
    )
