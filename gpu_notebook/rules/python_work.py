"""The loop body's own work outside the model, named at its lines: tokenising strings, a numpy
or PIL augmentation, hand padding before the model; an EMA's update after the optimizer's.

Measured by the trace's clock on every traced step (analysis.python_work: host time before the
step's first model operator that no model, optimizer or data range covers), and put on the
statements of the step loop's body that run there: those before the first statement that calls
the model or backward, and those after the last optimizer step. Lines another rule owns
(logging, saves, collections, copies, validation) are left to it. The stack sampler's share of
the lines, where it caught them, is said beside: a handful of samples cannot
name lines (unseen round 19: 7 samples, none on the tokenising lines that held 36% of the
loop). Neither a bigger batch nor torch.compile shortens this work, nor a GPU: moving it off
the loop thread (a Dataset / collate_fn with DataLoader workers) or doing it less often does.

Where the loop is a framework's (Lightning's ``fit``, the HF Trainer's ``train``), the same work
lives in the methods it calls every step (cell.framework_step_methods: ``training_step``,
``compute_loss``, a Callback's ``on_train_batch_end``, a TrainerCallback's ``on_step_end``):
named there, its share the sampler's time on the user's lines (the framework's own per-step
work shares the stretch and is never the user's), the stretch's quartiles its range.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.framework_step_methods import StepMethodWork, step_method_work
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import SUGGEST, found, gain_range, severity_of, shares_sum
from gpu_notebook.rules.syncs import EVERY, every_n, lines_share

# Constructors of averaged copies whose per-step ``update_parameters`` / ``update`` is an EMA
# (torch's swa_utils, timm, ema_pytorch).
EMA_CLASSES = frozenset({"AveragedModel", "ModelEma", "ModelEmaV2", "ModelEmaV3", "EMA"})
_EMA_METHODS = frozenset({"update_parameters", "update"})
_BOOKKEEPING = frozenset({"to", "cuda", "zero_grad", "step", "train", "eval", "set_to_none"})
_CHEAP = (ast.Delete, ast.Pass, ast.Continue, ast.Break)
_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)

Kind = Literal["input", "ema", "host"]


@dataclass(frozen=True)
class LoopBodyWork(Said):
    """The step loop body's own work outside the model (``lines``), ``share`` of the traced
    steps' time (``low``-``high``: the least and most one step read; ``steps`` of them);
    ``sampled``: the stack sampler's share of the lines (None: not caught often enough);
    ``kind``: "input" (before the model: work on the batch), "ema" (an averaged model's
    update), "host" (other work after the update)."""

    lines: tuple[SourceLine, ...]
    kind: Kind
    share: float
    low: float
    high: float
    steps: int
    sampled: float | None
    gain_low: float | None
    bound: float | None
    # Other work shares the lines' stretch of the step: ``share`` is the sampler's time on them.
    shared: bool = False
    # Of lines in a method a framework calls every step (cell.framework_step_methods): its
    # qualified name (``Lit.training_step``) and the framework ("lightning", "transformers").
    method: str | None = None
    framework: str | None = None


def _calls(node: ast.AST) -> list[ast.Call]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call)]


def _callee(call: ast.Call) -> tuple[str | None, str | None]:
    """(object name, attribute) of ``obj.attr(...)``, (name, None) of ``name(...)``."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, None
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        return owner, func.attr
    return None, None


def _is_model(stmt: ast.AST, models: frozenset[str]) -> bool:
    for call in _calls(stmt):
        name, attr = _callee(call)
        if attr is None and name in models:
            return True
        if attr in ("backward", "forward") or (attr is None and name == "backward"):
            return True
    return False


def _is_update(stmt: ast.AST, optimizers: frozenset[str]) -> bool:
    return any(_callee(c) == (name, "step") for c in _calls(stmt) for name in optimizers)


def _is_ema(stmt: ast.AST, facts: SourceFacts) -> bool:
    for call in _calls(stmt):
        name, attr = _callee(call)
        if attr == "update_parameters":
            return True
        if name is not None and attr in _EMA_METHODS and facts.constructor_of(name) in EMA_CLASSES:
            return True
    return False


def _housekeeping(stmt: ast.AST, optimizers: frozenset[str]) -> bool:
    """Every call of ``stmt`` is the loop's bookkeeping, timed as a phase of its own or next to
    nothing: an optimizer's method (``opt.zero_grad()``), ``model.train()``, a copy to the
    device, a scheduler's step. (An EMA's ``update_parameters`` is a live model's method.)"""
    calls = _calls(stmt)
    return bool(calls) and all(
        _callee(c)[0] in optimizers or _callee(c)[1] in _BOOKKEEPING for c in calls
    )


def _owned(facts: SourceFacts) -> frozenset[int]:
    """Lines other rules name as work of their own (logging, saves, copies...). Not reads of
    device values: a ``.numpy()`` before a numpy augmentation is the sync rule's wait on a GPU
    (painted "sync", outside this time) and this rule's host work around it."""
    groups = (facts.logging, facts.saves, facts.collects,
              facts.collectives, facts.state_copies, facts.redraws, facts.validation,
              facts.per_sample_loops, facts.blocking_copies, facts.inference_loops)  # fmt: skip
    return frozenset(s.line for group in groups for s in group)


Work = tuple[tuple[SourceLine, ...], Kind, bool, StepMethodWork | None]


def method_work(facts: SourceFacts) -> Work | None:
    """The user's statements outside the model in a method a framework calls every step
    (cell.framework_step_methods: a LightningModule's ``training_step``, a Callback's
    ``on_train_batch_end``, an HF Trainer's ``compute_loss``, a TrainerCallback's
    ``on_step_end``): the first such method, by the cell's order. Always shared: the framework's
    own per-step work (its hooks' dispatch, moving the batch) runs in the same stretch of the
    step, and is never the user's."""
    tree = facts.tree
    if tree is None:
        return None
    owned = _owned(facts) | frozenset(s.line for s in facts.syncs)
    for work in step_method_work(tree):
        lines = tuple(tree.source_line(s, "loop_work") for s in work.statements)
        lines = tuple(s for s in lines if s.line not in owned)
        if lines:
            return lines, work.kind, True, work
    return None


def body_work(facts: SourceFacts) -> tuple[tuple[SourceLine, ...], Kind, bool] | None:
    """The step loop's statements outside the model (see the module docstring), their kind, and
    whether other work shares their stretch of the step (a line another rule owns, a block);
    None where no innermost training loop shows a model call in its own body."""
    tree = facts.tree
    if tree is None:
        return None
    optimizers = frozenset(o.name for o in facts.optimizers if o.name)
    owned = _owned(facts)
    for loop in facts.training_loops():
        node = loop.node
        if not loop.innermost_training or not isinstance(node, ast.For | ast.While):
            continue
        body = node.body
        model = [i for i, s in enumerate(body) if _is_model(s, facts.model_names)]
        if not model:
            continue
        updates = [i for i, s in enumerate(body) if _is_update(s, optimizers)]
        last = max(updates + model)
        picked = [
            s
            for i, s in enumerate(body)
            if (i < model[0] or i > last)
            and isinstance(s, _SIMPLE)
            and not _housekeeping(s, optimizers)
            and any(
                isinstance(n, ast.Call | ast.ListComp | ast.DictComp | ast.GeneratorExp)
                for n in ast.walk(s)
            )
        ]
        # A read of device values made for its effect (``print(loss)``, ``log(x.item())``) is
        # the sync rule's: reading less often is its fix, and one line gets one finding. A read
        # whose value the loop goes on working with (``a = x.numpy()``) stays work here.
        reads = frozenset(s.line for s in facts.syncs)
        owned = owned | {tree.line_of(s) for s in body if isinstance(s, ast.Expr)} & reads
        lines = tuple(tree.source_line(s, "loop_work") for s in picked)
        lines = tuple(s for s in lines if s.line not in owned)
        if not lines:
            continue
        # Other work in the same stretch of the step (a line another rule owns, a block: an
        # `if`, a loop over the parameters) holds part of the measured time.
        region = [s for i, s in enumerate(body) if i < model[0] or i > last]
        shared = any(
            tree.line_of(s) in owned or not isinstance(s, (*_SIMPLE, *_CHEAP)) for s in region
        )
        if any(_is_ema(s.node, facts) for s in lines if s.node is not None):
            return lines, "ema", shared
        before = any(body.index(s) < model[0] for s in picked)
        return lines, "input" if before else "host", shared
    return None


def loop_body_work(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The loop body's own work outside the model takes a measured share of each step."""
    plain = body_work(facts)
    if plain is None:
        return _method_work(analysis, facts)
    measured = analysis.loop_python
    if measured is None or not measured.steps or measured.high_share < SUGGEST:
        return None
    lines, kind, shared = plain
    point, least, high = measured.share, measured.low_share, measured.high_share
    sampled = lines_share(analysis, lines)
    if shared:
        # The measured time holds the other work too (unseen round 19's gc.collect() after
        # `history.append(float(loss))`: 99% of the step, none of it the append's): only the
        # sampler's time on these lines splits it, and without it nothing is said.
        if sampled is None or min(sampled, point) < SUGGEST:
            return None
        point = min(sampled, point)
        least, high = min(least, point), min(high, point)
    return _said(analysis, lines, kind, (point, least, high), measured.steps, sampled, shared)


def _method_work(analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The user's work in a method a framework calls every step (``method_work``). The
    framework's own per-step work (its hooks' dispatch, the batch's transfer) shares the traced
    stretch before the model: the point is the stack sampler's time on the user's lines (never
    a framework frame), at most the stretch's upper quartile; the range runs from the stretch's
    lower quartile (at most the point) to its upper one, which may hold the framework's own
    work too (said). Without the sampler's share nothing is said."""
    found_lines = method_work(facts)
    measured = analysis.loop_python
    if found_lines is None or measured is None or not measured.steps:
        return None
    lines, kind, _shared, method = found_lines
    sampled = lines_share(analysis, lines)
    if sampled is None or min(sampled, measured.high_share) < SUGGEST:
        return None
    point = min(sampled, measured.high_share)
    least, high = min(measured.low_share, point), max(point, measured.high_share)
    return _said(analysis, lines, kind, (point, least, high), measured.steps, sampled, True,
                 method)  # fmt: skip


def _said(
    analysis: Analysis,
    lines: tuple[SourceLine, ...],
    kind: Kind,
    shares: tuple[float, float, float],
    steps: int,
    sampled: float | None,
    shared: bool,
    method: StepMethodWork | None = None,
) -> Finding:
    point, least, high = shares
    # A step whose wait for a core ran long reads up to 100% "as if none of it fell here"; the
    # phase split's own time outside the model (its waits taken where the steps ran long)
    # holds this time and more: the high end is never above it, nor below the point.
    outside = shares_sum(analysis, ("other", "unattributed"))
    if outside is not None:
        high = max(point, min(high, outside))
    removed_low, removed_high = least, high
    if kind == "ema":
        # Updated every EVERY steps: the rest of the steps' update is what goes.
        removed_low, removed_high = every_n(removed_low) or 0.0, every_n(removed_high) or 0.0
    low, bound = gain_range(removed_low, removed_high, analysis)
    qualname, framework = (method.qualname, method.framework) if method else (None, None)
    said = LoopBodyWork(lines, kind, point, least, high, steps, sampled, low, bound, shared,
                        qualname, framework)  # fmt: skip
    severity = severity_of(least) or "low"
    return found("python_work.loop_body", severity, said, phase_share=point,
                 bound=bound, line=lines[0].line, low=low)  # fmt: skip


RULES = (loop_body_work,)
__all__ = ["EMA_CLASSES", "EVERY", "LoopBodyWork", "body_work", "loop_body_work", "method_work"]
