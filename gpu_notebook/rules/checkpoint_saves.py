"""A checkpoint written on every step: ``torch.save`` (or ``save_pretrained``, ``np.save``...)
inside the step loop with no ``if`` around it.

Each save serialises the whole state (an Adam optimizer's two moments included) and writes it,
work no change to the model shortens (torch.compile, a bigger batch, a GPU). Measured as the
per-step logs are (rules/step_logging.per_step_logging): from the save lines' own sampled time
(low end) to the step's host time outside the model and the optimizer (high end, which holds
other host work too), removed but one save in ``EVERY``. Thresholds: TraceML's residual levels
(warn 10%, critical 20%). Seen (unseen round 8, save_every_step): the save read as the forward
and as "Python between operators", and torch.compile was offered for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.records import Analysis, Finding, PhaseBreakdown, Run, Said
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    found,
    gain_range,
    severity_in,
    shares_sum,
)
from gpu_notebook.rules.syncs import EVERY, every_n, lines_share, loop_lines


@dataclass(frozen=True)
class SavesEveryStep(Said):
    lines: tuple[SourceLine, ...]  # checkpoint saves on every step
    phases: PhaseBreakdown | None
    residual: float | None  # host time outside the model and the optimizer
    own: float | None  # the save lines' own sampled time
    low: float | None
    bound: float | None


def saves_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Checkpoint writes on every step of the training loop."""
    lines = loop_lines(facts, facts.saves)
    if not lines:
        return None
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    own = lines_share(analysis, lines)
    least = every_n(min(own, residual)) if own is not None and residual is not None else None
    low, bound = gain_range(least, every_n(residual), analysis)
    said = SavesEveryStep(lines, analysis.phases, residual, own, low, bound)
    if bound is None:
        # Nothing measured the host time that holds the saves: said, not offered.
        return found("checkpoint.every_step", "info", said, line=lines[0].line)
    severity = severity_in(analysis, RESIDUAL_PHASES, residual, low=0.0) or "low"
    return found("checkpoint.every_step", severity, said,
                 phase_share=every_n(residual), bound=bound, line=lines[0].line,
                 fix_id="log_every_n", fix_params={"every": EVERY}, low=low)  # fmt: skip


RULES = (saves_every_step,)
