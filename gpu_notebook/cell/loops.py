"""Loop facts of the source scanner: which loops train, call models, run with autograd off, validate.

Validation (``model.eval()``, a ``no_grad`` block, a loop over a val loader, a ``validate()``
call) counts only inside a step loop: in the epoch loop it runs once per epoch, as it should.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple, TypeGuard

from gpu_notebook.cell.expression_loops import ExpressionLoop
from gpu_notebook.cell.facts import (
    LoaderCall,
    LoopFacts,
    RemadeLoaderAt,
    SourceLine,
    ValidationKind,
)
from gpu_notebook.cell.names import (
    calls_in,
    dotted,
    is_backward,
    is_grad_mode_call,
    iterated_names,
    loss_names,
    method_of,
    position,
    receiver_of,
    targets_of,
    updates_in_place,
)
from gpu_notebook.cell.tree import CellTree, Loop, handed
from gpu_notebook.cell.words import LOSS_WORDS, last

_VAL_NAME = re.compile(
    r"(^|_)(val|valid|validation|eval|test|dev|holdout)(_|$|loader|set|data|dl)", re.I
)
_VAL_CALL = re.compile(
    r"^(validate|evaluate|eval_|run_val|run_eval|validation|test_epoch|val_)", re.I
)


def loop_facts(tree: CellTree, loop: Loop) -> LoopFacts:
    trains = tree.trains[id(loop)]
    iterates = iterated_names(loop.iter) if isinstance(loop, (ast.For, ast.AsyncFor)) else ()
    return LoopFacts(
        line=tree.line_of(loop),
        iterates=iterates,
        trains=trains,
        innermost_training=id(loop) in tree.step_loops,
        calls_model=bool(tree.model_calls(loop)),
        under_grad_mode=tree.under_grad_mode(loop),
        node=loop,
        hands=tuple(sorted(handed(loop))),
        backward_calls=tuple(
            sorted((c for s in loop.body for c in calls_in(s) if is_backward(c)), key=position)
        )
        if trains
        else (),
    )


def validation(tree: CellTree) -> Iterator[SourceLine]:
    # Only inside step loops: validation in the epoch loop runs once per epoch, as it should.
    training = [loop for loop in tree.loops if id(loop) in tree.step_loops]
    found: list[SourceLine] = []
    seen: set[int] = set()
    for loop in training:
        for node in ast.walk(loop):
            if node is loop:
                continue
            kind: ValidationKind | None = None
            if isinstance(node, ast.Call):
                if method_of(node) == "eval" and dotted(receiver_of(node)) in tree.models | {
                    "model"
                }:
                    kind = "eval"
                elif _VAL_CALL.match(last(dotted(node.func))):
                    kind = "val-call"
            elif _no_grad_block(node) and not _feeds_backward(node, loop):
                # A no_grad block that updates tensors in place is a manual optimizer step
                # (`w -= lr * w.grad`), not validation; one whose values the loss reads is the
                # step's own work (a teacher's targets), not validation either.
                kind = "no_grad"
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                _VAL_NAME.search(last(n)) for n in iterated_names(node.iter)
            ):
                kind = "val-loop"
                node = node.iter  # a comprehension has no line of its own
            if kind is None:
                continue
            line = tree.line_of(node)
            if line in seen:
                continue
            seen.add(line)
            found.append(tree.source_line(node, kind, loop))
    yield from sorted(found, key=lambda s: s.line)


def frozen_forwards(tree: CellTree) -> Iterator[SourceLine]:
    """no_grad blocks inside a step loop that call a model and whose outputs the loss reads: a
    distillation teacher's targets, a frozen encoder's features, a target network. Not
    validation (``validation`` leaves them out): the step needs them, every step."""
    found: dict[int, SourceLine] = {}
    for loop in (loop for loop in tree.loops if id(loop) in tree.step_loops):
        for node in ast.walk(loop):
            if _no_grad_block(node) and tree.model_calls(node) and _feeds_backward(node, loop):
                # The line of its first model call (``t = teacher(x)``), the one to act on.
                call = min(tree.model_calls(node), key=position)
                line = tree.source_line(call, "frozen-forward", loop)
                found.setdefault(line.line, line)
    yield from sorted(found.values(), key=lambda s: s.line)


def per_sample_loops(tree: CellTree) -> Iterator[SourceLine]:
    """Loops inside a step loop that go over the batch's samples and call a model on each
    (``for seq, y in batch:``, ``for i in range(x.size(0)):``, ``for xi, yi in zip(x, y):``): the
    model runs once per sample, so a bigger batch adds calls, not work per operator. A loop
    over another dimension (``range(x.size(1))``: time steps) or over anything else is not one:
    a bigger batch gives each of its calls more work."""
    found: dict[int, SourceLine] = {}
    for loop in (loop for loop in tree.loops if id(loop) in tree.step_loops):
        samples = _batch_names(loop)
        if not samples:
            continue
        for node in ast.walk(loop):
            if (
                node is not loop
                and isinstance(node, (ast.For, ast.AsyncFor))
                and _over_samples(node.iter, samples)
                and tree.model_calls(node)
            ):
                line = tree.source_line(node, "per-sample", loop)
                found.setdefault(line.line, line)
    yield from sorted(found.values(), key=lambda s: s.line)


def _no_grad_block(node: ast.AST) -> TypeGuard[ast.With | ast.AsyncWith]:
    """A no_grad (or inference_mode) block that updates no tensor in place."""
    return (
        isinstance(node, (ast.With, ast.AsyncWith))
        and any(is_grad_mode_call(i.context_expr) for i in node.items)
        and not updates_in_place(node)
    )


def _batch_names(loop: Loop) -> set[str]:
    """Names that hold the step's batch: the step loop's targets (``for x, y in loader``) and
    names its body unpacks or indexes from them (``x, y = batch``, ``x = batch[0]``)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return set()
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for stmt in loop.body:
        if not isinstance(stmt, ast.Assign):
            continue
        value = stmt.value.value if isinstance(stmt.value, ast.Subscript) else stmt.value
        if isinstance(value, ast.Name) and value.id in names:
            for target in stmt.targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _over_samples(expr: ast.expr, samples: set[str]) -> bool:
    """``batch``, ``enumerate(batch)``, ``zip(x, y)``, ``range(len(x))``, ``range(x.size(0))``,
    ``range(x.shape[0])``: an iteration over the first dimension of a batch name."""
    if isinstance(expr, ast.Name):
        return expr.id in samples
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Name):
        return False
    fn, args = expr.func.id, expr.args
    if fn in ("enumerate", "zip", "reversed"):
        return bool(args) and all(
            _over_samples(a, samples) for a in args[: 1 if fn != "zip" else None]
        )
    if fn != "range" or len(args) != 1:
        return False
    return _first_dim_of(args[0], samples)


def _first_dim_of(expr: ast.expr, samples: set[str]) -> bool:
    """``len(x)``, ``x.size(0)`` or ``x.shape[0]`` of a batch name ``x``."""
    index: ast.expr | None = None
    if isinstance(expr, ast.Call) and dotted(expr.func) == "len":
        owner, index = (expr.args[0] if len(expr.args) == 1 else None), ast.Constant(0)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        owner = expr.func.value if expr.func.attr == "size" else None
        index = expr.args[0] if len(expr.args) == 1 else None
    elif isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute):
        owner, index = (expr.value.value if expr.value.attr == "shape" else None), expr.slice
    else:
        return False
    named = isinstance(owner, ast.Name) and owner.id in samples
    return named and isinstance(index, ast.Constant) and index.value == 0


def _feeds_backward(block: ast.With | ast.AsyncWith, loop: Loop) -> bool:
    """Whether a name the block assigns is read after it, up to the loop's last backward: the
    step's loss is built from it (a teacher's targets, a no_grad augmentation), so the block
    runs every step by design (a distillation loop was told to validate it every 10 steps)."""
    stored = {
        n.id for n in ast.walk(block) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    ends = [
        c.end_lineno or c.lineno
        for c in ast.walk(loop)
        if isinstance(c, ast.Call) and is_backward(c)
    ]
    if not stored or not ends:
        return False
    after, last = block.end_lineno or block.lineno, max(ends)
    return any(
        isinstance(n, ast.Name)
        and isinstance(n.ctx, ast.Load)
        and n.id in stored
        and after < n.lineno <= last
        for n in ast.walk(loop)
    )


def inference_loops(tree: CellTree, loops: tuple[LoopFacts, ...]) -> tuple[SourceLine, ...]:
    """Loops that call a model with autograd on, outside any training loop: forwards that
    build graphs nobody reads. ``loops`` are :func:`loop_facts` of ``tree.loops``, in order."""
    return tuple(
        SourceLine(
            tree.line_of(loop),
            tree.text_of(loop),
            "inference-loop",
            node=loop,
            origin=tree.origin_of(loop),
        )
        for loop, facts in zip(tree.loops, loops, strict=True)
        if facts.calls_model
        and not facts.trains
        and not facts.under_grad_mode
        and not any(tree.trains[id(a)] for a in tree.ancestors(loop) if id(a) in tree.trains)
    )


def model_run(tree: CellTree, facts: LoopFacts, main: str | None) -> str | None:
    """The model an inference loop runs: ``main`` when its body calls it, else the first model
    it calls (None: none)."""
    loop = _node(facts)
    called = [
        dotted(c.func) for s in loop.body for c in calls_in(s) if dotted(c.func) in tree.models
    ]
    return main if main in called else (called[0] if called else None)


def eval_before(tree: CellTree, facts: LoopFacts, model: str) -> bool:
    """``model.eval()`` inside the loop, or earlier in its block after the last ``.train()``."""
    loop = _node(facts)
    if any(
        method_of(c) == "eval" and dotted(receiver_of(c)) == model
        for s in loop.body
        for c in calls_in(s)
    ):
        return True
    for stmt in reversed(_before(tree, loop)):
        for call in reversed(list(calls_in(stmt))):
            if dotted(receiver_of(call)) == model and method_of(call) in ("eval", "train"):
                return method_of(call) == "eval"
    return False


def _node(facts: LoopFacts) -> Loop:
    """The loop the facts came from (a fix hands the facts back, never a node of its own)."""
    assert isinstance(facts.node, Loop)  # every LoopFacts of a scan keeps its loop
    return facts.node


def trains_in_a_while(tree: CellTree) -> bool:
    """A ``while`` loop of the cell trains (the loop fixes patch ``for`` loops only)."""
    return any(isinstance(loop, ast.While) and tree.trains[id(loop)] for loop in tree.loops)


class ExpressionStep(NamedTuple):
    """A step loop written as an expression, as a fix names it: its line, the line's text, the
    iterable as written (``loader``)."""

    line: int
    text: str
    iterable: str


def expression_step_loop(tree: CellTree) -> ExpressionStep | None:
    """The first step loop of the cell written as an expression (``[step(b) for b in loader]``,
    ``map(step, loader)``: cell.expression_loops), which no loop fix can patch; None: none."""
    return next(
        (
            ExpressionStep(tree.line_of(lp), tree.text_of(lp), ast.unparse(lp.iter))
            for lp in tree.loops
            if isinstance(lp, ExpressionLoop) and id(lp) in tree.step_loops
        ),
        None,
    )


def _before(tree: CellTree, node: ast.AST) -> list[ast.AST]:
    """The statements before ``node`` in the block (a body, an else, a handler) that lists it."""
    parent = tree.parent.get(node, tree.tree)
    for _field, held in ast.iter_fields(parent):
        if isinstance(held, list) and any(s is node for s in held):
            return held[: next(i for i, s in enumerate(held) if s is node)]
    return []


# Statements that hold others: the autocast fix wraps lines (simple statements) only.
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)  # fmt: skip


def forward_lines(tree: CellTree, facts: LoopFacts) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(the forward pass's lines, the lines that call a model) of a training loop: simple
    statements that call a model or a loss (``loss_fn``, ``criterion``) or assign a name
    ``.backward()`` is called on; the autocast fix wraps the first, and declines where the
    backward's line is one of the second."""
    loop = _node(facts)
    losses = loss_names(loop)
    lines = [s for s in ast.walk(loop) if isinstance(s, ast.stmt) and not isinstance(s, _COMPOUND)]
    forward = [
        s
        for s in lines
        if any(
            dotted(c.func) in tree.models
            or any(word in last(dotted(c.func)).lower() for word in LOSS_WORDS)
            for c in calls_in(s)
        )
        or (
            isinstance(s, (ast.Assign, ast.AnnAssign))  # not ``+=``: that adds to a loss
            and s.value is not None
            and any(dotted(t) in losses for t in targets_of(s))
        )
    ]
    return forward, [s for s in lines if tree.model_calls(s)]


def remade_loaders(tree: CellTree, loaders: Iterable[LoaderCall]) -> Iterator[RemadeLoaderAt]:
    """The DataLoader calls made anew for every pass of a loop around the step loop that
    iterates them: ``loader = DataLoader(...)`` in the body of an epoch loop whose step loop
    reads ``loader``, or a function that builds one (``def batches(): yield from
    DataLoader(...)``) called in a step loop's header inside another loop. Each pass makes a new
    loader, and a new loader starts its workers again (``persistent_workers`` keeps the workers
    of one loader between its own passes only)."""
    functions = {
        fn.name: fn
        for fn in ast.walk(tree.tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    steps = [
        loop for loop in tree.loops if id(loop) in tree.step_loops and isinstance(loop, ast.For)
    ]
    for call in loaders:
        if call.node is None:
            continue
        for step in steps:
            assert isinstance(step, ast.For)
            outer = tree.enclosing_loop(step)
            if outer is None:
                continue
            made_in = tree.enclosing_loop(call.node)
            if (
                call.name is not None
                and call.name in iterated_names(step.iter)
                and made_in is outer
            ):
                yield RemadeLoaderAt(call, tree.line_of(outer), tree.line_of(step), None)
                break
            fn = tree.nearest(call.node, (ast.FunctionDef, ast.AsyncFunctionDef))
            called = {
                c.func.id
                for c in ast.walk(step.iter)
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and (
                fn.name in called and functions.get(fn.name) is fn
            ):
                yield RemadeLoaderAt(call, tree.line_of(outer), tree.line_of(step), fn.name)
                break


def drawn_by_next(tree: CellTree, loaders: Iterable[ast.AST | None]) -> tuple[str, str] | None:
    """(iterator, loader) where the cell draws batches with ``next(it)`` from ``it =
    iter(loader)`` over one of ``loaders`` (DataLoader calls): a loop that takes a fixed count of
    batches from one pass (an lr finder's ``for _ in range(40): x, y = next(it)``) runs out of
    batches when each holds more (lr_finder_runs: 4096 samples, 40 draws of 64; batch 128 gave
    32 and StopIteration). None: no such draw."""
    names = {target for call in loaders for target in _assigned_to(tree, call)}
    iterators: dict[str, str] = {}
    drawn: list[str] = []
    for call in sorted(tree.calls(), key=position):
        given = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
        given += [k.value for k in call.keywords]
        name = given[0].id if given and isinstance(given[0], ast.Name) else None
        if dotted(call.func) == "next" and name is not None:
            drawn.append(name)
        elif dotted(call.func) == "iter" and len(given) == 1 and name in names:
            iterators.update(dict.fromkeys(_assigned_to(tree, call), name))
    return next(((it, iterators[it]) for it in drawn if it in iterators), None)


def _assigned_to(tree: CellTree, value: ast.AST | None) -> list[str]:
    """The plain names ``value`` is assigned to (``a = b = value``)."""
    assign = tree.parent.get(value)
    if not isinstance(assign, ast.Assign) or assign.value is not value:
        return []
    return [t.id for t in assign.targets if isinstance(t, ast.Name)]
