"""Gradient clipping on every micro-batch of a gradient accumulation: ``clip_grad_norm_`` after
each ``loss.backward()`` while the optimizer steps every N-th batch (``if (i + 1) % ACCUM == 0:
opt.step()``), or inside the micro-batch loop while the step is after it.

Each clip but the last of an optimizer step clips a partial sum of the gradients: the update
then follows neither the clipped full gradient (the recipe) nor the unclipped one, and N - 1 of
the N clips (a norm over every parameter, then a scaling of each) are work thrown away. HF
Accelerate and the HF Trainer clip once, where the accumulation ends (``sync_gradients``).
Flagged where the cell's source has the clip ungated in the loop that runs the backward and the
optimizer step gated in it (or outside it, in the loop around it) AND the step clock counted
more backward passes than optimizer steps in its timed steps (the run accumulated: an ``if use_amp:
scaler.step(opt) else: opt.step()`` steps every batch, and reads nothing here). Low: a matter of
what the training computes more than of time (unseen round 17's accum_bf16_clip_micro: clipping
once an optimizer step measured 1.06x by hand). No bound: the clips' time is not set apart in
a trace (norms and multiplies like the model's), so ``--try-fixes`` measures the fix.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted, method_of, receiver_of
from gpu_notebook.cell.setup import optimizers
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import CLIP_FUNCTIONS, last
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found

ACCUMULATES = 1.5  # backward passes per optimizer step from which the run accumulated


@dataclass(frozen=True)
class ClipPerMicroBatch(Said):
    clip: SourceLine  # the clip that runs on every micro-batch
    step: SourceLine  # the optimizer step it should sit before
    backward: int  # backward passes the step clock counted in its timed steps
    optimizer: int  # those steps (one optimizer step each)


def optimizer_steps(tree: CellTree) -> list[ast.Call]:
    """``opt.step()`` of the cell's optimizers, and ``scaler.step(opt)`` handed one."""
    names = {o.name for o in optimizers(tree) if o.name}
    out = []
    for call in tree.calls():
        if method_of(call) != "step":
            continue
        receiver = dotted(receiver_of(call)) or ""
        handed = [dotted(a) for a in call.args]
        if (
            receiver in names
            or any(h in names for h in handed)
            or last(receiver) in ("opt", "optimizer")
        ):
            out.append(call)
    return out


def clips_per_micro_batch(tree: CellTree) -> list[tuple[ast.Call, ast.Call]]:
    """Each ungated clip of a loop that runs the backward, with the optimizer step that runs
    less often than it: gated in the same loop, or in the loop around it (the micro-batches'
    loop inside the steps')."""
    steps = optimizer_steps(tree)
    out = []
    for call in tree.calls():
        if last(dotted(call.func) or "") not in CLIP_FUNCTIONS:
            continue
        loop = tree.step_loop_of(call)
        if loop is None or not tree.inside(call, loop) or tree.gated(call, loop):
            continue
        outer = tree.enclosing_loop(loop)
        for step in steps:
            if tree.inside(step, loop):
                rarer = tree.gated(step, loop)
            else:
                rarer = outer is not None and tree.inside(step, outer)
            if rarer:
                out.append((call, step))
                break
    return out


def clip_per_micro_batch(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The cell clips every micro-batch's partial gradient while the run accumulated."""
    tree = facts.tree
    if tree is None:
        return None
    if run.steps.anchor != "optimizer":
        return None  # steps end elsewhere: a step's backward passes say nothing of accumulation
    # The timed steps' own counts (the clock stops timing the phases once it goes lean, and its
    # run-wide backward count with it): each such step is one optimizer step.
    timed = [s for s in run.steps.steps if s.timed]
    backward, optimizer = sum(s.backward_calls for s in timed), len(timed)
    if optimizer <= 0 or backward < ACCUMULATES * optimizer:
        return None
    hits = clips_per_micro_batch(tree)
    if not hits:
        return None
    clip, step = hits[0]
    said = ClipPerMicroBatch(
        tree.source_line(clip, "clip"), tree.source_line(step, "optimizer"), backward, optimizer
    )
    return found("grads.clip_per_micro_batch", "low", said, line=said.clip.cell_line)


RULES = (clip_per_micro_batch,)
