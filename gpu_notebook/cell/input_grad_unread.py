"""A tensor made to require grad every step whose gradient the step reads only now and then.

``x.requires_grad_(True)`` (``x.requires_grad = True``, ``x = x.detach().requires_grad_()``,
``x = torch.tensor(..., requires_grad=True)``) on the batch before the forward, every step, for
a saliency map or an input-gradient norm logged under ``if step % 100 == 0`` (or never read, or
read only by a gated ``torch.autograd.grad(..., x)``): every backward then also computes the
input's gradient (through the first layer: a product as large as its weight's gradient, the
whole chain where the layers before are frozen) and accumulates it into ``x.grad``, for the one
step in a hundred that reads it. Unseen round 23 (input_grad_saliency: 1.36x by hand).

Read on the cell's tree: the switch is in a step loop's body (a ``for`` over a loader, a
``while`` over ``next(it)``), in a step function the loop calls or in a framework's per-step
method that gets the batch (a LightningModule's ``training_step``, a Trainer's
``compute_loss``), with no ``if`` around it there, and a function holding it does not hand the
tensor on (return it, store it on ``self``, append it: read elsewhere); its tensor's gradient reads (``X.grad``, ``torch.autograd.grad(out, X)``'s inputs,
``X.register_hook`` / ``X.retain_grad``, a call passing ``X`` to a function of the cell that
reads a ``.grad``; in a step function, a ``.grad`` the calling loop reads on a name it passes)
are all under an ``if`` there, or none is. Not taken: a read that runs every step (adversarial
training's ``x.grad.sign()``, a gradient penalty's ``autograd.grad(d, x, create_graph=True)``),
a tensor an optimizer is given (a latent or an image optimized in its own loop), a switch that
is already conditional (``x.requires_grad_(step % 100 == 0)``), a cell that checkpoints
activations (reentrant ``checkpoint(block, x)`` needs ``x`` to require grad for the block's
parameters to get theirs).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree, Function, Loop
from gpu_notebook.cell.words import last

# Calls that build an optimizer over the tensors they are handed (``torch.optim.Adam([z])``).
_OPTIMIZERS = frozenset({
    "SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "Rprop", "LBFGS",
    "NAdam", "RAdam", "SparseAdam", "ASGD", "Lion", "Adafactor",
})  # fmt: skip
# Methods whose call on the tensor reads its gradient when the backward runs.
_HOOKS = frozenset({"register_hook", "retain_grad", "register_post_accumulate_grad_hook"})
# Reentrant activation checkpointing needs its input to require grad (else the checkpointed
# block's parameters get no gradient: HF's ``enable_input_require_grads``): a cell that calls
# one asks for the input's gradient for a reason no read shows.
_CHECKPOINTS = frozenset({
    "checkpoint", "checkpoint_sequential", "gradient_checkpointing_enable",
    "enable_input_require_grads",
})  # fmt: skip
# Methods that keep what they are handed (a list's, a dict's).
_STORES = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "put"})
# A framework's per-step methods that get the batch (cell.framework_step_methods).
_BATCH_METHODS = frozenset({"training_step", "compute_loss"})


@dataclass(frozen=True)
class InputGradSwitch:
    """``name`` made to require grad on ``switch`` every step; ``reads``: its gradient's reads,
    all behind an ``if`` (empty: never read); ``gate``: the periodic test (``step % 100 == 0``)
    over the first read, None where there is none."""

    switch: ast.AST
    name: str
    reads: tuple[ast.AST, ...]
    gate: ast.expr | None


def _true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _switched(node: ast.AST) -> str | None:
    """The name ``node`` makes require grad without a condition, None where it does not."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if (
            isinstance(target, ast.Attribute)
            and target.attr == "requires_grad"
            and isinstance(target.value, ast.Name)
            and _true(node.value)
        ):
            return target.value.id
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Call):
            call = node.value
            if _requires_grad_call(call) or any(
                k.arg == "requires_grad" and _true(k.value) for k in call.keywords
            ):
                return target.id
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        if _requires_grad_call(call) and isinstance(receiver, ast.Name):
            return receiver.id
    return None


def _requires_grad_call(call: ast.Call) -> bool:
    """``.requires_grad_()`` / ``.requires_grad_(True)`` (``requires_grad=True``)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "requires_grad_"):
        return False
    values = [*call.args, *(k.value for k in call.keywords)]
    return not values or (len(values) == 1 and _true(values[0]))


def _scope(tree: CellTree, node: ast.AST, framework: set[int]) -> Loop | Function | None:
    """The step loop (``node`` in its body), the step function or the framework's per-step
    method (``node`` in it: ``framework``, their ids) that runs ``node`` on every step; None
    where a condition holds it or no step does."""
    loop = tree.step_loop_of(node)
    if loop is None:
        holder = tree.nearest(node, Function)
        if isinstance(holder, Function) and id(holder) in framework:
            return None if tree.gated(node, holder) else holder
        return None
    if tree.inside(node, loop):
        return None if tree.gated(node, loop) else loop
    holder = tree.nearest(node, Function)
    return holder if isinstance(holder, Function) and not tree.gated(node, holder) else None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _reads_grad(fn: ast.AST) -> bool:
    """``fn`` reads some gradient: a ``.grad`` load, ``autograd.grad``, a gradient hook."""
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and (node.attr == "grad" or node.attr in _HOOKS)
        ):
            return True
    return False


def _is_read(node: ast.AST, name: str, grad_readers: set[str]) -> bool:
    """``node`` reads ``name``'s gradient (see the module docstring)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == name and isinstance(node.ctx, ast.Load):
            return node.attr == "grad" or node.attr in _HOOKS
        return False
    if not isinstance(node, ast.Call):
        return False
    callee = dotted(node.func) or ""
    if last(callee) == "grad" and "autograd" in callee:
        inputs = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "inputs")]
        return any(name in _names(value) for value in inputs)
    handed = [*node.args, *(k.value for k in node.keywords)]
    return last(callee) in grad_readers and any(name in _names(value) for value in handed)


def _optimized(tree: CellTree, name: str) -> bool:
    """An optimizer is built over ``name`` (``torch.optim.Adam([z], ...)``) anywhere in the cell."""
    return any(
        last(dotted(call.func) or "") in _OPTIMIZERS
        and any(name in _names(arg) for arg in [*call.args, *(k.value for k in call.keywords)])
        for call in tree.calls()
    )


def _gate(tree: CellTree, node: ast.AST, scope: ast.AST) -> ast.expr | None:
    """The periodic test (one with a ``%``) of the ``if`` whose body holds ``node``."""
    child = node
    for ancestor in tree.ancestors(node):
        if ancestor is scope:
            return None
        if (
            isinstance(ancestor, ast.If)
            and child in ancestor.body
            and any(isinstance(n, ast.Mod) for n in ast.walk(ancestor.test))
        ):
            return ancestor.test
        child = ancestor
    return None


def _escapes(fn: Function, name: str) -> bool:
    """``fn`` hands ``name`` on beyond its own body: returns it, yields it, stores it in an
    attribute or an item (``self.x = x``: a hook of the class may read its gradient) or appends
    it to a list; its gradient may then be read where this reading does not look."""
    return any(_holds(value, name) for value in _handed_on(fn))


def _holds(value: ast.AST, name: str) -> bool:
    """``value`` is the tensor itself or a display that holds it (``x``, ``(x, y)``, ``{"x": x}``),
    not a value computed from it (``F.cross_entropy(model(x), y)`` carries no ``x.grad``)."""
    if isinstance(value, ast.Name):
        return value.id == name
    if isinstance(value, ast.Starred):
        return _holds(value.value, name)
    if isinstance(value, ast.Tuple | ast.List | ast.Set):
        return any(_holds(item, name) for item in value.elts)
    if isinstance(value, ast.Dict):
        return any(_holds(item, name) for item in value.values)
    return False


def _handed_on(fn: Function) -> list[ast.AST]:
    """What ``fn`` returns, yields, stores in an attribute or an item, or keeps in a container."""
    out: list[ast.AST] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Return | ast.Yield) and node.value is not None:
            out.append(node.value)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(
                isinstance(t, ast.Attribute | ast.Subscript) for t in targets
            ):
                out.append(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _STORES
        ):
            out.extend(node.args)
    return out


def _caller_reads(fn: Function, loop: Loop, name: str) -> list[ast.AST]:
    """In a step function: the calling loop's ``.grad`` reads on the names it hands ``fn``
    where ``fn`` takes ``name`` (the loop's ``x`` is the function's)."""
    params = [a.arg for a in fn.args.args]
    if name not in params:
        return []
    passed: set[str] = set()
    for call in (c for c in ast.walk(loop) if isinstance(c, ast.Call)):
        if last(dotted(call.func) or "") == fn.name:
            passed |= {
                n for v in [*call.args, *(k.value for k in call.keywords)] for n in _names(v)
            }
    return [
        node
        for node in ast.walk(loop)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in passed
        and isinstance(node.ctx, ast.Load)
        and (node.attr == "grad" or node.attr in _HOOKS)
    ]


def unread_input_grads(tree: CellTree) -> list[InputGradSwitch]:
    """The step's tensors made to require grad every step whose gradient is read on only some
    steps (or none), in line order, each name once."""
    grad_readers = {
        fn.name for fn in ast.walk(tree.tree) if isinstance(fn, Function) and _reads_grad(fn)
    }
    if any(last(dotted(call.func) or "") in _CHECKPOINTS for call in tree.calls()):
        return []
    framework = {id(fn) for fn in per_step_methods(tree) if fn.name in _BATCH_METHODS}
    out: dict[str, InputGradSwitch] = {}
    for node in ast.walk(tree.tree):
        name = _switched(node)
        if name is None or name in out:
            continue
        scope = _scope(tree, node, framework)
        if scope is None or _optimized(tree, name):
            continue
        if isinstance(scope, Function) and _escapes(scope, name):
            continue
        reads = [n for n in ast.walk(scope) if _is_read(n, name, grad_readers)]
        every = [r for r in reads if not tree.gated(r, scope)]
        loop = tree.step_loop_of(node)
        if isinstance(scope, Function) and loop is not None:
            called = _caller_reads(scope, loop, name)
            reads += called
            every += [r for r in called if not tree.gated(r, loop)]
        if every:
            continue
        reads.sort(key=lambda r: (tree.line_of(r), getattr(r, "col_offset", 0)))
        gate = next((g for r in reads if (g := _gate(tree, r, scope)) is not None), None)
        out[name] = InputGradSwitch(node, name, tuple(reads), gate)
    return sorted(out.values(), key=lambda s: tree.line_of(s.switch))
