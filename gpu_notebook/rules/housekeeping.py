"""Whole-process housekeeping on every step: ``gc.collect()`` or ``torch.cuda.empty_cache()``
inside the step loop with no ``if`` around it (``cell.words.COLLECT_CALLS``).

Users put them in a step "to free memory" after an out-of-memory scare. A full collection walks
every Python object the process holds (hundreds of thousands once torch is imported: tens of ms
on any machine), and a cache emptied every step is refilled by the next step's allocations
(cudaFree and cudaMalloc, each a device sync). Neither frees what the next step needs, and no
change to the model (torch.compile, a bigger batch, a faster device) shortens them. Measured and
gated as the per-step saves are (rules/step_logging.every_step_lines). Seen (unseen round 19,
gc_collect_every_step): the collection 99% of the hot lines' samples, read as "Python and
per-operator overhead" with a bigger batch and torch.compile offered, no finding naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import EveryStepLines
from gpu_notebook.rules.step_logging import every_step_lines
from gpu_notebook.rules.syncs import loop_lines


@dataclass(frozen=True)
class CollectsEveryStep(EveryStepLines):
    """Garbage collections or allocator cache flushes on every step (``lines``; ``own``: their
    own sampled time). ``gc``: one at least is ``gc.collect()`` (the others empty a cache)."""

    gc: bool = False


def collects_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """gc.collect() / torch.cuda.empty_cache() on every step of the training loop."""
    lines = loop_lines(facts, facts.collects)
    gc = any("gc.collect" in line.text for line in lines)
    return every_step_lines("housekeeping.every_step", CollectsEveryStep, lines, analysis, gc=gc)


RULES = (collects_every_step,)
