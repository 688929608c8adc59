"""A frozen model's forward every step: a no_grad block inside the step loop whose outputs the
loss reads and that calls a model (a distillation teacher's targets, a frozen feature
extractor, a target network).

Measured: autograd numbers no operator under no_grad, so that forward lies outside the inferred
forward and the optimizer, in "other" (analysis/phases). Its share of the step is what caching
the model's outputs would remove (when its inputs repeat: no random augmentation) and what
cheaper inference (bf16, a compiled graph without autograd) shortens. Thresholds: TraceML's
residual levels (warn 10%, critical 20%); no patch: whether the inputs repeat is the user's call.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.records import Analysis, Finding, PhaseBreakdown, Run, Said
from gpu_notebook.rules.common import WARN, found, gain_bound, level_of, share
from gpu_notebook.rules.syncs import loop_lines


@dataclass(frozen=True)
class FrozenForward(Said):
    lines: tuple[SourceLine, ...]  # the no_grad blocks that run a model for the loss
    phases: PhaseBreakdown | None
    other: float  # the step's share outside the model, the optimizer and the data wait
    bound: float | None  # that share removed (its outputs cached)


def frozen_forward(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A frozen model runs under no_grad every step and its time is a large part of the step."""
    lines = loop_lines(facts, facts.frozen_forwards)
    phases = analysis.phases
    if not lines or phases is None or phases.source != "trace":
        return None  # hook timings put that forward into "forward": nothing tells it apart
    other = share(analysis, "other")
    severity = level_of(analysis, other, low=WARN)
    if other is None or severity is None:
        return None
    bound = gain_bound(other, analysis)
    said = FrozenForward(lines, phases, other, bound)
    return found("frozen_forward.every_step", severity, said, phase_share=other, bound=bound,
                 line=lines[0].line)  # fmt: skip


RULES = (frozen_forward,)
