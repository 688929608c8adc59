"""Inference rule: a loop runs the model without backward but with autograd on (or in train mode).

Measured: the step clock saw no backward and no optimizer step in the whole cell. Source: a loop
calls the model outside torch.no_grad()/inference_mode(); live: the model is still in train mode
(dropout, batch-norm statistics). Autograd then records every op and keeps activations alive.
No gain bound: that bookkeeping runs inside each forward op and is not separated in a trace;
the benchmark measures it instead. Severity medium (time and memory), not a phase share.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.analysis.elsewhere import source_trains
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, share


@dataclass(frozen=True)
class AutogradOn(Said):
    loop: SourceLine | None  # the loop that runs the model with autograd on (None: train mode)
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
    handed = handed_to_training(facts)
    training_models = [
        m
        for m in facts.live.models
        if m.training and not m.compiled and not m.mode_blind and m.name not in handed
    ]
    if not loops and not training_models:
        return None
    said = AutogradOn(
        loops[0] if loops else None,
        tuple(m.name for m in training_models if m.name not in facts.eval_called),
        share(analysis, "forward"),
    )
    line = loops[0].cell_line if loops else None
    return found("inference.autograd_on", "medium", said, line=line, fix_id="inference_mode")


# A call whose last name holds one of these trains the model it is handed (`trainer.fit(lit)`,
# `train_one_epoch(model, loader, opt)`), as words/proposals.py reads a loader handed to one.
_TRAINING_CALL_WORDS = ("train", "fit")


def handed_to_training(facts: SourceFacts) -> frozenset[str]:
    """The names the cell hands to a call named for training: a model handed to
    ``trainer.fit(lit, ...)`` trains there, whatever the step clock saw (a finished Trainer
    fits nothing the second time: no backward, and the model is still in train mode)."""
    if facts.tree is None:
        return frozenset()
    handed: set[str] = set()
    for call in facts.tree.calls():
        called = (dotted(call.func) or "").rsplit(".", 1)[-1].lower()
        if not any(word in called for word in _TRAINING_CALL_WORDS):
            continue
        values = [*call.args, *(k.value for k in call.keywords)]
        handed |= {v.id for v in values if isinstance(v, ast.Name)}
    return frozenset(handed)


TIE = 160  # where its findings tie: the verdict table's order (rules._families)
RULES = (autograd_in_inference,)
