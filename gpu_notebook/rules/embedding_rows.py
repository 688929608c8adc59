"""A large embedding table updated whole every step though a batch touches few of its rows.

An ``nn.Embedding``/``nn.EmbeddingBag`` with ``sparse=False`` (torch's default) gets a gradient
the size of the table every step (zeros but the batch's rows), and a dense optimizer with
per-row state (Adam's moments, RMSprop's and Adagrad's accumulators, SGD's momentum or weight
decay) reads and writes every row of the table and of its state: several passes over the table
for the few hundred rows a batch touched (unseen round 20's bigtable_dense_adam, a 200,000-row
table under Adam: 99% of the step in the table's update; ``sparse=True`` with
``torch.optim.SparseAdam`` for the table and Adam for the rest, 29x-35x by hand). Read from the
live objects (``cell.embedding_tables``): the cell's named models and optimizers.

Flagged where such a table has ``MIN_ROWS`` rows or more, holds ``MIN_PART`` of its optimizer's
elements or more, and the optimizer phase (the run's, ``run_optimizer``) times that part reaches
the lowest level (5% of the step). Not flagged: a table with ``sparse=True``, one not stepped
(frozen, or in no optimizer), one under an optimizer of unknown maths (a user's, LBFGS), and a
weight tied to another module (an LM head: its gradient is dense over every row, no sparse
gradient can stand in). The batch's row count is not read: a small vocabulary with long
sequences touches most rows a batch, which ``MIN_ROWS`` stands for.

The bound: the high end removes the tables' part of the optimizer phase whole, at its interval's
high end, and the backward with it (where the table's dense gradient is made: a fill of the
whole table, then the batch's rows; the backward's other work is counted too, a ceiling: the
two are not timed apart), under what every other phase keeps; the low end removes ``LOW_REMOVED`` of the tables' update at its
interval's low end (the sparse update still reads and writes the touched rows, coalesces the
gradient, and the rest of the update stays). bigtable_dense_adam: update 72%, backward 27%; by
hand 29x-35x. Plain SGD and Adagrad without weight decay take sparse gradients and leave zero
rows as they are: ``sparse=True`` alone is the same update (by hand, a 200,000 x 32 table alone
under plain SGD: 7.7 ms a step dense, 0.34 ms sparse). No patch: for the others the fix splits
the optimizer in two (the tables' parameters to ``SparseAdam``, the rest to the dense one), a
change of recipe: SparseAdam updates only the touched rows' moments (lazy Adam), not dense Adam's
decay of every row's, and takes no weight decay.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.embedding_tables import DenseTable
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import (
    found,
    gain_range,
    has_gpu,
    level_in,
    run_optimizer,
    share,
    share_range,
    shares_sum,
)

MIN_ROWS = 50_000  # a vocabulary past what a batch's tokens cover (30k-vocab LMs stay out)
MIN_PART = 0.25  # of its optimizer's elements: the tables are much of what the update moves
LOW_REMOVED = 0.5  # the part of the tables' update the low end takes away
FLOOR = 0.01  # the least of the step that stays (a 100x ceiling where nothing else was timed)
KEPT_PHASES = ("data", "copy", "forward", "sync", "other", "unattributed")


@dataclass(frozen=True)
class DenseTableUpdate(Said):
    """Embedding tables stepped whole every step by a dense optimizer with per-row state."""

    optimizer: str  # the first such optimizer's name in the cell ("opt")
    optimizer_class: str  # its class ("Adam")
    tables: tuple[DenseTable, ...]
    part: float  # the tables' part of the optimizer phase (numel, or the split's and numel)
    update: float  # the optimizer phase's share of the step (the run's where timed)
    backward: float | None  # the backward's share, the high end's (None: not measured)
    weight_decay: bool  # a table's group has weight decay (SparseAdam takes none)
    gpu: bool

    @property
    def same_maths(self) -> bool:
        """Every table's optimizer leaves its zero rows as they are and takes sparse gradients
        (plain SGD, Adagrad without weight decay): ``sparse=True`` alone, the same update."""
        return not any(t.row_state for t in self.tables)


def dense_table_update(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A large dense embedding table a stateful optimizer updates whole every step."""
    optimizers = [o for o in facts.live.optimizers if o.numel > 0]
    total = sum(o.numel for o in optimizers)
    whole = run_optimizer(analysis)
    update = whole.share if whole is not None else share(analysis, "optimizer")
    split = analysis.optimizers
    part = 0.0
    hits: list[tuple[str, str, DenseTable]] = []
    for o in optimizers:
        tables = [t for t in o.tables if not t.tied and t.rows >= MIN_ROWS]
        held = sum(t.numel for t in tables) / o.numel
        if held < MIN_PART:
            continue
        # The optimizer's part of the phase: the trace's or the clock's split by class where
        # one was read (one class of several), else its elements over all the optimizers'.
        own = split.step_part((o.type_name,)) if split is not None else None
        if own is None:
            own = o.numel / total
        part += own * held
        # Named as the cell makes it where one of its names is (not a loop's ``o``).
        made = {c.name for c in facts.optimizers}
        name = next((n for n in (o.name, *o.aliases) if n in made), o.name)
        hits += [(name, o.type_name, t) for t in tables]
    if not hits or update is None:
        return None
    part = min(1.0, part)
    level = level_in(analysis, "optimizer", update, part=part)
    if level is None:
        return None
    span = share_range(analysis, "optimizer") or (update, update)
    # The table's dense gradient (a fill of the whole table, then the batch's rows added) is
    # made in the backward, which sparse=True shrinks too: the high end counts the backward
    # whole (its other work too: a ceiling, not timed apart); the forward always stays.
    backward = share(analysis, "backward")
    removed = span[1] * part + (backward or 0.0)
    # Every other phase of the step stays (the forward, the data, the host's own work).
    rest = shares_sum(analysis, KEPT_PHASES) or 0.0
    removed = min(removed, 1.0 - max(rest, FLOOR))
    low, high = gain_range(span[0] * part * LOW_REMOVED, removed, analysis, host_side=False)
    stepped = tuple(t for _, _, t in hits)
    said = DenseTableUpdate(
        hits[0][0], hits[0][1], stepped, part, update, share(analysis, "backward"),
        any(t.weight_decay for t in stepped), has_gpu(run),
    )  # fmt: skip
    return found("embedding_rows.dense_table", level, said, phase_share=update * part,
                 bound=high, low=low)  # fmt: skip


RULES = (dense_table_update,)
