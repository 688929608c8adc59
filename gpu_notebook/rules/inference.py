"""Inference rule: a loop runs the model without backward but with autograd on (or in train mode).

Measured: the step clock saw no backward and no optimizer step in the whole cell. Source: a loop
calls the model outside torch.no_grad()/inference_mode(); live: the model is still in train mode
(dropout, batch-norm statistics). Autograd then records every op and keeps activations alive.
No gain bound: that bookkeeping runs inside each forward op and is not separated in a trace;
the benchmark measures it instead. Severity medium (time and memory), not a phase share.
"""

from __future__ import annotations

from gpu_notebook.analysis.elsewhere import source_trains
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import finding, share


def autograd_in_inference(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    counts = run.steps.event_counts
    if counts.get("backward", 0) > 0 or counts.get("optimizer", 0) > 0:
        return None
    if source_trains(run.cell_source):
        # The source trains (on a thread, in child processes): never advise inference_mode,
        # which would make its backward() raise.
        return None
    loops = facts.inference_loops
    training_models = [m for m in facts.live.models if m.training and not m.compiled]
    if not loops and not training_models:
        return None
    evidence = ["no backward and no optimizer step in this cell (step clock)"]
    if loops:
        evidence.append(f"line {loops[0].line}: `{loops[0].text}` runs the model with autograd on")
    for model in training_models:
        if model.name not in facts.eval_called:
            evidence.append(
                f"`{model.name}` is in train mode (dropout and batch norm act as in training)"
            )
    forward = share(analysis, "forward")
    if forward is not None:
        evidence.append(f"forward passes: {fmt_share(forward)} of the step")
    evidence.append(
        "no gain bound: autograd's bookkeeping is inside each forward op and not separated"
    )
    return finding(
        "inference.autograd_on",
        "Inference runs with autograd on"
        if loops
        else "Inference runs with the model in train mode",
        "medium",
        evidence,
        "Wrap the loop in torch.inference_mode() and call model.eval() first.",
        "PyTorch docs (inference_mode, Module.eval)",
        line=loops[0].line if loops else None,
        fix_id="inference_mode",
    )


RULES = (autograd_in_inference,)
