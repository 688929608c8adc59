"""Per-step host reads of device values (syncs) and logging calls in loops, found in one pass.

A call in a loop is a sync when it reads a value the loop made (``.item()``, ``.cpu()``,
``float(loss)``, printing or logging a tensor, an f-string field of one) and a logging call when
it reads no tensor. A sync whose value decides a branch (``if loss.item() < x: break``) is
``needed``: it cannot be skipped.
"""

from __future__ import annotations

import ast
import dataclasses

from gpu_notebook.cell.facts import SourceLine, SyncKind
from gpu_notebook.cell.host_made import (
    cpu_batch_names,
    device_by_default,
    host_made_names,
    moved_at,
    reads_host_made,
    to_device,
)
from gpu_notebook.cell.names import (
    NAMES_HELD,
    dotted,
    keyword_value,
    logs_with,
    loop_target_names,
    method_of,
    names_held,
    names_in,
    receiver_of,
    targets_of,
)
from gpu_notebook.cell.tree import CellTree, Function, Loop
from gpu_notebook.cell.words import CONSTRUCTORS, HOST_READ_METHODS, REDRAW_METHODS, last

# Values that are plain Python numbers once assigned: reading them later costs no sync.
_HOST_VALUE_CALLS = frozenset(
    {"len", "range", "int", "float", "str", "round", "time", "perf_counter", "monotonic"}
)


# Reads that record no operator when the tensor is on the CPU already: ``.cpu()`` (and
# ``.to("cpu")``) return the tensor itself, ``.numpy()`` and ``.tolist()`` read its memory. On a
# GPU each copies the value to the host and waits for the kernels that make it.
_UNTRACED_ON_CPU: frozenset[SyncKind] = frozenset({"cpu", "numpy", "tolist"})


def reads_no_cpu_trace_records(syncs: tuple[SourceLine, ...]) -> int:
    """The lines of the step loop that read a device value every step by ``.cpu()``,
    ``.numpy()`` or ``.tolist()`` alone, one a line (``.cpu().numpy()`` is one read). A line that
    also reads by ``.item()``, ``float()`` or formatting is left to the trace, which records that
    read (``aten::item``) on the CPU too; a gated read (some steps only) and one under a test
    for CUDA (counted apart) are left out."""
    traced = {s.line for s in syncs if s.kind not in _UNTRACED_ON_CPU}
    return len(
        {
            (s.origin, s.line)
            for s in syncs
            if s.kind in _UNTRACED_ON_CPU
            and s.step_loop_line is not None
            and not s.gated
            and not s.cuda_only
            and s.line not in traced
        }
    )


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)

# The methods a framework calls on every training step, by the base class of the cell's class
# that defines them: Lightning's LightningModule and Callback (the hooks its fx_validator lets
# log on every step), the HF Trainer's TrainerCallback and a Trainer subclass's loss.
_STEP_HOOKS = {
    "LightningModule": frozenset({
        "training_step", "on_train_batch_start", "on_train_batch_end", "on_before_backward",
        "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad",
    }),
    "Callback": frozenset({
        "on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
        "on_before_optimizer_step", "on_before_zero_grad",
    }),
    "TrainerCallback": frozenset({
        "on_step_begin", "on_step_end", "on_substep_end", "on_pre_optimizer_step",
        "on_optimizer_step",
    }),
    "Trainer": frozenset({"compute_loss", "training_step"}),
}  # fmt: skip


def hook_reads(tree: CellTree) -> tuple[SourceLine, ...]:
    """Host reads of device values in the methods a framework calls every training step
    (``on_train_batch_end``'s ``outputs["loss"].cpu()``), ungated in their method, each with
    ``called_in`` its ``Class.method``. The cell holds no loop around them: the framework's is
    the step loop (unseen round 15: a Lightning hook's ``.cpu()`` every step read as "the host
    runs ahead of the GPU (no per-step read)")."""
    found: dict[tuple[int, str], SourceLine] = {}
    for cls in ast.walk(tree.tree):
        if not isinstance(cls, ast.ClassDef) or not tree.in_cell(cls):
            continue
        hooks = frozenset().union(
            *(_STEP_HOOKS.get(last(dotted(b) or ""), frozenset()) for b in cls.bases)
        )
        for fn in cls.body:
            if not isinstance(fn, _FUNCTIONS) or fn.name not in hooks:
                continue
            values = _callee_values(fn)
            for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call)):
                kind = _sync_kind(tree, call, values)
                if kind is None or tree.nearest(call, _FUNCTIONS) is not fn or tree.gated(call, fn):
                    continue
                line = dataclasses.replace(
                    tree.source_line(call, kind), called_in=f"{cls.name}.{fn.name}"
                )
                found.setdefault((line.line, kind), line)
    return tuple(sorted(found.values(), key=lambda s: s.line))


def untraced_hook_reads(reads: tuple[SourceLine, ...]) -> int:
    """The lines of ``hook_reads`` that read by ``.cpu()``, ``.numpy()`` or ``.tolist()`` alone:
    on the CPU no operator records them (``reads_no_cpu_trace_records`` for the cell's loops)."""
    traced = {s.line for s in reads if s.kind not in _UNTRACED_ON_CPU}
    return len({s.line for s in reads if s.kind in _UNTRACED_ON_CPU and s.line not in traced})


_ASSIGNS = (ast.Assign, ast.AugAssign, ast.AnnAssign)


def syncs_and_logging(tree: CellTree) -> tuple[tuple[SourceLine, ...], tuple[SourceLine, ...]]:
    syncs: dict[tuple[int, str], SourceLine] = {}
    logging: dict[int, SourceLine] = {}
    values_of: dict[int, set[str]] = {id(loop): _batch_values(tree, loop) for loop in tree.loops}
    shown = not device_by_default(tree)  # else no value is shown on the CPU
    cpu_of = {
        id(loop): host_made_names(loop, cpu_batch_names(loop)) if shown else set()
        for loop in tree.loops
    }
    for call in tree.calls():
        through = tree.run_by_step(call)
        if through is not None and tree.step_loop_of(call) is None:
            # In the model's forward (or a helper the step calls): a read there every step.
            in_callee = _read_in_callee(tree, call, *through, shown=shown)
            if in_callee is not None:
                syncs.setdefault((in_callee.line, in_callee.kind), in_callee)
            continue
        # In a loop, or in a step function a step loop calls (train_step's `loss.item()`).
        loop = tree.enclosing_loop(call)
        values = values_of[id(loop)] if loop is not None else set()
        if loop is None and (loop := tree.step_loop_of(call)) is not None:
            # In a step function: the tensors it makes are its own (`loss` of `float(loss)`),
            # not the loop's batch (unseen 39's nested helper: its float(loss) went unread).
            holder = tree.nearest(call, (ast.FunctionDef, ast.AsyncFunctionDef))
            values = values_of[id(loop)] | (_callee_values(holder) if holder else set())
        if loop is None or _builds_once(tree, loop):
            continue
        kind = _sync_kind(tree, call, values)
        if kind is not None and _host_lengths(tree, call, loop):
            continue
        if kind is not None and shown and reads_host_made(call, cpu_of[id(loop)]):
            continue  # a tensor made on the CPU and kept there: no device read on a GPU either
        if kind is not None:
            line = tree.source_line(call, kind)
            decides = _decides(tree, call, loop)
            if decides:
                line = dataclasses.replace(
                    line,
                    needed=True,
                    handed_to=_host_callee(tree, call),
                    stops=any(_can_stop(test) for test in decides),
                )
            elif (feeds := feeds_the_step(tree, call, loop)) is not None:
                line = dataclasses.replace(line, needed=True, feeds=feeds)
            first = syncs.setdefault((line.line, kind), line)
            if first is not line:
                syncs[(line.line, kind)] = dataclasses.replace(first, others=(*first.others, call))
            continue
        log_kind = logs_with(call)
        if log_kind is None:
            continue
        read = set()
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            read |= _unwrapped_names(arg)
        if read & values and log_kind not in ("checkpoint", "collect"):
            # Printing or logging a tensor formats it on the host: a device sync per step.
            tensor_kind: SyncKind = "print-tensor" if log_kind == "print" else "log-tensor"
            line = tree.source_line(call, tensor_kind)
            syncs.setdefault((line.line, tensor_kind), line)
        else:
            line = tree.source_line(call, log_kind)
            logging.setdefault(line.line, line)
    for branch in ast.walk(tree.tree):
        if isinstance(branch, _BRANCHES):
            truth = _truth_read(tree, branch, values_of, cpu_of, shown=shown)
            if truth is not None and not any(key[0] == truth.line for key in syncs):
                syncs[(truth.line, "bool")] = truth
    # An f-string field of a 0-d tensor calls Tensor.__format__ -> .item(): a sync, even
    # when the string is only stored (`msg = f"{loss:.3f}"`) and logged later.
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.FormattedValue):
            continue
        loop = tree.enclosing_loop(node)
        if loop is None or _builds_once(tree, loop):
            continue
        if not _unwrapped_names(node.value) & values_of[id(loop)]:
            continue
        line = tree.source_line(node, "fstring-tensor")
        if not any(key[0] == line.line for key in syncs):
            syncs[(line.line, "fstring-tensor")] = line
    sync_lines = {s.line for s in syncs.values()}
    logged = {v.line for v in logging.values()} & sync_lines
    syncs = {
        k: dataclasses.replace(v, logged=True) if v.line in logged else v for k, v in syncs.items()
    }
    return (
        tuple(sorted(syncs.values(), key=lambda s: s.line)),
        tuple(
            sorted((v for v in logging.values() if v.line not in sync_lines), key=lambda s: s.line)
        ),
    )


def _truth_read(
    tree: CellTree,
    branch: ast.If | ast.While | ast.IfExp | ast.Assert,
    values_of: dict[int, set[str]],
    cpu_of: dict[int, set[str]],
    *,
    shown: bool,
) -> SourceLine | None:
    """A branch of the step (in its loop, or in a function the step runs through its calls:
    the model's ``forward``) whose test is a tensor's truth value: ``if not
    torch.isfinite(norm): continue`` after clipping, ``if torch.isnan(loss).any(): break``, an
    early exit's ``if torch.all(conf > t): return``. Tensor.__bool__ reads the device every
    time the test runs, with no ``.item()`` written (unseen round 14: such a guard was in no
    fact, and a GPU run's sync wait read "not in this cell's source" with the read-less-often
    patch offered). Needed: the branch cannot run without the value."""
    through = tree.run_by_step(branch)
    if through is not None and tree.step_loop_of(branch) is None:
        loop, name, fn = through
        values, cpu = _callee_values(fn), host_made_names(fn, set())
    else:
        found = tree.enclosing_loop(branch) or tree.step_loop_of(branch)
        if found is None or _builds_once(tree, found):
            return None
        loop, name, values, cpu = found, None, values_of[id(found)], cpu_of[id(found)]
    test = _tensor_truth(branch.test, values)
    if test is None:
        return None
    predicate = next(n for n in ast.walk(test) if _tensor_predicate(n, values))
    if shown and isinstance(predicate, ast.Call) and reads_host_made(predicate, cpu):
        return None  # a tensor made on the CPU and kept there: no device read on a GPU either
    line = tree.source_line(test, "bool", step_loop=loop if name is not None else None)
    stops = name is None and _can_stop(branch)  # a forward's `return` ends no loop
    return dataclasses.replace(line, needed=True, stops=stops, called_in=name)


# torch's predicates whose result is a tensor (``torch.isnan(loss)``) or a bool read from the
# device (``torch.equal``): a branch on one reads a device value.
_TORCH_PREDICATES = frozenset(
    {"isfinite", "isnan", "isinf", "isposinf", "isneginf", "any", "all", "equal", "allclose"}
)
# Their method forms, called on a tensor (``(g > 1e3).any()``, ``loss.isnan()``).
_PREDICATE_METHODS = frozenset({"any", "all", "isfinite", "isnan", "isinf", "allclose", "equal"})


def _tensor_truth(test: ast.AST, values: set[str]) -> ast.AST | None:
    """The part of a branch test whose truth value is a tensor's, or None. A test that reads
    by ``.item()``/``float()`` already is the call scan's; a comparison of names alone (``if
    loss < best:``) is left out: nothing here tells a tensor from a float."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _tensor_truth(test.operand, values)
    if isinstance(test, ast.BoolOp):
        return next((r for v in test.values if (r := _tensor_truth(v, values)) is not None), None)
    if isinstance(test, ast.Compare):
        sides = (test.left, *test.comparators)
        return test if any(_tensor_predicate(side, values) for side in sides) else None
    return test if _tensor_predicate(test, values) else None


def _tensor_predicate(node: ast.AST, values: set[str]) -> bool:
    """``node`` is a torch predicate (``torch.isnan(x)``) or a predicate method called on a
    tensor of the step (``x.isnan()``, ``(g > 1e3).any()``); a numpy or math receiver is not."""
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func) or ""
    if name.startswith("torch.") and last(name) in _TORCH_PREDICATES:
        return True
    method = method_of(node)
    if method not in _PREDICATE_METHODS or (method in ("any", "all") and node.args):
        return False  # `.any(dim)` is a tensor of many values: no truth value to branch on
    receiver = receiver_of(node)
    if receiver is None:
        return False
    root = dotted(receiver.func) if isinstance(receiver, ast.Call) else None
    if root is not None and root.split(".")[0] in ("np", "numpy", "math"):
        return False
    return _tensor_predicate(receiver, values) or bool(names_in(receiver) & values)


def redraws(tree: CellTree) -> tuple[SourceLine, ...]:
    """Progress-bar calls in a loop that redraw the bar on every call: ``bar.set_postfix(...)``,
    ``set_description(...)`` with no ``refresh`` argument or ``refresh=True`` (tqdm's default,
    which bypasses its mininterval). A ``refresh`` given any other way (``refresh=False``, a
    name, a second positional argument, ``**kwargs``) is the user's choice: left out."""
    found: dict[int, SourceLine] = {}
    for call in tree.calls():
        loop = tree.enclosing_loop(call) or tree.step_loop_of(call)
        if loop is None or _builds_once(tree, loop):
            continue
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in REDRAW_METHODS):
            continue
        refresh = [k.value for k in call.keywords if k.arg == "refresh"]
        if len(call.args) > 1 or any(k.arg is None for k in call.keywords):
            continue
        if refresh and not (isinstance(refresh[0], ast.Constant) and refresh[0].value is True):
            continue
        line = tree.source_line(call, "redraw")
        found.setdefault(line.line, line)
    return tuple(sorted(found.values(), key=lambda s: s.line))


def _builds_once(tree: CellTree, loop: Loop) -> bool:
    """A loop in a constructor (a dataset's ``__init__`` building its items): it runs when the
    object is made, once, not on every step (unless it trains itself)."""
    if id(loop) in tree.step_loops:
        return False
    holder = next(
        (a for a in tree.ancestors(loop) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))),
        None,
    )
    return holder is not None and holder.name in CONSTRUCTORS


def _sync_kind(tree: CellTree, call: ast.Call, values: set[str]) -> SyncKind | None:
    method = method_of(call)
    if method is not None and dotted(receiver_of(call)) in tree.models:
        return None  # model.cpu() / model.to("cpu") moves weights once, not a per-step read
    if method == "item" and not call.args:
        return "item"
    if method in ("cpu", "numpy", "tolist") and not call.args:
        return method  # type: ignore[return-value]  # the three literals of SyncKind
    if method == "to" and call.args:
        text = ast.unparse(call.args[0]).lower()
        if "cpu" in text:
            return "cpu"
    name = dotted(call.func)
    if name in ("float", "int", "bool") and len(call.args) == 1:
        arg = call.args[0]
        return "float" if names_in(arg) & values and not _host_value(arg) else None
    if name is not None and last(name) == "synchronize":
        return "synchronize"
    return None


# Functions that take a batch's sequence lengths on the CPU (``lengths``, the second argument):
# torch.nn.utils.rnn keeps them there, as the PackedSequence's ``batch_sizes``.
_PACKS = frozenset({"pack_padded_sequence"})
# Calls that put a tensor on a device other than the CPU.


def _host_lengths(tree: CellTree, call: ast.Call, loop: Loop) -> bool:
    """``lengths.cpu()`` (or ``.tolist()``, ``.to("cpu")``) handed to ``pack_padded_sequence``,
    which takes its lengths on the CPU, where ``lengths`` is no tensor the loop puts on a
    device: a CPU tensor made CPU again, no read of a device value (a collate function's
    lengths stay on the CPU while the loop moves the batch's tensors). A ``lengths`` the loop
    moves to the device is read back here: a read."""
    name = _packed_lengths(tree, call)
    if name is None:
        return False
    for node in ast.walk(loop):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or node.value is None:
            continue
        if name in {n for t in targets_of(node) for n in names_in(t)} and to_device(node.value):
            return False
    return True


def _read_in_callee(
    tree: CellTree, call: ast.Call, loop: Loop, name: str, fn: Function, *, shown: bool = True
) -> SourceLine | None:
    """A host read in ``fn``, a function of the cell the step loop runs every step through its
    calls (``Net.forward``): its fact, needed (the value feeds the step's work, which no gate
    can skip), or None. ``pack_padded_sequence(x, lengths.cpu())`` of lengths the loop hands
    over as the loader made them (on the CPU) reads nothing; of lengths the loop moved to the
    device it is a read, and the fact names the line that moved them (``keep_on_host``)."""
    values = _callee_values(fn)
    kind = _sync_kind(tree, call, values)
    if kind == "float" and not _unwrapped_names(call.args[0]) & values:
        return None  # int(x.size(0)), float(len(xs)): sizes, no tensor's value
    if kind is None or (shown and reads_host_made(call, host_made_names(fn, set()))):
        return None
    keep = None
    given = _packed_lengths(tree, call)
    if given is not None:
        handed = _argument_at_sites(tree, fn, given, loop)
        if shown and handed is not None and handed in cpu_batch_names(loop):
            return None  # the loader's CPU lengths: .cpu() of a CPU tensor
        keep = moved_at(tree, loop, handed) if handed is not None else None
    line = tree.source_line(call, kind, step_loop=loop)
    return dataclasses.replace(
        line, needed=True, called_in=name, handed_to=_host_callee(tree, call), keep_on_host=keep
    )


def _callee_values(fn: Function) -> set[str]:
    """Names in ``fn`` that likely hold tensors: its parameters and what it assigns from
    anything but a Python number (``self`` left out)."""
    values = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for node in ast.walk(fn):
        value = getattr(node, "value", None) if isinstance(node, _ASSIGNS) else None
        if value is not None and not _host_value(value):
            values |= {n for t in targets_of(node) for n in names_in(t)}
    values.discard("self")
    return values | _iterated_values(fn, values)


def _iterated_values(fn: Function, values: set[str]) -> set[str]:
    """Names bound by iterating over a tensor the function holds: ``s`` of ``for s in t`` or of
    ``[f(int(s)) for s in t]``, ``s`` of ``enumerate(t)`` (unseen round 17: a DDPM forward's
    ``int(s)`` per sample of its timesteps read the device 64 times a step, in no fact).
    ``range(x.size(0))`` iterates over host numbers: its names are not bound here."""
    found: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            continue
        it: ast.expr = node.iter
        target: ast.expr | None = node.target
        if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and len(it.args) == 1:
            it, pair = it.args[0], node.target
            target = pair.elts[1] if isinstance(pair, ast.Tuple) and len(pair.elts) == 2 else None
        if target is not None and isinstance(it, ast.Name) and it.id in values:
            found |= names_in(target)
    return found


def _packed_lengths(tree: CellTree, call: ast.Call) -> str | None:
    """The name whose ``.cpu()`` (``.tolist()``, ``.to("cpu")``) ``call`` is, where it is the
    lengths argument of ``pack_padded_sequence``; else None."""
    pack = next((a for a in tree.ancestors(call) if not isinstance(a, ast.keyword)), None)
    if not isinstance(pack, ast.Call) or last(dotted(pack.func)) not in _PACKS:
        return None
    given = keyword_value(pack, "lengths")
    if given is None and len(pack.args) >= 2:
        given = pack.args[1]
    return dotted(receiver_of(call)) if given is call else None


def _argument_at_sites(tree: CellTree, fn: Function, param: str, loop: Loop) -> str | None:
    """The loop's name every call of ``fn`` in ``loop`` hands as parameter ``param``
    (``model(x, lengths)`` for ``forward(self, x, lengths)``); None when they differ, a call
    of it is elsewhere, or the argument is no plain name."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if tree.nearest(fn, (ast.ClassDef, *_FUNCTIONS)).__class__ is ast.ClassDef and params:
        params = params[1:]  # self: the instance, not an argument of the call
    handed: set[str | None] = set()
    for site in tree.step_calls.sites.get(id(fn), []):
        if not tree.inside(site, loop):
            return None
        given = keyword_value(site, param)
        if given is None and param in params and params.index(param) < len(site.args):
            given = site.args[params.index(param)]
        handed.add(given.id if isinstance(given, ast.Name) else None)
    return next(iter(handed)) if len(handed) == 1 else None


def _decides(tree: CellTree, node: ast.AST, loop: Loop) -> list[ast.AST]:
    """The branches of ``loop`` whose test reads the value of ``node``: directly, or through a
    name assigned from it. Empty: the value decides nothing."""
    child = node
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, _BRANCHES) and child is ancestor.test:
            return [ancestor]
        if ancestor is loop or isinstance(ancestor, ast.stmt):
            break
        child = ancestor
    names = {n for t in targets_of(tree.statement_of(node)) for n in names_in(t)}
    if not names:
        return []
    return [n for n in ast.walk(loop) if isinstance(n, _BRANCHES) and names_in(n.test) & names]


_BRANCHES = (ast.If, ast.While, ast.IfExp, ast.Assert)


def feeds_the_step(tree: CellTree, node: ast.AST, loop: Loop) -> str | None:
    """What carries the value read at ``node`` into the step's work, or None: the model call it
    is an argument of (its dotted name), or the name assigned from it that later statements of
    ``loop`` carry (through their assignments) into a model call or the receiver of a
    ``.backward()``. ``nodes, hops = sample_block(seeds.tolist())`` before ``out =
    model(feats[nodes], hops)``: gated to every N steps, the other steps would train on the
    last value (unseen round 21: the read-less-often patch did so, measured "2.33x"). A value
    kept for a log (``total += loss.item()``) reaches neither."""
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, ast.stmt):
            break
        if isinstance(ancestor, ast.Call) and dotted(ancestor.func) in tree.models:
            return dotted(ancestor.func)
    stmt = tree.statement_of(node)
    after = sorted(
        (s for s in ast.walk(loop) if isinstance(s, _ASSIGNS) and s is not stmt),
        key=lambda s: (s.lineno, s.col_offset),
    )
    used: set[str] = set()  # the names the model calls and the backwards take
    for call in (c for c in ast.walk(loop) if isinstance(c, ast.Call)):
        if dotted(call.func) in tree.models:
            used |= set().union(*(names_in(a) for a in (*call.args, *call.keywords)))
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "backward":
            used |= names_in(call.func.value)
    targets = [n for t in targets_of(stmt) for n in ast.walk(t) if isinstance(n, ast.Name)]
    for name in dict.fromkeys(t.id for t in targets):
        carried = {name}
        for later in after:
            if later.value is not None and names_in(later.value) & carried:
                carried |= {n for t in targets_of(later) for n in names_in(t)}
        if carried & used:
            return name
    return None


def _can_stop(branch: ast.AST) -> bool:
    """The branch can end the loop: a ``while`` or an ``assert`` on the value, or an ``if``
    whose arms break, return or raise (not inside a loop or a function of their own)."""
    if isinstance(branch, (ast.While, ast.Assert)):
        return True
    if not isinstance(branch, ast.If):
        return False  # an expression's pick (`a if loss.item() > x else b`)
    todo: list[ast.AST] = [*branch.body, *branch.orelse]
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (ast.Break, ast.Return, ast.Raise)):
            return True
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            todo.extend(stmt.orelse)  # a break in its body ends that loop, not this one
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(stmt))
    return False


def _host_callee(tree: CellTree, node: ast.AST) -> str | None:
    """The call ``node`` is handed to as an argument (``env.step`` in ``env.step(a.item())``),
    where that call is no logging and no torch function: host code that takes the number."""
    parent = next(iter(tree.ancestors(node)), None)
    if not isinstance(parent, ast.Call) or node is parent.func:
        return None
    name = dotted(parent.func)
    if not name or logs_with(parent) is not None or name.split(".")[0] in ("torch", "F", "nn"):
        return None
    return name


def _unwrapped_names(node: ast.AST) -> set[str]:
    """Names read by ``node`` that are not already turned into numbers (.item(), float())."""
    if isinstance(node, ast.Call) and (
        method_of(node) in HOST_READ_METHODS or dotted(node.func) in ("float", "int", "len", "str")
    ):
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    names: set[str] = set()
    for child in ast.iter_child_nodes(node):
        # loss.grad_fn / x.shape: attribute reads that are not the tensor's values
        if (
            isinstance(node, ast.Attribute)
            and child is node.value
            and isinstance(child, ast.Name)
            and node.attr in ("shape", "dtype", "device", "size", "ndim", "requires_grad")
        ):
            continue
        names |= _unwrapped_names(child)
    return names


def _batch_values(tree: CellTree, loop: Loop) -> set[str]:
    """Names that likely hold tensors made in this step: loop targets and assigned values."""
    values: set[str] = set()
    counters: set[str] = set()
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        values, counters = loop_target_names(loop)
    for node in ast.walk(loop):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            host = _host_value(node.value)
            for target in targets_of(node):
                names = names_in(target)
                if host:
                    counters |= names
                else:
                    values |= names
    return values - counters


def _host_value(value: ast.AST) -> bool:
    """A value that is a Python number or string already (reading it later is free)."""
    if isinstance(value, (ast.Constant, ast.JoinedStr)):
        return True
    if isinstance(value, ast.Call):
        if method_of(value) in HOST_READ_METHODS:
            return True
        return last(dotted(value.func)) in _HOST_VALUE_CALLS
    if isinstance(value, ast.BinOp):
        return _host_value(value.left) and _host_value(value.right)
    return False


def summable_on_device(tree: CellTree, name: str) -> bool:
    """The running total ``name`` of ``name += loss.item()`` may hold a 0-d tensor instead:
    every other mention of it is a reset to a number, another ``+=``, or an f-string field
    (a 0-d tensor formats like a float there; ``!r`` and ``!s`` would show ``tensor(...)``)."""
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.Name):
            if name in names_held(node, _NAMING_FIELDS):
                return False  # a parameter, a keyword, an import, a def of that name: not a total
            continue
        if node.id != name:
            continue
        parent = tree.parent.get(node)
        if isinstance(parent, ast.AugAssign) and parent.target is node:
            continue
        if isinstance(parent, ast.Assign) and any(t is node for t in parent.targets):
            value = parent.value
            if isinstance(value, ast.Constant) and type(value.value) in (int, float):
                continue
        if not _in_fstring_field(tree, node):
            return False
    return True


# The names held as text (``NAMES_HELD``, a match capture included: it rebinds the name) and a
# keyword's: ``f(total=...)`` names no variable (``names_mentioned`` leaves it out), but a total
# whose name is also a keyword, a parameter or an import is not left to the sync fix.
_NAMING_FIELDS: dict[type, tuple[str, ...]] = {**NAMES_HELD, ast.keyword: ("arg",)}


def _in_fstring_field(tree: CellTree, node: ast.AST) -> bool:
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, ast.FormattedValue):
            return ancestor.conversion == -1  # no !r, !s, !a
        if isinstance(ancestor, ast.stmt):
            return False
    return False


# What makes a copy of each tensor it is called on (`v.clone()`, `p.detach().cpu()`).
_TENSOR_COPIES = frozenset({"clone", "cpu", "numpy", "to", "copy"})
# Calls whose result holds every parameter (and buffer) of a module, or of an optimizer.
_WHOLE_STATE = frozenset({"state_dict", "parameters", "named_parameters", "buffers"})


def state_copies(tree: CellTree) -> tuple[SourceLine, ...]:
    """Copies of a model's whole state made in a step loop: ``copy.deepcopy(model.state_dict())``
    or of the model, ``{k: v.clone() for k, v in model.state_dict().items()}``, ``[p.cpu() for
    p in model.parameters()]``, a loop copying each parameter. Each duplicates every parameter
    (a keep-the-best snapshot, a "last good" rollback): a checkpoint's host work without the
    file. Kept where they run on some steps only by a test that is not a period (``if
    loss.item() < best:``): ``gated`` then, and no ``%`` test holds them."""
    found: dict[int, SourceLine] = {}
    for node in ast.walk(tree.tree):
        if not _copies_whole_state(tree, node):
            continue
        if isinstance(node, ast.For):  # its copy call: the line the fix gates, with its loop
            node = next(n for n in ast.walk(node) if _copies_in(n) and isinstance(n, ast.Call))
        loop = tree.step_loop_of(node)
        if loop is None or _periodic(tree, node, loop) or _worked_on(tree, node, loop):
            continue
        line = tree.source_line(node, "state-copy")
        found.setdefault(line.line, line)
    return tuple(sorted(found.values(), key=lambda s: s.line))


def _copies_whole_state(tree: CellTree, node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and last(dotted(node.func)) == "deepcopy" and node.args:
        what = node.args[0]
        if isinstance(what, ast.Call):
            return method_of(what) in _WHOLE_STATE
        return dotted(what) in tree.models
    if isinstance(node, (ast.DictComp, ast.ListComp, ast.GeneratorExp)):
        element = node.value if isinstance(node, ast.DictComp) else node.elt
        return _over_whole_state(node.generators[0].iter) and _copies_in(element)
    if isinstance(node, ast.For) and _over_whole_state(node.iter):
        # `for p in model.parameters(): snapshot.append(p.detach().clone())`
        return any(_copies_in(stmt) for stmt in node.body)
    return False


def _over_whole_state(iterable: ast.AST) -> bool:
    """``model.parameters()``, ``model.state_dict().items()`` / ``.values()``."""
    if not isinstance(iterable, ast.Call):
        return False
    if method_of(iterable) in ("items", "values"):
        iterable = receiver_of(iterable)
    return isinstance(iterable, ast.Call) and method_of(iterable) in _WHOLE_STATE


def _copies_in(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and method_of(n) in _TENSOR_COPIES for n in ast.walk(node))


def _worked_on(tree: CellTree, node: ast.AST, loop: Loop) -> bool:
    """The copy is the step's working model, not a snapshot: the name it is bound to is called
    or has a method or attribute read in the loop (MAML's ``fast = copy.deepcopy(model)`` then
    ``fast(x)``, ``fast.parameters()``); a snapshot is only stored or handed on
    (``model.load_state_dict(best)``)."""
    bound = next(
        (a for a in tree.ancestors(node) if isinstance(a, (ast.Assign, ast.AnnAssign))), None
    )
    if bound is None:
        return False
    targets = bound.targets if isinstance(bound, ast.Assign) else [bound.target]
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    for use in ast.walk(loop):
        if isinstance(use, ast.Call) and isinstance(use.func, ast.Name) and use.func.id in names:
            return True
        if (
            isinstance(use, ast.Attribute)
            and isinstance(use.value, ast.Name)
            and use.value.id in names
        ):
            return True
    return False


def _periodic(tree: CellTree, node: ast.AST, loop: Loop) -> bool:
    """An ``if`` between ``node`` and ``loop`` tests a period or a step number (``step % 10 ==
    0``, ``step == last``): the copy runs on some steps by design, not on every one."""
    for ancestor in tree.ancestors(node):
        if ancestor is loop:
            return False
        if isinstance(ancestor, (ast.If, ast.IfExp)) and any(
            isinstance(n, ast.Mod) or (isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.Eq))
            for n in ast.walk(ancestor.test)
        ):
            return True
    return False
