"""Blocks of the cell the run-wide rules point at: work done every N steps (``if i % N == 0:``)
and values kept with their autograd graph (``losses.append(loss)``).

Read from the facts' parse of the cell (``SourceFacts.tree``, its lines as the notebook numbers
them) by the run-shape rules, which match them to the stalls and the memory growth the step
clock measured.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpu_notebook.cell.facts import Origin
from gpu_notebook.cell.names import (
    dotted,
    has_backward,
    keyword_of,
    loss_names,
    method_of,
    targets_of,
)
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import KEEPING_METHODS, last

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

# What a periodic block does, by the names it calls (first match wins).
WORK_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a checkpoint save", re.compile(r"\b(save|save_checkpoint|save_pretrained|checkpoint)\b")),
    ("validation", re.compile(r"\b(eval|no_grad|inference_mode|validate|validation|evaluate)\b")),
    ("logging", re.compile(r"\b(print|log|log_dict|add_scalar|flush|write|info)\b")),
)


@dataclass(frozen=True)
class Periodic:
    line: int
    every: int  # 0: a modulus whose value the cell does not give (a config at run time)
    text: str
    work: str
    # A loop beside the step loop in the epoch loop (``epoch_blocks``): it runs once an
    # epoch, every epoch's length in steps (the loader's length: known at run time only).
    per_epoch: bool = False
    # In a function the cell calls (cell.calls): ``line`` is then the reading's.
    origin: Origin | None = None
    # A framework's keyword that sets the period (HF's ``eval_steps``): the work runs inside
    # the framework's loop, so it is changed there, not by a ``% N`` of the cell.
    setting: str | None = None


# HF TrainingArguments' work every N optimizer steps: (its strategy keywords, the keyword of N,
# the work). Said only where the cell asks for it (strategy "steps" given for the evaluation,
# save_steps given for the saves): a default of 500 steps would name work a short run never does.
_HF_PERIODIC = (
    (("eval_strategy", "evaluation_strategy"), "eval_steps", "validation"),
    (("save_strategy",), "save_steps", "a checkpoint save"),
)


def periodic_blocks(cell: CellTree | None, known: Iterable[tuple[str, int]] = ()) -> list[Periodic]:
    """``if <i> % N == 0:`` blocks inside loops, with what their body does; and the work an HF
    ``TrainingArguments(...)`` of the cell sets to run every N steps (``framework_blocks``).

    ``known``: ints the namespace binds before the cell ran (``LiveFacts.ints``): a period
    named by one (``% log_every`` with ``log_every = 16`` in an earlier cell) is that value,
    unless the reading binds the name itself (a parameter, an assignment: then it is its own)."""
    if cell is None:
        return []
    bound = _bound_names(cell.tree)
    constants = {name: value for name, value in known if name not in bound}
    constants.update(int_constants(cell.tree))
    found = framework_blocks(cell, constants)
    # An ``if`` in a loop in a loop (the batches' in the epochs') is walked from each: one block.
    seen: set[int] = set()
    for loop in (n for n in ast.walk(cell.tree) if isinstance(n, (ast.For, ast.While))):
        for node in ast.walk(loop):
            if not isinstance(node, ast.If) or id(node) in seen:
                continue
            seen.add(id(node))
            every = _modulus(node.test, constants)
            if every is None:
                continue
            work = _work(node.body)
            found.append(
                Periodic(
                    cell.line_of(node), every, cell.text_of(node), work, origin=cell.origin_of(node)
                )
            )
    return found


def framework_blocks(cell: CellTree, constants: dict[str, int]) -> list[Periodic]:
    """The evaluation and the saves an HF ``TrainingArguments(...)`` runs every N steps inside
    ``Trainer.train()``: ``eval_strategy="steps", eval_steps=10`` (N from ``logging_steps``
    where eval_steps is not given, as HF takes it), ``save_steps=200`` (unless
    ``save_strategy`` is "no" or "epoch"). Each at its keyword's line (unseen round 11: an
    evaluation every 10 steps, half the run, read as stalls with no cause named)."""
    found = []
    for call in cell.calls():
        if not last(dotted(call.func)).endswith("TrainingArguments") or not cell.in_cell(call):
            continue
        for strategies, key, work in _HF_PERIODIC:
            given = [k for k in call.keywords if k.arg in strategies]
            strategy = _strategy(given[0].value) if given else None
            if strategy in ("no", "epoch", "best") or (key == "eval_steps" and strategy != "steps"):
                continue
            steps = keyword_of(call, key)
            if steps is None and key == "eval_steps":
                steps = keyword_of(call, "logging_steps")
            if steps is None:
                continue
            every = _int_value(steps.value, constants)
            if every is None or every == 1:
                continue
            at = steps if keyword_of(call, key) is not None else given[0]
            found.append(
                Periodic(
                    cell.line_of(at), every, cell.text_of(at), work, origin=cell.origin_of(at),
                    setting=key,
                )
            )  # fmt: skip
    found.extend(_lightning_validation(cell, constants))
    found.extend(_profiler_cycles(cell, constants))
    return found


def _lightning_validation(cell: CellTree, constants: dict[str, int]) -> list[Periodic]:
    """A Lightning ``Trainer(val_check_interval=N)`` with N an int: a validation pass every N
    training batches inside ``trainer.fit`` (unseen round 14: every 20 of 80 batches, a third
    of the run, read as stalls with no cause named). Left out where the batches are not the
    optimizer steps the step clock counts (``accumulate_grad_batches`` given) and for a float
    (a share of the epoch, whose length is the loader's)."""
    found = []
    for call in cell.calls():
        if last(dotted(call.func)) != "Trainer" or not cell.in_cell(call):
            continue
        given = keyword_of(call, "val_check_interval")
        if given is None or keyword_of(call, "accumulate_grad_batches") is not None:
            continue
        every = _int_value(given.value, constants)
        if every is None or every == 1:
            continue
        found.append(
            Periodic(
                cell.line_of(given), every, cell.text_of(given), "validation",
                origin=cell.origin_of(given), setting="val_check_interval",
            )
        )  # fmt: skip
    return found


# The work of a torch.profiler schedule's cycle (``_profiler_cycles``); its ``setting``.
PROFILER_WORK = "the cell's own torch.profiler"
PROFILER_SETTING = "schedule"


def _profiler_cycles(cell: CellTree, constants: dict[str, int]) -> list[Periodic]:
    """A ``torch.profiler.schedule(wait=W, warmup=U, active=A, ...)`` of the cell: the profiler
    it drives (``prof.step()`` once a step) records A of every W+U+A steps with every operator,
    and at each cycle's end stops, gathers the cycle's events and hands them to its
    ``on_trace_ready``: that step stalls, every W+U+A steps while it runs (``skip_first`` shifts
    the cycles, ``repeat`` ends them). Unseen round 15: the cell's own profiler, every 8 steps,
    read "Every 8 steps a step stalls" with the advice to make checkpoints cheaper. A cycle
    whose parts the cell does not give (a config) has a period set at run time (0)."""
    found = []
    for call in cell.calls():
        if last(dotted(call.func)) != "schedule" or not cell.in_cell(call):
            continue
        parts = [keyword_of(call, key) for key in ("wait", "warmup", "active")]
        if parts[2] is None:
            continue  # not torch's (its wait, warmup and active are keyword-only, all required)
        values = [_count(p.value, constants) if p is not None else 0 for p in parts]
        every = 0 if None in values else sum(v or 0 for v in values)
        if every == 1:
            continue  # every step recorded: no step without it to stall against
        found.append(
            Periodic(
                cell.line_of(call), every, cell.text_of(call), PROFILER_WORK,
                origin=cell.origin_of(call), setting=PROFILER_SETTING,
            )
        )  # fmt: skip
    return found


def _count(node: ast.expr, constants: dict[str, int]) -> int | None:
    """An int literal of 0 or more, or a name the cell binds once to one; None otherwise."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int and node.value >= 0 else None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _strategy(node: ast.expr) -> str | None:
    """ "steps" for ``"steps"`` or ``IntervalStrategy.STEPS``; None when not read here."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower()
    if isinstance(node, ast.Attribute):
        return node.attr.lower()
    return None


def _int_value(node: ast.expr, constants: dict[str, int]) -> int | None:
    """An int literal, or a name the cell binds once to one (0: a name it does not: a config
    read at run time); None for anything else (a float is a share of the run's steps)."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int and node.value > 0 else None
    if isinstance(node, (ast.Name, ast.Attribute)):
        return constants.get(node.id, 0) if isinstance(node, ast.Name) else 0
    return None


def epoch_blocks(cell: CellTree | None) -> list[Periodic]:
    """Loops that do not train beside a step loop in the loop around it (``for x, y in val:``
    after ``for x, y in train:`` in ``for epoch in ...``): work once an epoch, with no
    ``if step % N`` block to name it. Each one's first line; its work by the names it calls,
    and validation when it only calls a model (a forward with no backward)."""
    if cell is None:
        return []
    found = []
    for step in (lp for lp in cell.loops if id(lp) in cell.step_loops):
        epoch = cell.enclosing_loop(step)
        if epoch is None:
            continue
        for loop in cell.loops:
            if loop is step or cell.trains[id(loop)] or cell.enclosing_loop(loop) is not epoch:
                continue
            work = _work(loop.body)
            if work == "work" and cell.model_calls(loop):
                work = "validation"
            found.append(
                Periodic(
                    cell.line_of(loop), 0, cell.text_of(loop), work, True, cell.origin_of(loop)
                )
            )
        found.extend(_epoch_forwards(cell, epoch, step))
    return found


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


def _epoch_forwards(cell: CellTree, epoch: ast.AST, step: ast.AST) -> list[Periodic]:
    """Statements of the epoch loop, beside its step loop and outside any loop, that run a
    model with no backward: one batch of a second loader scored once an epoch (``xb, yb =
    next(iter(val_loader)); val_loss = crit(model(xb), yb)``, unseen round 18: 17% of the run
    by hand, read as "every 16 steps a step stalls" with nothing named). Validation, once an
    epoch, at the statement's line; walked through ``if``/``with``/``try``, not into loops
    (``epoch_blocks`` reads those) nor functions."""
    simple: list[ast.stmt] = []
    todo: list[ast.AST] = list(getattr(epoch, "body", []))
    while todo:
        node = todo.pop(0)
        if node is step or isinstance(node, (ast.For, ast.AsyncFor, ast.While, *_DEFS)):
            continue
        if cell.inside(step, node):  # the line that holds a step loop written as an expression
            continue
        if isinstance(node, _SIMPLE):
            simple.append(node)
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, []))
    if any(has_backward(node) for node in simple):
        return []  # the epoch trains beside its step loop (a second loss once an epoch)
    found = []
    for node in simple:
        if cell.model_calls(node):
            found.append(
                Periodic(
                    cell.line_of(node), 0, cell.text_of(node), "validation", True,
                    cell.origin_of(node),
                )
            )  # fmt: skip
    return found


def _work(body: list[ast.stmt]) -> str:
    text = "\n".join(ast.unparse(stmt) for stmt in body)
    return next((kind for kind, pattern in WORK_KINDS if pattern.search(text)), "work")


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the reading binds anywhere: assigned, a loop's or a with's target, imported,
    a function's parameter, a def or a class (a global read there may be none of the
    namespace's)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
    return out


def int_constants(tree: ast.Module) -> dict[str, int]:
    """Names the cell binds once, at its top level, to an int literal (nanoGPT's
    ``eval_interval = 2000``, a collate's ``MAX_LEN = 128``: rules/padding); a name bound again
    anywhere is not a constant."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        for target in targets_of(node):
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
    out: dict[str, int] = {}
    if any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("exec", "eval")
        for n in ast.walk(tree)
    ):
        return out  # nanoGPT's configurator: exec(open(...).read()) may rebind any of them
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
            and type(stmt.value.value) is int
            and counts.get(stmt.targets[0].id) == 1
        ):
            out[stmt.targets[0].id] = stmt.value.value
    return out


def _modulus(test: ast.expr, constants: dict[str, int]) -> int | None:
    """N of ``i % N == 0``: a literal, or a name the cell binds once to one; 0 when the name's
    value is not known here (a config read at run time): still a periodic block."""
    for node in ast.walk(test):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)):
            continue
        right = node.right
        if isinstance(right, ast.Constant) and type(right.value) is int and right.value > 1:
            return right.value
        name = right.id if isinstance(right, ast.Name) else (
            right.attr if isinstance(right, ast.Attribute) else None
        )  # fmt: skip
        if name is not None and isinstance(node.left, (ast.Name, ast.Attribute)):
            value = constants.get(name) if isinstance(right, ast.Name) else None
            if value is None:
                return 0
            return value if value > 1 else None  # `% 1`: every step, nothing periodic
    return None


def kept_graph_calls(
    tree: ast.Module, model_names: frozenset[str], names: frozenset[str] = frozenset()
) -> list[ast.Call]:
    """The ``x.append(name)`` calls of the loops that call ``.backward()``, where ``name``
    carries a graph: one ``.backward()`` is called on (``scaler.scale(loss)`` too) or the result
    of a call of a model; or one of ``names`` when given. What the memory rule points at and
    its fix detaches (the same nodes), in walk order, each once."""
    found: dict[int, ast.Call] = {}
    for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))):
        losses = loss_names(loop)
        if not losses:
            continue
        graphs = set(names) or losses
        for node in ast.walk(loop) if not names else ():
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and (dotted(node.value.func) in model_names)
            ):
                graphs |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for c in (n for n in ast.walk(loop) if isinstance(n, ast.Call)):
            if method_of(c) in KEEPING_METHODS and c.args and dotted(c.args[-1]) in graphs:
                found.setdefault(id(c), c)
    return list(found.values())


def kept_graph_line(cell: CellTree | None) -> tuple[int, str, str] | None:
    """The first of :func:`kept_graph_calls`: (line, text, name)."""
    found = kept_graph_calls(cell.tree, frozenset(cell.models)) if cell is not None else []
    found = [c for c in found if cell is not None and cell.in_cell(c)]
    if cell is None or not found:
        return None
    return cell.line_of(found[0]), cell.text_of(found[0]), dotted(found[0].args[-1]) or ""
