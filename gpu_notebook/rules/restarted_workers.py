"""A DataLoader built once, with workers and without ``persistent_workers``, iterated again every
epoch: each new pass forks its worker processes again and its first batches wait for them.

The rule, its message record and its fix in one place; its wording is
``words/restarted_workers.py`` and its test ``tests/test_restarted_workers_u21b.py``.

Seen (unseen round 21, lightning_workers_nonpersistent): Lightning's ``train_dataloader``
returns ``DataLoader(..., num_workers=2)`` and the Trainer iterates that one loader once per
epoch (``limit_train_batches=6``, 20 epochs); the tool said "Every 6 steps a step stalls" with
no cause and no fix (``input.remade_loader`` speaks only for a loader the cell makes anew in its
epoch loop, where ``persistent_workers`` would not help). The same shape without a framework:
``loader = DataLoader(ds, num_workers=2)`` above ``for epoch in range(n): for x, y in loader``.
Here the loader is the same object each epoch, so ``persistent_workers=True`` on it keeps its
workers (torch: "the data loader will not shut down the worker processes after a dataset has
been consumed once"); for HF's Trainer the knob is ``dataloader_persistent_workers=True``.

Evidence and bound: the step clock's loader starts (an iterator's first batch) with each
start's burst over the steady steps after it (``analysis.loader_starts.start_up_bursts``, the
reading ``input.remade_loader`` uses): the range is Amdahl over the bursts' share interval, read
on the wall and with each step less its wait for a core, the clock a trial compares this fix on
(it keeps the process count): a loaded machine's steady steps wait for a core where a restart
sleeps on its workers, and the wall's reading alone fell short (5.97x top, 7.61x measured).
Silent where the cell remakes the loader itself (``input.remade_loader``'s), where the loader's
``persistent_workers`` is on, with no workers, or with fewer than two starts read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity, StartUpBursts
from gpu_notebook.rules.common import WARN, found, gain_range, loader_in_use

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement


@dataclass(frozen=True)
class RestartedWorkers(Said):
    """One loader's worker processes started again at every pass over it."""

    line: int | None  # the cell's DataLoader(...) line (None: the loader is not built here)
    workers: int
    starts: int  # passes read, each with steady steps after its burst
    bursts: StartUpBursts
    hf: bool  # an HF Trainer builds the loader: its knob is dataloader_persistent_workers
    bound: float | None
    low: float | None


def _workers(run: Run, facts: SourceFacts) -> tuple[int, int | None, bool] | None:
    """(workers, the cell's loader line, HF's Trainer) of the loader the steps read; None: no
    workers, or a loader whose workers persist already."""
    loader = loader_in_use(facts)
    if loader.setting("persistent_workers") is True:
        return None
    workers = loader.setting("num_workers") if loader.known else None
    if not isinstance(workers, int) or isinstance(workers, bool):
        workers = run.steps.loader_num_workers
    if not workers:
        return None
    hf = not loader.known and bool(facts.training_arguments)
    return workers, loader.line, hf


def _reloaded(facts: SourceFacts) -> bool:
    """The cell asks Lightning for a new loader every N epochs
    (``reload_dataloaders_every_n_epochs``): each is a new object, whose workers do not outlive
    it whatever ``persistent_workers`` says."""
    from gpu_notebook.cell.names import keyword_of, literal_of

    tree = facts.tree
    if tree is None:
        return False
    for call in tree.calls():
        given = keyword_of(call, "reload_dataloaders_every_n_epochs")
        if given is not None and literal_of(given.value) != 0:
            return True
    return False


def restarted_workers(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    from gpu_notebook.analysis.loader_starts import start_up_bursts
    from gpu_notebook.rules.input_pipeline import _remade_with_workers

    if _remade_with_workers(run, facts) is not None:
        return None  # a loader the cell makes anew: input.remade_loader's
    if _reloaded(facts):
        return None  # Lightning builds a new loader each epoch: persistent workers die with it
    read = _workers(run, facts)
    if read is None:
        return None
    workers, line, hf = read
    bursts = start_up_bursts(run.steps, run.window.warmup_steps, workers)
    if bursts is None or bursts.share <= 0:
        return None
    low, bound = gain_range(bursts.share_low, bursts.share_high, analysis)
    least = bursts.share_low
    severity: Severity = "high" if least >= 0.20 else "medium" if least >= WARN else "low"
    said = RestartedWorkers(line, workers, bursts.starts, bursts, hf, bound, low)
    return found("input.restarted_workers", severity, said, phase_share=bursts.share,
                 bound=bound, line=line, fix=FIX, low=low, bound_low=low)  # fmt: skip


def keep_workers(module: cst.Module) -> CodemodResult:
    """``persistent_workers=True`` on each DataLoader(...) of the cell with a literal worker
    count above 0; in a cell without one, ``dataloader_persistent_workers=True`` on HF's
    ``TrainingArguments(...)`` with ``dataloader_num_workers`` above 0."""
    import libcst as cst

    from gpu_notebook.cell.words import last
    from gpu_notebook.fixes.cst_tools import Declined, Edited, replace_nodes

    edits: dict[cst.CSTNode, Replacement] = {}

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            name = last(_dotted(node.func))
            key, kept = (
                ("num_workers", "persistent_workers")
                if name == "DataLoader"
                else ("dataloader_num_workers", "dataloader_persistent_workers")
                if name == "TrainingArguments"
                else (None, None)
            )
            if key is None or kept is None:
                return
            count = next((a.value for a in node.args if a.keyword and a.keyword.value == key), None)
            if not isinstance(count, cst.Integer) or int(count.evaluated_value) <= 0:
                return
            set_to = next(
                (a.value for a in node.args if a.keyword and a.keyword.value == kept), None
            )
            if isinstance(set_to, cst.Name) and set_to.value == "True":
                return
            edits[node] = _keeping(kept)

    module.visit(_Calls())
    if not edits:
        return Declined(
            "no DataLoader(...) with a literal num_workers above 0 in this cell: pass "
            "persistent_workers=True where the loader is built"
        )
    return Edited(replace_nodes(module, edits), "persistent_workers=True")


def _keeping(keyword: str) -> Replacement:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    def apply(call: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(call, cst.Call)
        return set_keyword(call, keyword, cst.Name("True"))

    return apply


def _dotted(node: cst.BaseExpression) -> str:
    import libcst as cst

    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


FIX = Fix(
    "keep_loader_workers",
    "Keep the loader's workers between epochs",
    (
        "The same DataLoader is iterated every epoch, and without persistent_workers each pass "
        "starts its worker processes again.",
        "persistent_workers=True keeps them: they start once, and each epoch's first batches "
        "no longer wait for a fork.",
    ),
    "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
    keep_workers,
)

RULES = (restarted_workers,)
