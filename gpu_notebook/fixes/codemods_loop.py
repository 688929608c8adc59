"""Codemods inside the step loop: autocast, fewer host syncs, less logging, inference mode.

The training loop is the innermost ``for`` loop that calls ``.backward()``; ``while`` loops are
left alone (their step counter is the user's own). Same contract as the other codemod modules:
``(module, **params) -> Edited | Declined``; a bad parameter value raises ValueError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    Tree,
    add_comment,
    assigned_names,
    call_name,
    calls_in,
    dotted_name,
    expression,
    has_backward,
    is_backward_call,
    last_part,
    leading_lines,
    loops,
    loss_names,
    main_model_name,
    method_name,
    module_names,
    names_read,
    optimizer_names,
    receiver,
    replace_nodes,
    statement,
    training_loops,
    walk,
    while_training_loop,
    with_leading_lines,
    with_torch_import,
    wrap,
)

_NO_TRAINING_LOOP = "no for loop calling .backward() in this cell"
_WHILE_LOOP = (
    "the training loop is a while loop; gpucheck patches for loops only "
    "(it cannot tell which variable counts the steps)"
)
_CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_"})
_GRAD_MODES = frozenset({"no_grad", "inference_mode", "enable_grad", "set_grad_enabled"})


def _no_loop_reason(module: cst.Module) -> str:
    return _WHILE_LOOP if while_training_loop(module) else _NO_TRAINING_LOOP


# --------------------------------------------------------------------------------------------
# autocast
# --------------------------------------------------------------------------------------------


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
        return Declined(_no_loop_reason(module))
    if any(last_part(call_name(c)) in ("autocast", "GradScaler") for c in calls_in(module)):
        return Declined("this cell already uses autocast")
    tree = Tree(module)
    modules = module_names(module)
    scaler = _fresh_name(module, ("scaler", "grad_scaler", "gpucheck_scaler"))
    edits: dict[cst.CSTNode, Replacement] = {}
    scaled_roots: set[cst.CSTNode] = set()
    context = f'torch.autocast(device_type="{device_type}", dtype=torch.{dtype})'
    for loop in train_loops:
        plan = _autocast_plan(tree, loop, modules)
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
    return Edited(with_torch_import(replace_nodes(module, edits)), detail)


def _autocast_plan(
    tree: Tree, loop: cst.For, modules: set[str]
) -> tuple[cst.IndentedBlock, int, int, int] | Declined:
    """(block, first and last forward statement index, backward statement index)."""
    backward_stmt = next(
        (s for s in walk(loop.body) if isinstance(s, cst.SimpleStatementLine) and has_backward(s)),
        None,
    )
    if backward_stmt is None:
        return Declined(".backward() is not a statement of its own in the training loop")
    block = tree.block_of(backward_stmt)
    if not isinstance(block, cst.IndentedBlock):
        return Declined(".backward() is not inside an indented loop body")
    body = list(block.body)
    backward_index = body.index(backward_stmt)
    losses = loss_names(loop)
    forward = [
        i for i, stmt in enumerate(body[:backward_index]) if _is_forward(stmt, modules, losses)
    ]
    if not forward:
        if any(dotted_name(c.func) in modules for c in calls_in(backward_stmt)):
            return Declined(
                "the forward pass and .backward() are one statement; split it into "
                "loss = ... and loss.backward() first"
            )
        return Declined(
            "the forward pass is not in the same block as .backward(); wrap it in "
            "torch.autocast(...) by hand"
        )
    return block, forward[0], forward[-1], backward_index


def _is_forward(stmt: cst.BaseStatement, modules: set[str], losses: set[str]) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for call in calls_in(stmt):
        name = dotted_name(call.func)
        if name in modules or any(
            word in last_part(name).lower() for word in ("loss", "criterion")
        ):
            return True
    return any(target in losses for target, _ in assigned_names(stmt))


def _optimizer_steps(
    module: cst.Module, block: cst.IndentedBlock, backward_index: int
) -> tuple[dict[int, str], list[int]] | Declined:
    """Indices of ``opt.step()`` statements after backward (-> optimizer) and of clipping."""
    optimizers = optimizer_names(module)
    steps: dict[int, str] = {}
    clips: list[int] = []
    for index, stmt in enumerate(block.body):
        if index <= backward_index or not isinstance(stmt, cst.SimpleStatementLine):
            continue
        call = _only_call(stmt)
        if call is None:
            continue
        if method_name(call) == "step" and not call.args:
            name = dotted_name(receiver(call))
            if name is not None and (name in optimizers or (not optimizers and "opt" in name)):
                steps[index] = name
        elif last_part(call_name(call)) in _CLIP_FUNCTIONS and not steps:
            clips.append(index)
    if not steps:
        return Declined(
            "float16 needs a GradScaler around the optimizer step, but no optimizer.step() "
            "follows .backward() in the same block; use dtype='bfloat16'"
        )
    if clips and len(set(steps.values())) > 1:
        return Declined("gradient clipping with several optimizers: unscale them by hand")
    return steps, clips


def _only_call(stmt: cst.SimpleStatementLine) -> cst.Call | None:
    if len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr):
        value = stmt.body[0].value
        if isinstance(value, cst.Call):
            return value
    return None


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
        with_node = cst.With(
            items=[cst.WithItem(item=expression(context))], body=cst.IndentedBlock(body=[])
        )
        out.append(wrap(with_node, body[first : last + 1]))
        optimizer = next(iter(steps.values()), "")
        for index in range(last + 1, len(body)):
            stmt = body[index]
            if index == backward_index:
                out.append(_scaled_backward(stmt, scaler))
            elif index in steps:
                first_line = statement(f"{scaler}.step({steps[index]})\n")
                out.append(with_leading_lines(first_line, leading_lines(stmt)))
                out.append(statement(f"{scaler}.update()\n"))
            elif index in unscale_before:
                line = statement(f"{scaler}.unscale_({optimizer})\n")
                out.append(with_leading_lines(line, leading_lines(stmt)))
                out.append(with_leading_lines(stmt, []))
            else:
                out.append(stmt)
        return block.with_changes(body=out)

    return apply


def _scaled_backward(stmt: cst.BaseStatement, scaler: str) -> cst.BaseStatement:
    """``loss.backward()`` -> ``scaler.scale(loss).backward()``, arguments kept."""

    class Scale(cst.CSTTransformer):
        def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
            if method_name(updated_node) == "backward" and isinstance(
                updated_node.func, cst.Attribute
            ):
                scaled = cst.Call(
                    func=expression(f"{scaler}.scale"), args=[cst.Arg(updated_node.func.value)]
                )
                return updated_node.with_changes(func=updated_node.func.with_changes(value=scaled))
            return updated_node

    result = stmt.visit(Scale())
    assert isinstance(result, cst.BaseStatement)
    return result


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
        first = with_leading_lines(line, leading_lines(stmt))
        return cst.FlattenSentinel([first, with_leading_lines(stmt, [])])

    return apply


def _fresh_name(module: cst.Module, choices: Sequence[str]) -> str:
    used = names_read(module)
    for name in choices:
        if name not in used:
            return name
    index = 0
    while f"{choices[-1]}_{index}" in used:
        index += 1
    return f"{choices[-1]}_{index}"


# --------------------------------------------------------------------------------------------
# throttle_host_syncs and log_every_n
# --------------------------------------------------------------------------------------------

_LOG_PREFIXES = ("logging.", "logger.", "log.", "wandb.", "mlflow.", "tqdm.write")
_LOG_METHODS = frozenset(
    {"set_postfix", "set_postfix_str", "set_description", "log", "log_metric", "log_metrics",
     "add_scalar", "add_scalars", "add_histogram", "write"}
)  # fmt: skip


def _is_logging_call(call: cst.Call) -> bool:
    name = call_name(call)
    if name is None:
        return False
    if name == "print" or name.startswith(_LOG_PREFIXES):
        return True
    return "." in name and last_part(name) in _LOG_METHODS


def _is_sync_call(call: cst.Call) -> bool:
    """``t.item()`` or ``float(t)``: the host waits for the device to produce a number."""
    if method_name(call) == "item" and not call.args:
        return True
    if call_name(call) == "float" and len(call.args) == 1:
        return not isinstance(call.args[0].value, (cst.Integer, cst.Float, cst.SimpleString))
    return False


def _has_sync(node: cst.CSTNode) -> bool:
    return any(_is_sync_call(c) for c in calls_in(node))


def _logging_call_of(stmt: cst.BaseStatement) -> cst.Call | None:
    if isinstance(stmt, cst.SimpleStatementLine):
        call = _only_call(stmt)
        if call is not None and _is_logging_call(call):
            return call
    return None


def _is_record(stmt: cst.BaseStatement) -> bool:
    """``losses.append(loss.item())``: a list that only records values."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    call = _only_call(stmt)
    return (
        call is not None
        and method_name(call) in ("append", "extend")
        and isinstance(receiver(call), cst.Name)
    )


def _is_plain_assign(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Assign)
        and all(isinstance(t.target, cst.Name) for t in stmt.body[0].targets)
    )


def _written(stmt: cst.BaseStatement) -> set[str]:
    return {name for name, _ in assigned_names(stmt)}


Selector = Callable[[cst.BaseStatement, set[str]], bool]


def _tensor_logging(stmt: cst.BaseStatement, step_names: set[str]) -> bool:
    """A statement that syncs: ``.item()``/``float(t)``, or logs a value made in the loop."""
    if not (_logging_call_of(stmt) or _is_record(stmt) or _is_plain_assign(stmt)):
        return False
    if _has_sync(stmt):
        return True
    return _logging_call_of(stmt) is not None and bool(names_read(stmt) & step_names)


def _any_logging(stmt: cst.BaseStatement, step_names: set[str]) -> bool:
    return _logging_call_of(stmt) is not None


def throttle_host_syncs(module: cst.Module, *, every: int = 10) -> CodemodResult:
    """Move per-step ``.item()``, ``float(t)`` and logs of tensors behind ``if step % every == 0:``.

    Steps where the condition holds behave exactly as before; the others skip the reads. A
    value read on every step by code that stays (``if loss_val < best: ...``) keeps its sync.
    ``total += loss.item()`` becomes ``total += loss.detach()`` (summed on the device) when
    ``total`` is otherwise only reset to a number or formatted in f-strings, where a 0-d tensor
    formats like a float; otherwise a comment marks the sync that remains.
    """
    return _throttle(module, every, _tensor_logging, accumulate=True)


def log_every_n(module: cst.Module, *, every: int = 10) -> CodemodResult:
    """Move logging calls (print, logger.*, wandb.log, writer.add_scalar...) behind a step gate.

    The training loops are patched, or the innermost loops that log when no loop calls
    ``.backward()``. Values computed only for those logs move with them.
    """
    return _throttle(module, every, _any_logging, accumulate=False)


def _throttle(
    module: cst.Module, every: int, select: Selector, *, accumulate: bool
) -> CodemodResult:
    if isinstance(every, bool) or not isinstance(every, int) or every < 2:
        raise ValueError(f"every must be an int of at least 2, not {every!r}")
    targets = training_loops(module)
    if not targets and not accumulate:
        targets = [
            loop
            for loop in loops(module)
            if not loops(loop.body) and any(_logging_call_of(s) for s in _body(loop))
        ]
    if not targets:
        return Declined(_no_loop_reason(module))
    tree = Tree(module)
    used = names_read(module)
    edits: dict[cst.CSTNode, Replacement] = {}
    kept: list[cst.AugAssign] = []  # totals that must stay numbers: their sync remains
    gated = summed = False
    for loop in targets:
        body = _body(loop)
        moved = _movable(body, select, _step_names(loop), names_read(module, skip=loop))
        if accumulate:
            for aug in _accumulations(loop):
                if _device_accumulable(tree, aug):
                    edits[aug] = _detach_syncs
                    summed = True
                else:
                    kept.append(aug)
        if moved:
            step, rename = _step_variable(loop, used)
            used.add(step)
            edits[loop] = _gate(moved, step, rename, every)
            gated = True
    if not (gated or summed):
        if kept:
            total = tree.code(kept[0]).strip()
            return Declined(
                f"`{total}` syncs every step and its total is used as a number; sum "
                ".detach() tensors instead and call .item() where the total is read"
            )
        what = (
            "per-step .item(), float(tensor) or print of a tensor" if accumulate else "logging call"
        )
        return Declined(f"the training loop has no {what} outside an if (nothing to throttle)")
    for aug in kept:
        stmt = tree.statement_of(aug)
        if stmt is not None and "# gpucheck:" not in tree.code(stmt):
            edits[stmt] = _remark(
                "# gpucheck: this still syncs every step (the total is used as a number)"
            )
    detail = ", ".join(
        text
        for text, done in ((f"every {every} steps", gated), ("sums on the device", summed))
        if done
    )
    return Edited(replace_nodes(module, edits), detail)


def _body(loop: cst.For) -> list[cst.BaseStatement]:
    return list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []


def _step_names(loop: cst.For) -> set[str]:
    """Names bound by the loop: its target and everything assigned in its body."""
    names = {n.value for n in walk(loop.target) if isinstance(n, cst.Name)}
    for stmt in walk(loop.body):
        if isinstance(stmt, cst.SimpleStatementLine):
            names |= _written(stmt)
    return names


def _movable(
    body: list[cst.BaseStatement], select: Selector, step_names: set[str], outside: set[str]
) -> list[int]:
    """Indices of the statements to gate, closed over the values they compute for each other.

    Starts from every candidate (selected statements, and ``v = t.item()`` lines that may only
    feed them) and drops, until nothing changes, any that writes a name read by a statement
    that stays ungated or by code outside the loop (which would see a stale value or none),
    and any pulled-in line that no gated statement reads. The set only shrinks: it ends.
    """
    selected = {i for i, stmt in enumerate(body) if select(stmt, step_names)}
    pulled = {i for i, s in enumerate(body) if _is_plain_assign(s) and _has_sync(s)} - selected
    chosen = selected | pulled
    readers = [names_read(stmt) for stmt in body]
    changed = True
    while changed:
        changed = False
        for i in sorted(chosen):
            written = _written(body[i])
            read_elsewhere = bool(written & outside) or any(
                readers[j] & written for j in range(len(body)) if j != i and j not in chosen
            )
            unused = i in pulled and not any(readers[j] & written for j in chosen if j != i)
            if read_elsewhere or unused:
                chosen.discard(i)
                changed = True
    return sorted(chosen)


def _accumulations(loop: cst.For) -> list[cst.AugAssign]:
    return [
        node
        for node in walk(loop.body)
        if isinstance(node, cst.AugAssign)
        and isinstance(node.target, cst.Name)
        and _has_sync(node.value)
    ]


def _device_accumulable(tree: Tree, aug: cst.AugAssign) -> bool:
    """True when every other use of the total is a reset to a number, another ``+=``, or an
    f-string field (a 0-d tensor formats like a float there, so the output is unchanged)."""
    name = aug.target.value if isinstance(aug.target, cst.Name) else None
    for node in walk(tree.module):
        if not isinstance(node, cst.Name) or node.value != name:
            continue
        parent = tree.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue  # self.total is another variable
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            continue
        if isinstance(parent, cst.AssignTarget):
            assign = tree.parent(parent)
            if isinstance(assign, cst.Assign) and isinstance(
                assign.value, (cst.Integer, cst.Float)
            ):
                continue
        if not _inside_fstring_field(tree, node):
            return False
    return True


def _inside_fstring_field(tree: Tree, node: cst.CSTNode) -> bool:
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, cst.FormattedStringExpression):
            # !r and !s would show "tensor(...)" instead of the number.
            return ancestor.conversion is None
        if isinstance(ancestor, cst.BaseStatement):
            return False
    return False


def _detach_syncs(aug: cst.AugAssign) -> cst.AugAssign:
    class Detach(cst.CSTTransformer):
        def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
            if method_name(updated_node) == "item" and isinstance(updated_node.func, cst.Attribute):
                return updated_node.with_changes(
                    func=updated_node.func.with_changes(attr=cst.Name("detach"))
                )
            if call_name(updated_node) == "float" and len(updated_node.args) == 1:
                inner = updated_node.args[0].value
                return cst.Call(
                    func=cst.Attribute(value=_parenthesized(inner), attr=cst.Name("detach"))
                )
            return updated_node

    result = aug.visit(Detach())
    assert isinstance(result, cst.AugAssign)
    return result


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _remark(text: str) -> Replacement:
    def apply(stmt: cst.BaseStatement) -> cst.BaseStatement:
        return add_comment(stmt, text)

    return apply


def _step_variable(loop: cst.For, used: set[str]) -> tuple[str, bool]:
    """The loop's step counter: its enumerate index, or a fresh name (True: add enumerate)."""
    target = loop.target
    if (
        isinstance(loop.iter, cst.Call)
        and call_name(loop.iter) == "enumerate"
        and isinstance(target, cst.Tuple)
        and target.elements
        and isinstance(target.elements[0].value, cst.Name)
        and target.elements[0].value.value != "_"
    ):
        return target.elements[0].value.value, False
    name = next(
        (n for n in ("step", "batch_idx", "gpucheck_step") if n not in used), "gpucheck_step_"
    )
    return name, True


def _gate(moved: list[int], step: str, rename: bool, every: int) -> Replacement:
    def apply(loop: cst.For) -> cst.For:
        assert isinstance(loop.body, cst.IndentedBlock)
        body = list(loop.body.body)
        runs: list[list[int]] = []
        for index in moved:
            if runs and runs[-1][-1] == index - 1:
                runs[-1].append(index)
            else:
                runs.append([index])
        starts = {run[0]: run for run in runs}
        out: list[cst.BaseStatement] = []
        index = 0
        while index < len(body):
            run = starts.get(index)
            if run is None:
                out.append(body[index])
                index += 1
                continue
            gate = cst.If(
                test=expression(f"{step} % {every} == 0"), body=cst.IndentedBlock(body=[])
            )
            out.append(wrap(gate, [body[i] for i in run]))
            index = run[-1] + 1
        loop = loop.with_changes(body=loop.body.with_changes(body=out))
        if rename:
            loop = _enumerated(loop, step)
        return loop

    return apply


def _enumerated(loop: cst.For, step: str) -> cst.For:
    """``for x, y in loader:`` -> ``for step, (x, y) in enumerate(loader):``."""
    target = loop.target
    if (
        isinstance(loop.iter, cst.Call)
        and call_name(loop.iter) == "enumerate"
        and isinstance(target, cst.Tuple)
    ):
        # `for _, batch in enumerate(...)`: name the index instead of adding a second enumerate.
        first = target.elements[0].with_changes(value=cst.Name(step))
        return loop.with_changes(target=target.with_changes(elements=[first, *target.elements[1:]]))
    if isinstance(target, cst.Tuple) and not target.lpar:
        target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new_target = cst.Tuple(
        elements=[
            cst.Element(
                cst.Name(step), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            ),
            cst.Element(target),
        ],
        lpar=[],
        rpar=[],
    )
    new_iter = cst.Call(func=cst.Name("enumerate"), args=[cst.Arg(loop.iter)])
    return loop.with_changes(target=new_target, iter=new_iter)


# --------------------------------------------------------------------------------------------
# inference_mode
# --------------------------------------------------------------------------------------------


def inference_mode(module: cst.Module, *, model_name: str | None = None) -> CodemodResult:
    """Wrap each inference loop in ``with torch.inference_mode():`` and call ``model.eval()``.

    An inference loop is a ``for`` loop that calls the model and never ``.backward()``, not
    already under a grad-mode context. ``model.eval()`` is added before it unless the same block
    already switches to eval after its last ``.train()``; in a cell that also trains,
    ``model.train()`` follows the loop so later training steps keep dropout and batch norm on.
    """
    tree = Tree(module)
    models = module_names(module)
    if model_name:
        models.add(model_name)
    main = model_name or main_model_name(module)
    candidates = [
        loop
        for loop in loops(module)
        if not has_backward(loop.body) and _calls_any(loop.body, models)
    ]
    outermost = [
        loop for loop in candidates if not any(a in candidates for a in tree.ancestors(loop))
    ]
    if not outermost:
        return Declined("no loop in this cell calls the model without .backward()")
    free = [loop for loop in outermost if not _under_grad_mode(tree, loop)]
    if not free:
        return Declined(
            "every inference loop already runs under torch.no_grad() or inference_mode()"
        )
    trains = any(is_backward_call(c) for c in calls_in(module))
    edits: dict[cst.CSTNode, Replacement] = {}
    named: list[str] = []
    for loop in free:
        model = _model_called(loop, models, main)
        needs_eval = model is not None and not _eval_before(tree, loop, model)
        edits[loop] = _inference_wrap(model if needs_eval else None, restore=trains)
        if model is not None and model not in named:
            named.append(model)
    return Edited(with_torch_import(replace_nodes(module, edits)), ", ".join(named))


def _calls_any(node: cst.CSTNode, names: set[str]) -> bool:
    return any(dotted_name(c.func) in names for c in calls_in(node))


def _under_grad_mode(tree: Tree, loop: cst.For) -> bool:
    """Inside or containing a ``with torch.no_grad()`` (or inference_mode...) block."""

    def grad_with(node: cst.CSTNode) -> bool:
        return isinstance(node, cst.With) and any(
            isinstance(item.item, cst.Call) and last_part(call_name(item.item)) in _GRAD_MODES
            for item in node.items
        )

    if any(grad_with(a) for a in tree.ancestors(loop)) or any(
        grad_with(n) for n in walk(loop.body)
    ):
        return True
    # A function decorated with @torch.no_grad() or @torch.inference_mode().
    for ancestor in tree.ancestors(loop):
        if isinstance(ancestor, cst.FunctionDef):
            for decorator in ancestor.decorators:
                target = decorator.decorator
                target = target.func if isinstance(target, cst.Call) else target
                if last_part(dotted_name(target)) in _GRAD_MODES:
                    return True
    return False


def _model_called(loop: cst.For, models: set[str], main: str | None) -> str | None:
    called = [dotted_name(c.func) for c in calls_in(loop.body) if dotted_name(c.func) in models]
    if main in called:
        return main
    return called[0] if called else None


def _eval_before(tree: Tree, loop: cst.For, model: str) -> bool:
    """``model.eval()`` inside the loop, or earlier in its block after the last ``.train()``."""
    if any(
        method_name(c) == "eval" and dotted_name(receiver(c)) == model for c in calls_in(loop.body)
    ):
        return True
    block = tree.block_of(loop)
    if block is None:
        return False
    body = list(block.body)
    for stmt in reversed(body[: body.index(loop)]):
        for call in reversed(list(calls_in(stmt))):
            if dotted_name(receiver(call)) == model and method_name(call) in ("eval", "train"):
                return method_name(call) == "eval"
    return False


def _inference_wrap(eval_model: str | None, *, restore: bool) -> Replacement:
    def apply(loop: cst.For) -> cst.FlattenSentinel[cst.BaseStatement]:
        with_node = cst.With(
            items=[cst.WithItem(item=expression("torch.inference_mode()"))],
            body=cst.IndentedBlock(body=[]),
        )
        with_node = wrap(with_node, [loop])
        out: list[cst.BaseStatement] = [with_node]
        if eval_model is not None:
            eval_line = with_leading_lines(
                statement(f"{eval_model}.eval()\n"), with_node.leading_lines
            )
            out = [eval_line, with_leading_lines(with_node, [])]
            if restore:
                # The cell trains too: give dropout and batch norm back to the next training step.
                out.append(statement(f"{eval_model}.train()\n"))
        return cst.FlattenSentinel(out)

    return apply
