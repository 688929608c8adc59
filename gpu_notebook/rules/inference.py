"""Inference rule: a loop runs the model without backward but with autograd on (or in train mode).

Measured: the step clock saw no backward and no optimizer step in the whole cell. Source: a loop
calls the model outside torch.no_grad()/inference_mode(); live: the model is still in train mode
(dropout, batch-norm statistics). Autograd then records every op and keeps activations alive.
No gain bound: that bookkeeping runs inside each forward op and is not separated in a trace;
the benchmark measures it instead. Severity medium (time and memory), not a phase share.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.elsewhere import source_trains
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, share


@dataclass(frozen=True)
class AutogradOn(Said):
    line: int | None  # the loop that runs the model with autograd on (None: train mode only)
    text: str | None  # that line's source
    train_mode: tuple[str, ...]  # live models in train mode the cell does not put in eval
    forward: float | None  # forward passes' share of the step


def autograd_in_inference(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    counts = run.steps.event_counts
    if counts.get("backward", 0) > 0 or counts.get("optimizer", 0) > 0:
        return None
    if counts.get("optimizer_in_children", 0) > 0:
        # Its child processes trained (their source may be another module's): the cell trains.
        return None
    if source_trains(run.cell_source):
        # The source trains (on a thread, in child processes): never advise inference_mode,
        # which would make its backward() raise.
        return None
    loops = facts.inference_loops
    training_models = [m for m in facts.live.models if m.training and not m.compiled]
    if not loops and not training_models:
        return None
    said = AutogradOn(
        loops[0].line if loops else None,
        loops[0].text if loops else None,
        tuple(m.name for m in training_models if m.name not in facts.eval_called),
        share(analysis, "forward"),
    )
    return found("inference.autograd_on", "medium", said, line=said.line, fix_id="inference_mode")


RULES = (autograd_in_inference,)
