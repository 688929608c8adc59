"""The autocast codemod: the forward pass and the loss of each training loop under ``torch.autocast``.

float16 adds a ``GradScaler`` (scaled backward, unscale before clipping, ``scaler.step``); bfloat16
needs none. The training loop is the innermost ``for`` loop that calls ``.backward()``; ``while``
loops are left alone.
"""

from __future__ import annotations

import functools

import libcst as cst

from gpu_notebook.cell.loops import forward_lines
from gpu_notebook.cell.names import dotted, method_of, receiver_of
from gpu_notebook.cell.scan import names_mentioned
from gpu_notebook.cell.words import CLIP_FUNCTIONS, last
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    Tree,
    backward_block,
    expression,
    facts_of,
    fresh_name,
    leading_lines,
    no_training_loop_reason,
    nodes_of,
    only_call,
    optimizer_names,
    put_before,
    statement,
    training_loops,
    tree_of,
    with_block,
    with_leading_lines,
    with_torch_import,
)
from gpu_notebook.fixes.records import Fix


def autocast(
    module: cst.Module, *, dtype: str = "bfloat16", device_type: str = "cuda"
) -> CodemodResult:
    """Run the forward pass and the loss of each training loop under ``torch.autocast``.

    The wrapped statements are those of the loop body before ``.backward()`` that call a module
    (the model, the loss module), compute the loss, or sit between such statements. With
    ``dtype="float16"`` a ``torch.amp.GradScaler`` is created before the outermost loop and
    scales the loss: float16 gradients underflow without it (bfloat16 has float32's range).
    """
    if dtype not in ("bfloat16", "float16"):
        raise ValueError(f'dtype must be "bfloat16" or "float16", not {dtype!r}')
    if not device_type.isidentifier():
        raise ValueError(f"device_type must be a device name like 'cuda', not {device_type!r}")
    train_loops = training_loops(module)
    if not train_loops:
        return Declined(no_training_loop_reason(module))
    facts = facts_of(module)
    if facts.autocast or facts.grad_scaler:
        return Declined("this cell already uses autocast")
    tree = tree_of(module)
    scaler = fresh_name(names_mentioned(facts), ("scaler", "grad_scaler", "gpucheck_scaler"))
    edits: dict[cst.CSTNode, Replacement] = {}
    scaled_roots: set[cst.CSTNode] = set()
    context = f'torch.autocast(device_type="{device_type}", dtype=torch.{dtype})'
    for loop, loop_facts in train_loops.items():
        calls = nodes_of(module, list(loop_facts.backward_calls))
        assert facts.tree is not None  # it has a training loop: it parsed
        forward, run_model = (
            set(nodes_of(module, lines)) for lines in forward_lines(facts.tree, loop_facts)
        )
        plan = _autocast_plan(tree, calls, forward, run_model)
        if isinstance(plan, Declined):
            return plan
        block, first, last, backward_index = plan
        steps: dict[int, str] = {}
        unscale_before: list[int] = []
        if dtype == "float16":
            stepped = _optimizer_steps(module, block, backward_index)
            if isinstance(stepped, Declined):
                return stepped
            steps, unscale_before = stepped
            # loss.backward() -> scaler.scale(loss).backward(), arguments kept: the facts'
            # backward calls on that line.
            line = block.body[backward_index]
            for call in calls:
                if isinstance(call.func, cst.Attribute) and tree.inside(call, line):
                    edits[call] = functools.partial(_scaled, scaler=scaler)
            root = _outermost_loop(tree, loop)
            if root not in scaled_roots:
                scaled_roots.add(root)
                edits[root] = _prepend(
                    statement(f'{scaler} = torch.amp.GradScaler("{device_type}")\n')
                )
        edits[block] = _autocast_block(
            context, first, last, backward_index if dtype == "float16" else None,
            steps, unscale_before, scaler,
        )  # fmt: skip
    detail = f"dtype={dtype}" + ("" if device_type == "cuda" else f", device_type={device_type}")
    if dtype == "float16":
        detail += ", GradScaler"
    return Edited(with_torch_import(module, edits), detail)


AUTOCAST = Fix(
    "autocast",
    "Mixed precision with torch.autocast",
    (
        "float32 math leaves the tensor cores idle and doubles activation memory.",
        "autocast runs matmuls and convolutions in bfloat16/float16, often about 2x faster.",
    ),
    "https://pytorch.org/docs/stable/amp.html",
    autocast,
)


def _autocast_plan(
    tree: Tree,
    backward_calls: list[cst.Call],
    forward: set[cst.CSTNode],
    run_model: set[cst.CSTNode],
) -> tuple[cst.IndentedBlock, int, int, int] | Declined:
    """(block, first and last forward statement index, backward statement index): the
    statement of the loop's first ``.backward()`` (the facts') that is a line of its own;
    ``forward`` and ``run_model``: the facts' forward lines and lines that call a model."""
    at = backward_block(tree, backward_calls)
    if isinstance(at, Declined):
        return at
    block, backward_index = at
    body = list(block.body)
    backward_stmt = body[backward_index]
    found = [i for i, stmt in enumerate(body[:backward_index]) if _holds(stmt, forward)]
    if not found:
        if _holds(backward_stmt, run_model):
            return Declined(
                "the forward pass and .backward() are one statement; split it into "
                "loss = ... and loss.backward() first"
            )
        return Declined(
            "the forward pass is not in the same block as .backward(); wrap it in "
            "torch.autocast(...) by hand"
        )
    return block, found[0], found[-1], backward_index


def _holds(stmt: cst.BaseStatement, lines: set[cst.CSTNode]) -> bool:
    """A line (``a; b`` is one) whose statements include one of ``lines``."""
    return isinstance(stmt, cst.SimpleStatementLine) and any(s in lines for s in stmt.body)


def _optimizer_steps(
    module: cst.Module, block: cst.IndentedBlock, backward_index: int
) -> tuple[dict[int, str], list[int]] | Declined:
    """Indices of ``opt.step()`` statements after backward (-> optimizer) and of clipping."""
    optimizers = optimizer_names(module)
    steps: dict[int, str] = {}
    clips: list[int] = []
    for index, stmt in enumerate(block.body):
        call = only_call(stmt)
        if index <= backward_index or call is None:
            continue
        if method_of(call) == "step" and not call.args:
            name = dotted(receiver_of(call))
            if name is not None and (name in optimizers or (not optimizers and "opt" in name)):
                steps[index] = name
        elif last(dotted(call.func)) in CLIP_FUNCTIONS and not steps:
            clips.append(index)
    if not steps:
        return Declined(
            "float16 needs a GradScaler around the optimizer step, but no optimizer.step() "
            "follows .backward() in the same block; use dtype='bfloat16'"
        )
    if clips and len(set(steps.values())) > 1:
        return Declined("gradient clipping with several optimizers: unscale them by hand")
    return steps, clips


def _autocast_block(
    context: str,
    first: int,
    last: int,
    backward_index: int | None,
    steps: dict[int, str],
    unscale_before: list[int],
    scaler: str,
) -> Replacement:
    def apply(block: cst.IndentedBlock) -> cst.IndentedBlock:
        # Indices are those of the original body: nothing before them was flattened or removed.
        body = list(block.body)
        out: list[cst.BaseStatement] = list(body[:first])
        out.append(with_block(context, body[first : last + 1]))
        optimizer = next(iter(steps.values()), "")
        for index in range(last + 1, len(body)):
            stmt = body[index]
            if index in steps:
                first_line = statement(f"{scaler}.step({steps[index]})\n")
                out.append(with_leading_lines(first_line, leading_lines(stmt)))
                out.append(statement(f"{scaler}.update()\n"))
            elif index in unscale_before:
                out += put_before(statement(f"{scaler}.unscale_({optimizer})\n"), stmt)
            else:
                out.append(stmt)
        return block.with_changes(body=out)

    return apply


def _scaled(call: cst.Call, scaler: str) -> cst.Call:
    """``loss.backward()`` -> ``scaler.scale(loss).backward()``, arguments kept."""
    assert isinstance(call.func, cst.Attribute)
    scaled = cst.Call(func=expression(f"{scaler}.scale"), args=[cst.Arg(call.func.value)])
    return call.with_changes(func=call.func.with_changes(value=scaled))


def _outermost_loop(tree: Tree, loop: cst.For) -> cst.BaseStatement:
    root: cst.BaseStatement = loop
    for ancestor in tree.ancestors(loop):
        if isinstance(ancestor, (cst.For, cst.While)):
            root = ancestor
        elif isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            break
    return root


def _prepend(line: cst.SimpleStatementLine) -> Replacement:
    def apply(stmt: cst.BaseStatement) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel(put_before(line, stmt))

    return apply
