"""Codemods of the step loop's per-step work: ``throttle_host_syncs``, ``log_every_n``,
``validate_every_n`` and ``detach_kept_tensors``.

Both gate statements of the training loop behind ``if step % every == 0`` (enumerating the loop
when it has no step counter); a running sum of read values (``total += loss.item()``) stays on
the device instead, every step still counted. ``while`` loops are left alone (their step counter
is the user's own). ``history.append(loss)`` keeps every step's graph alive, so memory grows each
step: ``loss.detach()`` keeps the value on the device without it (and, unlike ``.item()``,
without a sync).

What they gate is what the rule counted: the lines the cell's facts point at (``cell/syncs``;
reads in a closure the loop hands to ``optimizer.step`` included). They never search the cell.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple, get_args

import libcst as cst

from gpu_notebook.cell.blocks import kept_graph_calls
from gpu_notebook.cell.loops import expression_step_loop
from gpu_notebook.cell.names import dotted, loop_target_names, names_in, position, targets_of, walk
from gpu_notebook.cell.scan import names_mentioned
from gpu_notebook.cell.syncs import summable_on_device
from gpu_notebook.cell.words import KEEPING_METHODS, LogKind
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    Tree,
    add_comment,
    assigned_names,
    expression,
    facts_of,
    for_loops,
    fresh_name,
    no_training_loop_reason,
    nodes_of,
    only_small,
    replace_nodes,
    training_loops,
    tree_of,
    wrap,
)
from gpu_notebook.fixes.records import Fix


def _is_plain_assign(stmt: cst.BaseStatement) -> bool:
    small = only_small(stmt)
    return isinstance(small, cst.Assign) and all(
        isinstance(t.target, cst.Name) for t in small.targets
    )


def _written(stmt: cst.BaseStatement) -> set[str]:
    return {name for name, _ in assigned_names(stmt)}


def _stored_into(stmt: cst.CSTNode, *, deep: bool = False) -> set[str]:
    """Containers an assignment of the line stores into (``metrics`` of ``metrics["loss"] =
    ...``): a gated store leaves them stale for whoever reads them on the other steps.
    ``deep``: the assignments in a compound statement's nested blocks too."""
    if not deep and not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    return {
        name
        for node in walk(stmt)
        if isinstance(node, cst.Assign)
        for target in targets_of(node)
        if isinstance(target, cst.Subscript)
        for name in names_in(target.value)
    }


def _added_to(stmt: cst.BaseStatement) -> list[str]:
    """Containers a statement line adds to (``losses`` of ``losses.append(loss.item())``)."""
    small = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
    names = []
    for line in small:
        call = line.value if isinstance(line, cst.Expr) else None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            name = dotted(call.func.value)
            if name is not None and call.func.attr.value in KEEPING_METHODS:
                names.append(name)
    return names


def _say_thinned(stmt: cst.BaseStatement, every: int) -> cst.BaseStatement:
    """A gated line that adds to a container says so: the list holds one value every N steps
    (what the program stores changes, and a user reading the patch sees it)."""
    names = _added_to(stmt)
    if not names:
        return stmt
    text = f"# gpucheck: `{names[0]}` now keeps one value every {every} steps"
    return add_comment(stmt, text=text)


Selector = Callable[[cst.BaseStatement], bool]


def _holding(nodes: set[cst.CSTNode]) -> Selector:
    """A statement line that holds one of ``nodes`` (an ``x += ...`` is summed, not gated)."""

    def holds(stmt: cst.BaseStatement) -> bool:
        return (
            isinstance(stmt, cst.SimpleStatementLine)
            and not any(isinstance(small, cst.AugAssign) for small in stmt.body)
            and any(node in nodes for node in walk(stmt))
        )

    return holds


def throttle_host_syncs(module: cst.Module, *, every: int = 10) -> CodemodResult:
    """Move per-step ``.item()``, ``float(t)`` and logs of tensors behind ``if step % every == 0:``.

    Steps where the condition holds behave exactly as before; the others skip the reads. A
    value read on every step by code that stays (``if loss_val < best: ...``) keeps its sync.
    ``total += loss.item()`` becomes ``total += loss.detach()`` (summed on the device) when
    ``total`` is otherwise only reset to a number or formatted in f-strings, where a 0-d tensor
    formats like a float; otherwise a comment marks the sync that remains.
    """
    return _throttle(module, every, accumulate=True)


THROTTLE_HOST_SYNCS = Fix(
    "throttle_host_syncs",
    "Read values from the GPU every N steps",
    (
        "Every .item(), float(tensor) or print of a tensor waits for the GPU to finish.",
        "Reading them every N steps lets the CPU queue the next steps while the GPU works.",
    ),
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
    "#avoid-unnecessary-cpu-gpu-synchronization",
    throttle_host_syncs,
)


def log_every_n(module: cst.Module, *, every: int = 10) -> CodemodResult:
    """Move logging calls (print, logger.*, wandb.log, writer.add_scalar...) and checkpoint
    saves (torch.save, save_pretrained...) behind a step gate.

    The training loops are patched, or the innermost loops that log when no loop calls
    ``.backward()``. Values computed only for those logs move with them.
    """
    return _throttle(module, every, accumulate=False)


LOG_EVERY_N = Fix(
    "log_every_n",
    "Log every N steps",
    (
        "Logging on every step costs Python time and usually a GPU sync.",
        "Logging every N steps keeps the step loop short; the logged steps are unchanged.",
    ),
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
    "#avoid-unnecessary-cpu-gpu-synchronization",
    log_every_n,
)


def _throttle(module: cst.Module, every: int, *, accumulate: bool) -> CodemodResult:
    """Gate the lines holding what the rule counted (the cell's facts: the fix acts on every
    read the finding names, and on nothing else); ``accumulate``: the reads, else the logs."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 2:
        raise ValueError(f"every must be an int of at least 2, not {every!r}")
    found, reads, logs = _found_by_rule(module, accumulate)
    chosen = _holding(set(found))
    # With the reads, the logs of what they read (`v = loss.item()` then `print(v)`).
    picks = _Picks(chosen, _holding(logs if accumulate else set()), reads)
    tree = tree_of(module)
    facts = facts_of(module)
    targets = list(training_loops(module))
    facts_by_loop = for_loops(module, facts.loops)
    shaped = expression_step_loop(facts.tree) if facts.tree is not None else None
    if not targets and not accumulate and not shaped:
        # No step loop: the innermost for loops of the facts that log (not where the step loop
        # is an expression: a for loop around it runs once per epoch, and its line holds the
        # whole comprehension).
        targets = [
            loop
            for loop in facts_by_loop
            if not any(tree.inside(other, loop.body) for other in facts_by_loop)
            and any(chosen(s) for s in _body(loop))
        ]
    elsewhere = _in_a_function(tree, found) if not targets and accumulate else None
    if elsewhere is not None and shaped is not None:
        # The read is in the step function a comprehension (or map) calls: act there.
        fn, node = elsewhere
        return Declined(
            f"`{tree.code(node).strip()}` runs in `{fn.name.value}`, which the training loop "
            f"(line {shaped.line}: `{shaped.text}`, an expression "
            f"gpucheck cannot patch) calls every step: return the tensor from it and read the "
            f"values once after the loop, or every {every} steps in a for loop"
        )
    if not targets:
        return Declined(no_training_loop_reason(module))
    used = names_mentioned(facts)

    edits: dict[cst.CSTNode, Replacement] = {}
    kept: list[cst.AugAssign] = []  # totals that must stay numbers: their sync remains
    gated = summed = False
    held: list[tuple[str, cst.BaseStatement]] = []
    stale: list[tuple[str, cst.BaseStatement]] = []
    for loop in targets:
        outside = names_mentioned(facts, skip=facts_by_loop[loop])
        moved = _movable(_body(loop), picks, outside, held, stale)
        inner = _closure_moves(loop, picks)
        if accumulate:
            for aug in _accumulations(loop, reads):
                calls = [c for c in walk(aug.value) if c in reads]
                assert facts.tree is not None and isinstance(aug.target, cst.Name)  # it parsed
                total = aug.target.value
                if summable_on_device(facts.tree, total) and all(map(_detachable, calls)):
                    edits.update(dict.fromkeys(calls, _detached))
                    summed = True
                else:
                    kept.append(aug)
        if moved or inner:
            step, rename = _step_variable(loop, used)
            used.add(step)
            if moved or rename:
                edits[loop] = _gate(moved, step, rename, every)
            for fn, fn_moved in inner.items():
                edits[fn] = _gate(fn_moved, step, False, every)
            gated = True
    if not (gated or summed):
        if kept:
            total = tree.code(kept[0]).strip()
            return Declined(
                f"`{total}` syncs every step and its total is used as a number; sum "
                ".detach() tensors instead and call .item() where the total is read"
            )
        if held:
            name, reader = held[0]
            line = next(
                (
                    tree.code(n).strip()
                    for n in walk(reader)
                    if isinstance(n, cst.SimpleStatementLine) and name in names_in(n)
                ),
                tree.code(reader).strip().splitlines()[0],
            )
            return Declined(
                f"`{name}` is read in the loop (`{line}`) on steps a gate every {every} would "
                f"skip: it would read a stale value there; append the tensor ({name} of "
                f"`loss.detach()`) and call .item() only where `{name}` is read"
            )
        if stale and accumulate:
            # The reads are there, every step, but what they set is read after the loop (an
            # epoch's print of the last step's accuracy): a gate would print a stale value.
            name, stmt = stale[0]
            return Declined(
                f"`{tree.code(stmt).strip().splitlines()[0]}` reads a value every step, and "
                f"`{name}` is read outside the loop: a gate every {every} steps would leave it "
                f"stale there; keep the tensor in the loop (no .item()) and read it once where "
                f"`{name}` is read"
            )
        elsewhere = _in_a_function(tree, found)
        if elsewhere is not None:
            # The read the rule counts is in a step function the loop calls (train_step's
            # `return loss.item()`): no step counter there to gate it on; say where to act.
            fn, node = elsewhere
            # A counter name the code does not hold (unseen 39's helper is named `step`).
            counter = fresh_name(used, ("step", "batch_idx", "gpucheck_step"))
            return Declined(
                f"`{tree.code(node).strip()}` runs in `{fn.name.value}`, which the training loop "
                f"calls every step: return the tensor from it and read it in the loop every "
                f"{every} steps (`if {counter} % {every} == 0:`)"
            )
        what = (
            "per-step .item(), float(tensor) or print of a tensor" if accumulate else "logging call"
        )
        return Declined(f"the training loop has no {what} outside an if (nothing to throttle)")
    for aug in kept:
        stmt = tree.statement_of(aug)
        if stmt is not None and "# gpucheck:" not in tree.code(stmt):
            edits[stmt] = functools.partial(
                add_comment,
                text="# gpucheck: this still syncs every step (the total is used as a number)",
            )
    detail = ", ".join(
        text
        for text, done in ((f"every {every} steps", gated), ("sums on the device", summed))
        if done
    )
    return Edited(replace_nodes(module, edits), detail)


def validate_every_n(module: cst.Module, *, every: int = 10) -> CodemodResult:
    """Gate the validation inside the training loop (``model.eval()``, a ``torch.no_grad()``
    block, a validation loop or ``evaluate(...)``: the facts' ``validation``) behind
    ``if step % every == 0:``, with the lines that only use what it computes
    (``history.append(float(acc))``).

    Declined where the validation is no statement group of the step loop's own body (inside
    another statement, or in a function the loop calls), or where a line that stays every step
    reads what it computes (a scheduler stepping on the validation loss): it would read a stale
    value, or none before the first validation.
    """
    if isinstance(every, bool) or not isinstance(every, int) or every < 2:
        raise ValueError(f"every must be an int of at least 2, not {every!r}")
    facts = facts_of(module)
    lines = [line for line in facts.validation if not line.gated]
    if not lines:
        return Declined("no validation inside the training loop outside an if (nothing to gate)")
    elsewhere = next((line for line in lines if line.origin is not None), None)
    if elsewhere is not None and elsewhere.origin is not None:
        return Declined(
            f"the validation (`{elsewhere.text}`) runs in {elsewhere.origin.function}, which "
            f"the training loop calls every step: gate it there (`if step % {every} == 0:`)"
        )
    tree = tree_of(module)
    found = nodes_of(module, [line.node for line in lines])
    targets = training_loops(module)
    used = names_mentioned(facts)
    edits: dict[cst.CSTNode, Replacement] = {}
    for loop in targets:
        body = _body(loop)
        mine = [node for node in found if tree.inside(node, loop.body)]
        if not mine:
            continue
        tops = {i for i, stmt in enumerate(body) for node in mine if _holds(stmt, {node})}
        # The statement holding it must be validation alone: one that also trains (a `try:`
        # or `with` around the whole step) is no group to gate.
        mixed = next((i for i in sorted(tops) if not _uses_validation(body[i], deep=True)), None)
        if mixed is not None:
            line = tree.code(body[mixed]).strip().splitlines()[0]
            return Declined(
                f"the validation sits in `{line}` with the training step's own calls: move it "
                f"out of that block, then put it under `if step % {every} == 0:`"
            )
        moved, stale = _with_users(body, tops)
        if stale is not None:
            reader, names = stale
            return Declined(
                f"`{tree.code(body[reader]).strip().splitlines()[0]}` reads "
                f"{', '.join(f'`{n}`' for n in names)} on every step, which the validation "
                f"computes: gated every {every} steps it would read a stale value (or none "
                "before the first validation); gate that line with it, or validate once an "
                "epoch"
            )
        step, rename = _step_variable(loop, used)
        used.add(step)
        edits[loop] = _gate(moved, step, rename, every)
    if not edits:
        return Declined("the validation is in no training loop of this cell")
    return Edited(replace_nodes(module, edits), f"every {every} steps")


def _bound_in(stmt: cst.CSTNode) -> set[str]:
    """Every plain name ``stmt`` binds, in nested blocks too (``acc`` of ``with no_grad():
    acc = ...``), and the containers it stores into."""
    targets: list[cst.CSTNode] = []
    for node in walk(stmt):
        if isinstance(node, cst.Assign):
            targets += [t.target for t in node.targets]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
            targets.append(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets.append(node.asname.name)
    names = {n.value for t in targets for n in walk(t) if isinstance(n, cst.Name)}
    return names | _stored_into(stmt, deep=True)


def _with_users(
    body: list[cst.BaseStatement], tops: set[int]
) -> tuple[list[int], tuple[int, list[str]] | None]:
    """The statements to gate: the validation's (``tops``) and the lines that use only what it
    computes (``history.append(float(acc))``), closed until nothing changes; and the first
    statement left every step that reads what they bind, with those names (None: none)."""
    chosen = set(tops)
    bound = [_bound_in(stmt) for stmt in body]
    reads = [names_in(stmt) for stmt in body]
    changed = True
    while changed:
        changed = False
        made = set().union(*(bound[i] for i in chosen))
        for j, stmt in enumerate(body):
            if j in chosen or not (reads[j] & made) or not _uses_validation(stmt):
                continue
            others = set().union(
                *(reads[k] for k in range(len(body)) if k != j and k not in chosen)
            )
            if not (bound[j] & others):
                chosen.add(j)
                changed = True
    made = set().union(*(bound[i] for i in chosen))
    for j in range(len(body)):
        if j not in chosen and reads[j] & made:
            return sorted(chosen), (j, sorted(reads[j] & made))
    return sorted(chosen), None


def _uses_validation(stmt: cst.BaseStatement, *, deep: bool = False) -> bool:
    """A line that may move with the validation (``_with_users`` checks it uses only what the
    validation computes): never one of the training step's own calls; ``deep``: a compound
    statement too (the validation's own block)."""
    return (deep or isinstance(stmt, cst.SimpleStatementLine)) and not any(
        isinstance(n, cst.Call)
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value in ("backward", "step", "zero_grad")
        for n in walk(stmt)
    )


VALIDATE_EVERY_N = Fix(
    "validate_every_n",
    "Validate every N steps",
    (
        "A validation pass inside every training step costs a forward over the held-out data.",
        "Validating every N steps keeps the curve; the training steps are unchanged.",
    ),
    "https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html",
    validate_every_n,
)


def _in_a_function(
    tree: Tree, found: list[cst.CSTNode]
) -> tuple[cst.FunctionDef, cst.CSTNode] | None:
    """The first of ``found`` (in the cell's order) that is inside a function, with it."""
    for node in found:
        fn = tree.nearest(node, cst.FunctionDef)
        if fn is not None:
            return fn, tree.statement_of(node) or node
    return None


def _found_by_rule(
    module: cst.Module, syncs: bool
) -> tuple[list[cst.CSTNode], set[cst.CSTNode], set[cst.CSTNode]]:
    """The libcst nodes of what the rule counts on every step: the reads of device values
    (``syncs``; those deciding a branch, and explicit synchronize() calls, are left alone) or
    the logging calls, a logged tensor included; the cell's ``.item()``/``float(t)`` reads
    (summed on the device, or pulled in with the logs they feed); the per-step logs. What the
    rule counts comes in the cell's order."""
    facts = facts_of(module)
    lines = [
        line
        for line in (
            facts.syncs
            if syncs
            else (*facts.logging, *facts.saves, *facts.collects, *facts.state_copies, *facts.syncs)
        )
        if not line.gated
        and not line.needed
        and (line.kind != "synchronize" if syncs else line.kind in _LOG_KINDS or line.logged)
    ]
    reads = [
        node
        for line in facts.syncs
        if line.kind in ("item", "float")
        for node in (line.node, *line.others)
    ]
    logs = [
        line.node
        for line in (*facts.logging, *facts.saves, *facts.collects, *facts.state_copies)
        if not line.gated
    ]
    return (
        nodes_of(module, sorted((line.node for line in lines), key=position)),
        set(nodes_of(module, reads)),
        set(nodes_of(module, logs)),
    )


# A copy of the whole state (cell.syncs.state_copies) is gated as a checkpoint save is.
_LOG_KINDS = frozenset({*get_args(LogKind), "print-tensor", "log-tensor", "state-copy"})


def _body(loop: cst.For) -> list[cst.BaseStatement]:
    return list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []


def _closure_moves(loop: cst.For, picks: _Picks) -> dict[cst.FunctionDef, list[int]]:
    """Reads inside a function the loop defines each step (LBFGS's ``closure``, which
    ``optimizer.step(closure)`` calls many times a step): gated inside that function, on the
    loop's step counter (the function reads it when it is called, within the step)."""
    out: dict[cst.FunctionDef, list[int]] = {}
    for stmt in _body(loop):
        if not isinstance(stmt, cst.FunctionDef) or not isinstance(stmt.body, cst.IndentedBlock):
            continue
        moved = _movable(list(stmt.body.body), picks, set())
        if moved:
            out[stmt] = moved
    return out


class _Picks(NamedTuple):
    select: Selector  # the lines holding what the rule counted
    follows: Selector  # logs that move with the values they read
    reads: set[cst.CSTNode]  # the cell's .item()/float(t) reads


def _movable(
    body: list[cst.BaseStatement],
    picks: _Picks,
    outside: set[str],
    held: list[tuple[str, cst.BaseStatement]] | None = None,
    stale: list[tuple[str, cst.BaseStatement]] | None = None,
) -> list[int]:
    """Indices of the statements to gate, closed over the values they compute for each other.

    Starts from every candidate (selected statements, ``v = t.item()`` lines that may only
    feed them, logs that may only read them) and drops, until nothing changes, any that writes
    a name read by a statement that stays ungated or by code outside the loop (which would see
    a stale value or none), any pulled-in line that no gated statement reads, and any log that
    reads nothing a gated statement writes. The set only shrinks: it ends. ``held`` gets each
    (list, reading line) that kept a line adding to that list ungated; ``stale`` each (name,
    line) of a selected line kept ungated because code outside the loop reads what it sets.
    """
    selected = {i for i, stmt in enumerate(body) if picks.select(stmt)}
    pulled = {i for i, s in enumerate(body) if _is_plain_assign(s) and _holds(s, picks.reads)}
    pulled -= selected
    follows = {i for i, stmt in enumerate(body) if picks.follows(stmt)} - selected - pulled
    chosen = selected | pulled | follows
    readers = [names_in(stmt) for stmt in body]
    writes = [_written(stmt) | _stored_into(stmt) for stmt in body]
    # A list the gated line adds to holds one value every N steps: said after the loop (the
    # patch's comment), but a line of the loop that reads it on other steps (`hist[-1]` in a
    # live display, `losses[step]`) would show a stale value or fail: it stays every step.
    added = [set(_added_to(stmt)) for stmt in body]
    changed = True
    while changed:
        changed = False
        for i in sorted(chosen):
            written = writes[i]
            if stale is not None and i in selected and written & outside:
                stale.append((sorted(written & outside)[0], body[i]))
            read_elsewhere = bool(written & outside) or any(
                readers[j] & (written | added[i])
                for j in range(len(body))
                if j != i and j not in chosen
            )
            if held is not None and not (written & outside):
                held.extend(
                    (name, body[j])
                    for j in range(len(body))
                    if j != i and j not in chosen
                    for name in sorted(readers[j] & added[i])
                )
            unused = i in pulled and not any(readers[j] & written for j in chosen if j != i)
            unfed = i in follows and not any(readers[i] & writes[j] for j in chosen if j != i)
            if read_elsewhere or unused or unfed:
                chosen.discard(i)
                changed = True
    return sorted(chosen)


def _holds(node: cst.CSTNode, reads: set[cst.CSTNode]) -> bool:
    return any(n in reads for n in walk(node))


def _accumulations(loop: cst.For, reads: set[cst.CSTNode]) -> list[cst.AugAssign]:
    return [
        node
        for node in walk(loop.body)
        if isinstance(node, cst.AugAssign)
        and isinstance(node.target, cst.Name)
        and _holds(node.value, reads)
    ]


def _detachable(read: cst.CSTNode) -> bool:
    """A read of the facts that ``.detach()`` replaces: ``x.item()`` or ``float(t)`` (not
    ``int(t)``, which also rounds)."""
    return isinstance(read, cst.Call) and (
        isinstance(read.func, cst.Attribute) or dotted(read.func) == "float"
    )


def _detached(call: cst.Call) -> cst.Call:
    """``x.item()`` -> ``x.detach()``, ``float(t)`` -> ``(t).detach()``."""
    if isinstance(call.func, cst.Attribute):  # .item()
        return call.with_changes(func=call.func.with_changes(attr=cst.Name("detach")))
    value = _parenthesized(call.args[0].value)
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name("detach")))


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _step_variable(loop: cst.For, used: set[str]) -> tuple[str, bool]:
    """The loop's step counter: its range or enumerate index, or a fresh name (True: add
    enumerate)."""
    counters = loop_target_names(loop)[1]
    enumerated = isinstance(loop.iter, cst.Call) and dotted(loop.iter.func) == "enumerate"
    if _strides(loop):  # `range(0, n, 64)`: its index counts samples, not steps
        counters = set()
    if len(counters) == 1 and not (enumerated and counters == {"_"}):  # `_`: name the index
        return counters.pop(), False
    return fresh_name(used, ("step", "batch_idx", "gpucheck_step")), True


def _strides(loop: cst.For) -> bool:
    """The loop runs over ``range(start, stop, step)`` with a step other than a literal 1."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) == "range" and len(it.args) >= 3):
        return False
    step = it.args[2].value
    return not (isinstance(step, cst.Integer) and step.evaluated_value == 1)


def _gate(moved: list[int], step: str, rename: bool, every: int) -> Replacement:
    """Gate the statements ``moved`` of a loop's (or a function's) body; ``rename``: enumerate."""

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
            gated = wrap(gate, [body[i] for i in run])
            assert isinstance(gated.body, cst.IndentedBlock)
            inner = [_say_thinned(stmt, every) for stmt in gated.body.body]
            out.append(gated.with_changes(body=gated.body.with_changes(body=inner)))
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
        and dotted(loop.iter.func) == "enumerate"
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


def detach_kept_tensors(module: cst.Module, *, names: str = "") -> CodemodResult:
    """Store ``NAME.detach()`` where the loop stores a tensor that carries its graph: the calls
    the memory rule found (``cell/blocks.kept_graph_calls``), edited where they stand.

    ``names``: comma-separated names to treat as such tensors (default: the names the loop
    calls ``.backward()`` on, and the outputs of the model).
    """
    if not training_loops(module):
        return Declined("no training loop (a for loop that calls .backward()) in this cell")
    wanted = frozenset(n.strip() for n in names.split(",") if n.strip())
    facts = facts_of(module)
    assert facts.tree is not None  # it has a training loop: it parsed
    found = nodes_of(module, kept_graph_calls(facts.tree.tree, facts.model_names, wanted))
    if not found:
        return Declined(
            "the loop does not store a tensor with its graph (e.g. history.append(loss))"
        )
    edits: dict[cst.CSTNode, Replacement] = {}
    for call in found:
        value = call.args[-1].value
        detached = cst.Call(func=cst.Attribute(value=value, attr=cst.Name("detach")))
        edits[call.args[-1]] = functools.partial(cst.Arg.with_changes, value=detached)
    stored = sorted({dotted(call.args[-1].value) or "" for call in found})
    return Edited(replace_nodes(module, edits), ", ".join(f"{n}.detach()" for n in stored))


DETACH_KEPT_TENSORS = Fix(
    "detach_kept_tensors",
    "Keep values, not graphs",
    (
        "Storing the loss each step keeps its autograd graph alive: memory grows every step.",
        ".detach() keeps the value on the device without the graph (and without a sync).",
    ),
    "https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory",
    detach_kept_tensors,
)
