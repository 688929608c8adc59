"""A checkpoint written on every step: ``torch.save`` (or ``save_pretrained``, ``np.save``...)
inside the step loop with no ``if`` around it.

Each save serialises the whole state (an Adam optimizer's two moments included) and writes it,
work no change to the model shortens (torch.compile, a bigger batch, a GPU). Measured as the
per-step logs are (rules/step_logging.every_step_lines). Thresholds: TraceML's residual levels
(warn 10%, critical 20%). Seen (unseen round 8, save_every_step): the save read as the forward

and as "Python between operators", and torch.compile was offered for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import EveryStepLines
from gpu_notebook.rules.step_logging import every_step_lines
from gpu_notebook.rules.syncs import loop_lines


@dataclass(frozen=True)
class SavesEveryStep(EveryStepLines):
    """Checkpoint saves on every step (``lines``; ``own``: their own sampled time)."""


def saves_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Checkpoint writes on every step of the training loop."""
    return every_step_lines(
        "checkpoint.every_step", SavesEveryStep, loop_lines(facts, facts.saves), analysis
    )


RULES = (saves_every_step,)
