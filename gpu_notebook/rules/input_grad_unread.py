"""A tensor made to require grad every step whose gradient is read on only some steps, or never.

The saliency map, input-gradient norm or attribution logged every N steps: the batch is made to
require grad before every forward (``x.requires_grad_(True)``) and its ``.grad`` read under
``if step % N == 0``, so every backward computes and accumulates the input's gradient for the
steps that never read it (cell.input_grad_unread reads the cell; unseen round 23's
input_grad_saliency: 1.36x by hand). Named at the switch's line; the advice sets the switch to
the reads' own test (``x.requires_grad_(step % N == 0)``), or drops it where nothing reads it.

Bound: the input's gradient is computed in the backward and timed with it, not apart (through
a first ``Linear`` it is one product as large as the weight's gradient, the whole chain where
the layers before are frozen), so the backward's share is its ceiling: ``low`` severity up to
that Amdahl bound where the backward was timed, ``info`` with no bound where it was not. A
trace's input-gradient call under the first layer's backward node would bound it closer (open).
No patch: the gate's step counter may be bumped between the switch and the read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.input_grad_unread import unread_input_grads
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import found, gain_bound, share


@dataclass(frozen=True)
class InputGradUnread(Said):
    """``name`` is made to require grad on ``line`` every step; its gradient is read on
    ``reads`` (lines, each behind an ``if``; empty: never read), ``gate`` the reads' periodic
    test as written (None: none); ``backward`` the backward's share of the step."""

    line: int
    name: str
    text: str
    reads: tuple[int, ...]
    gate: str | None
    backward: float | None
    bound: float | None


def input_grad_unread(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step asks autograd for an input's gradient it reads on only some steps."""
    tree = facts.tree
    hits = unread_input_grads(tree) if tree is not None else []
    if tree is None or not hits or not tree.in_cell(hits[0].switch):
        return None
    hit = hits[0]
    line = tree.line_of(hit.switch)
    reads = tuple(sorted({tree.line_of(r) for r in hit.reads}))
    gate = ast.unparse(hit.gate) if hit.gate is not None else None
    backward = share(analysis, "backward")
    bound = gain_bound(backward, analysis, host_side=False) if backward else None
    said = InputGradUnread(line, hit.name, tree.text_of(hit.switch), reads, gate, backward, bound)
    severity: Severity = "low" if bound is not None else "info"
    return found("autograd.input_grad_unread", severity, said, phase_share=backward,
                 bound=bound, line=line)  # fmt: skip


RULES = (input_grad_unread,)
