"""A Jacobian of the whole batch read only on its batch diagonal: the per-sample one was meant.

An input-gradient penalty (R1, a Jacobian norm, a score's divergence) written as
``jacrev(f)(x).diagonal(dim1=0, dim2=1)`` differentiates each of f's B outputs against all B
inputs: B backward passes (vmapped) where one gives each sample's own gradient, and the step's
backward then runs back through all B of them. Unseen round 22 (jacrev_batch_penalty: an energy
MLP, batch 64): the Jacobian's line held 17% of the sampled step and ``loss.backward()`` 76%; no
finding named it. By hand ``torch.autograd.grad(energy(x).sum(), x, create_graph=True)[0]`` (the
same values) was 12.0x of the loop (medians of 3 pairs).

Flagged from the cell's text (cell/jacobian_diag): the Jacobian's call in the step, of a name the
batch reaches, read on its batch diagonal. The range: its least, the Jacobian line's sampled share
(Wilson's interval, 95%) times ``LEAST_SAVED``: the part of B backward passes one saves at B = 2
with a backward half a forward's cost (the line keeps f's forward and one backward); its most,
the Jacobian's line and the step's backward lines together (the backward runs back through the
B passes; what the fix leaves of both is left in: an upper bound), or where it reads more, the
step's forward and backward phases of the trace (the Jacobian's B passes run on autograd's
engine, in the backward phase: the sampler under a busy machine read the backward's line at 52%
where the trace's phase read 88%, and the by-hand 12.0x is a 92% cut). No patch: that the blocks off
the diagonal are zero (f treats the samples apart: no batch norm, no mean over the batch) is the
model's, which the text does not show; the advice names both rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.jacobian_diag import batch_jacobians, step_backwards
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.common import share as phase_share
from gpu_notebook.rules.restacked_bank import _share_high
from gpu_notebook.rules.syncs import lines_share

# The least share of the Jacobian's line the per-sample form removes: with B samples the line
# runs f's forward once and B backward passes, the fix one; at B = 2 and a backward half the
# forward's cost that is (B - 1) * 0.5 / (1 + B * 0.5) = 1/4 of it (B = 64: 0.94).
LEAST_SAVED = 0.25


@dataclass(frozen=True)
class BatchJacobianRead(Said):
    """A step computes the Jacobian of its whole batch on ``line`` and keeps its diagonal."""

    line: int
    text: str
    transform: str  # "jacrev", "jacfwd", "jacobian"
    function: str
    inputs: str
    read_line: int
    read_text: str
    how: str  # "diagonal", "einsum", "index"
    share: float | None  # the Jacobian line's sampled share (None: not sampled enough)
    backward: float | None  # the step's backward lines' sampled share
    model_work: float | None  # the traced forward and backward phases' share
    low: float | None
    bound: float | None


def batch_jacobian_diagonal(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step takes a Jacobian of its whole batch and reads its batch diagonal."""
    tree = facts.tree
    hits = batch_jacobians(tree) if tree is not None else []
    if tree is None or not hits:
        return None
    hit = hits[0]
    line = tree.line_of(hit.node)
    share = lines_share(analysis, (tree.source_line(hit.node, "jacobian"),))
    backwards = tuple(tree.source_line(c, "backward") for c in step_backwards(tree, hit))
    backward = lines_share(analysis, backwards) if backwards else None
    samples = analysis.stacks.samples if analysis.stacks is not None else 0
    low_share = (
        sampled_share_low(share, samples) * LEAST_SAVED if share is not None and samples else None
    )
    whole = (share or 0.0) + (backward or 0.0) if share is not None else None
    high = _share_high(whole, samples) if whole is not None and samples else None
    model = _model_work(analysis)
    if model is not None and (high is None or model > high):
        high = model
    low, bound = gain_range(low_share, high, analysis)
    said = BatchJacobianRead(
        line, tree.text_of(hit.node), hit.transform, hit.function, hit.inputs,
        tree.line_of(hit.read), tree.text_of(hit.read), hit.how, share, backward, model, low, bound,
    )  # fmt: skip
    severity = severity_of(whole, low=0.0) or "low"
    return found("autograd.batch_jacobian", severity, said, phase_share=high, bound=bound,
                 low=low, line=line)  # fmt: skip


def _model_work(analysis: Analysis) -> float | None:
    """The step's forward and backward phases together (the traced split): the Jacobian's
    forward and its B passes run in them (the engine's passes are the backward's), so the most
    it can be; None: neither measured."""
    parts = [phase_share(analysis, phase) for phase in ("forward", "backward")]
    known = [p for p in parts if p is not None]
    return min(1.0, sum(known)) if known else None


RULES = (batch_jacobian_diagonal,)
