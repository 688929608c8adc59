"""Shape rule: the model's input shape changes from step to step (best-effort).

What is measured: the step clock records the samples of each step's DataLoader batches
(``StepTiming.batch_size``; no hook of ours sits on modules, so a loop over in-memory tensors
gives none); the trace has no shapes (``record_shapes`` is off: it costs
~20%). So only batch-size changes are seen, not sequence lengths or image sizes: best-effort,
and the evidence says so. A last, smaller batch of an epoch is normal and ignored (at most two
distinct sizes).

Why it matters: with ``cudnn.benchmark`` each new shape is re-tuned, ``torch.compile``
recompiles (up to its recompile limit, 8 by default), and caching allocators fragment; in eager
mode on a CPU it costs little. Severity follows that: medium where a GPU or torch.compile is in
play, low otherwise. No gain bound: the per-shape cost is not separated in the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, has_gpu, uses_compile

CHANGE_SHARE = 0.5  # the shape changes on at least half of the steps
MIN_DISTINCT = 3  # a smaller last batch gives two sizes; three or more is a pattern


@dataclass(frozen=True)
class ShapesChange(Said):
    change: float  # share of the steps whose batch size differs from the step before
    steps: int
    sizes: tuple[int, ...]  # the distinct sizes, sorted
    spread: float | None  # step time p90 / median
    compiled: bool
    benchmark: bool  # cudnn.benchmark on
    gpu: bool


def batch_sizes(run: Run) -> list[int]:
    """Leading dimension of the model's first input per timed step (the lean clock stops reading it)."""
    return [s.batch_size for s in run.steps.steps if s.timed and s.batch_size is not None]


def changing_shapes(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    sizes = batch_sizes(run)
    if len(sizes) < 4:
        return None
    distinct = sorted(set(sizes))
    changes = sum(1 for a, b in pairwise(sizes) if a != b)
    change_share = changes / (len(sizes) - 1)
    if len(distinct) < MIN_DISTINCT or change_share < CHANGE_SHARE:
        return None
    compiled = uses_compile(facts)
    benchmark = facts.cudnn_benchmark or facts.live.cudnn_benchmark
    st = analysis.step_stats
    spread = st.p90_s / st.median_s if st.median_s and st.p90_s else None
    said = ShapesChange(change_share, len(sizes), tuple(distinct), spread, compiled,
                        bool(benchmark), has_gpu(run))  # fmt: skip
    return found("shapes.changing", "medium" if compiled or has_gpu(run) else "low", said)


TIE = 140  # where its findings tie: the verdict table's order (rules._families)
RULES = (changing_shapes,)
