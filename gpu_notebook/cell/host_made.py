"""Values a step makes on the CPU, as the source shows them: reads of them are no device reads.

A ``.item()`` / ``.cpu()`` / ``.tolist()`` / ``float()`` of a tensor the step made on the CPU
and kept there (the loader's labels the loop never moves, ``torch.tensor(history)``, a
factory's fresh ``torch.rand(())``, ``.cpu()`` of anything) copies nothing and waits for no
kernel on a GPU either (unseen round 13: such reads were counted as device reads in the GPU
estimate). Shown by names and calls alone; where the source cannot show it (a model's output,
a name of unknown origin, a ``.to(x)``), the value is not taken for a CPU one.
"""

from __future__ import annotations

import ast

from gpu_notebook.cell.names import (
    dotted,
    keyword_value,
    loop_target_names,
    method_of,
    names_in,
    receiver_of,
    targets_of,
)
from gpu_notebook.cell.tree import CellTree, Loop
from gpu_notebook.cell.words import COPY_METHODS, last


def cpu_batch_names(loop: Loop) -> set[str]:
    """The loop's batch values that stay on the CPU: names its ``for`` target binds from the
    batch that the loop never assigns another value, where the loop moves other values of the
    step to a device (``x = x.to(device)``: so its batches come on the CPU). Empty when the
    loop moves nothing (a batch may come on the device: nothing shows it)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return set()
    assigned: set[str] = set()
    moves = False
    for name, value in _assigned(loop):
        moves = moves or to_device(value)
        if not (isinstance(value, ast.Name) and value.id == name):  # `lengths` as it was
            assigned.add(name)
    values, _counters = loop_target_names(loop)
    return values - assigned if moves else set()


def moved_at(tree: CellTree, loop: Loop, name: str) -> int | None:
    """The line where ``loop`` assigns ``name`` a copy on a device, None where it does not."""
    return next(
        (tree.line_of(value) for n, value in _assigned(loop) if n == name and to_device(value)),
        None,
    )


def _assigned(loop: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, the value it is assigned) of each assignment in ``loop``: a tuple's items paired
    (``x, n = x.to(d), n``), else each name of the targets with the whole value."""
    pairs: list[tuple[str, ast.AST]] = []
    for node in ast.walk(loop):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or node.value is None:
            continue
        for target in targets_of(node):
            value = node.value
            if (
                isinstance(target, ast.Tuple)
                and isinstance(value, ast.Tuple)
                and len(target.elts) == len(value.elts)
            ):
                pairs += [
                    (n, v)
                    for t, v in zip(target.elts, value.elts, strict=True)
                    for n in names_in(t)
                ]
            else:
                pairs += [(n, value) for n in names_in(target)]
    return pairs


# torch functions that make a tensor from nothing on the default device (the CPU) unless given
# ``device=``; their operators (``aten::rand``) are what a CPU trace shows of them.
TORCH_FACTORIES = frozenset(
    {"rand", "randn", "randint", "randperm", "arange", "zeros", "ones", "full", "empty",
     "linspace", "logspace", "normal", "bernoulli", "multinomial", "eye", "tensor", "as_tensor"}
)  # fmt: skip


def _factory(call: ast.Call) -> str | None:
    """``call``'s factory name where it makes a tensor on the CPU (no ``device=``, or
    ``device="cpu"``): ``torch.rand(())`` -> "rand"; else None."""
    name = dotted(call.func) or ""
    if not name.startswith("torch.") or last(name) not in TORCH_FACTORIES:
        return None
    device = keyword_value(call, "device")
    if device is not None and not (isinstance(device, ast.Constant) and device.value == "cpu"):
        return None
    return last(name)


def host_reads_traced(tree: CellTree) -> int:
    """Reads a step makes, once each, of values the source shows on the CPU through names
    (``(y == 0).float().mean().item()`` of the loader's CPU labels, ``float(errs.cpu().sum())``):
    ``.item()``/``float()`` record ``aten::item`` on a CPU trace as a device read does, and on a
    GPU they wait for nothing. Written in a step loop's own body (not an inner loop, a
    comprehension or a gate); a read of a factory's fresh tensor is the trace's to find
    (``host_factories``)."""
    count = 0
    cpu_of: dict[int, set[str]] = {}
    if device_by_default(tree):
        return 0
    for call in tree.calls():
        loop = tree.enclosing_loop(call)
        if loop is None or id(loop) not in tree.step_loops or tree.gated(call, loop):
            continue
        is_item = method_of(call) == "item" and not call.args
        if not is_item and not (dotted(call.func) in ("float", "int", "bool") and call.args):
            continue
        if any(isinstance(a, (ast.comprehension, ast.Lambda, *_COMPREHENSIONS)) for a in
               _between(tree, call, loop)):  # fmt: skip
            continue
        cpu = cpu_of.setdefault(id(loop), host_made_names(loop, cpu_batch_names(loop)))
        what = receiver_of(call) if is_item else call.args[0]
        made_fresh = any(isinstance(n, ast.Call) and _factory(n) for n in ast.walk(what))
        if not made_fresh and reads_host_made(call, cpu):
            count += 1
    return count


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _between(tree: CellTree, node: ast.AST, loop: Loop) -> list[ast.AST]:
    """The ancestors of ``node`` below ``loop``."""
    out = []
    for a in tree.ancestors(node):
        if a is loop:
            break
        out.append(a)
    return out


def device_by_default(tree: CellTree) -> bool:
    """The cell sets torch's default device (``torch.set_default_device(...)``): its factories
    may make tensors on a GPU, and nothing here is shown on the CPU."""
    return any(last(dotted(c.func) or "") == "set_default_device" for c in tree.calls())


def host_factories(tree: CellTree) -> frozenset[str]:
    """The operators (``aten::rand``) of the torch factories a step runs that make tensors on
    the CPU (``if torch.rand(()) < 0.5:`` in an augment the loop calls per image), where no call
    of the same factory in the cell makes one on a device: a read of such a tensor just after
    its factory (analysis.gpu_estimate) waits for no kernel on a GPU either."""
    host: set[str] = set()
    device: set[str] = set()
    if device_by_default(tree):
        return frozenset()
    for call in tree.calls():
        name = dotted(call.func) or ""
        if not name.startswith("torch.") or last(name) not in TORCH_FACTORIES:
            continue
        parent = tree.parent.get(call)
        moved = (
            isinstance(parent, ast.Attribute)
            and parent.attr in COPY_METHODS
            and isinstance(outer := tree.parent.get(parent), ast.Call)
            and to_device(outer)
        )
        if _factory(call) is None or moved:
            device.add(last(name))
        elif tree.step_loop_of(call) is not None or tree.run_by_step(call) is not None:
            host.add(last(name))
    return frozenset(_FACTORY_OPS.get(n, f"aten::{n}") for n in host - device)


# Factories whose operator is not named after them: torch.tensor(list) records aten::lift_fresh.
_FACTORY_OPS = {"tensor": "aten::lift_fresh", "as_tensor": "aten::lift_fresh"}


def made_on_cpu(node: ast.AST, cpu: set[str], *, copies: bool = True) -> bool:
    """``node``'s value is a tensor (or number) on the CPU, as the source shows it: a factory
    without a device, ``.cpu()`` of anything, a name in ``cpu``, a constant, and what torch
    functions, methods and operators make of those alone (``(preds == y).float().mean()``).
    A ``.to(x)``/``.cuda()`` to a device, a model's call, a name of unknown origin: not shown.
    ``copies`` False: a ``.cpu()`` counts only of a value on the CPU already (a read's own
    expression, ``(out.cpu() == 0).float().mean().item()``: that line reads the device once, by
    the ``.cpu()``, which the trace records through its ``.item()``)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in cpu
    if isinstance(node, ast.Attribute):
        return made_on_cpu(node.value, cpu, copies=copies)
    if isinstance(node, ast.Call):
        method = method_of(node)
        to_cpu = method == "to" and node.args and "cpu" in ast.unparse(node.args[0]).lower()
        if method == "cpu" or to_cpu:
            return copies or made_on_cpu(receiver_of(node), cpu, copies=False)
        if method in COPY_METHODS or any(k.arg == "device" for k in node.keywords):
            return _factory(node) is not None
        if _factory(node) is not None:
            return True
        args = [*node.args, *(k.value for k in node.keywords)]
        if method is not None and isinstance(node.func, ast.Attribute):
            head = node.func.value
        elif (dotted(node.func) or "").startswith("torch."):
            head = None  # torch.cat([a, b]): its inputs decide
        else:
            return False  # a model, a user's function: its output's device is not shown
        return (head is None or made_on_cpu(head, cpu, copies=copies)) and all(
            made_on_cpu(a, cpu, copies=copies) for a in args
        )
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Subscript,
                         ast.Tuple, ast.List, ast.Slice, ast.Starred)):  # fmt: skip
        return all(
            made_on_cpu(c, cpu, copies=copies)
            for c in ast.iter_child_nodes(node)
            if isinstance(c, ast.expr)
        )
    return False


def host_made_names(scope: ast.AST, cpu: set[str]) -> set[str]:
    """``cpu`` and the names ``scope`` (a loop, a function) assigns only values made on the CPU
    (``preds = logits.argmax(1).cpu()``, ``jitter = torch.rand(3)``): twice over, so a name made
    from another such name counts."""
    pairs = [(n, v) for n, v in _assigned(scope)]
    names = set(cpu)
    for _ in range(2):
        made = {n for n, v in pairs if made_on_cpu(v, names)}
        names = set(cpu) | {
            n for n in made if all(made_on_cpu(v, names) for m, v in pairs if m == n)
        }
    return names


def reads_host_made(call: ast.Call, cpu: set[str]) -> bool:
    """The read ``call`` (``t.item()``, ``t.cpu()``, ``float(t)``) is of a value made on the
    CPU (``made_on_cpu``): on a GPU it copies nothing and waits for no kernel."""
    if method_of(call) is not None:
        return made_on_cpu(receiver_of(call), cpu, copies=False)
    return bool(call.args) and made_on_cpu(call.args[0], cpu, copies=False)


def to_device(value: ast.AST) -> bool:
    """``value`` puts a tensor on a device: ``.cuda()``, or ``.to(x)`` with no "cpu" in it."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and method_of(node) in COPY_METHODS:
            text = " ".join(ast.unparse(a) for a in node.args).lower()
            if method_of(node) == "cuda" or "cpu" not in text:
                return True
    return False
