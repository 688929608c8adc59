"""Host reads of device values in the functions the cell registers as module or tensor hooks.

``m.register_forward_hook(make_hook(name))`` (and the pre, backward, tensor and global forms)
hands torch a function that runs on every forward or backward of the hooked module or tensor:
per-step code the step loop never calls by name, so the reads of ``cell/syncs`` (which follows
the loop's calls) never reach it (unseen round 21's activation_stats_hooks: 20 layers each
reading three ``.item()`` every forward, 1.37x by hand, the reads in no fact). The registered
function is resolved through a lambda (its body), a name bound by a ``def``, a factory call
(``make_hook(name)``: the ``def`` or lambda the factory returns) and ``functools.partial``.
"""

from __future__ import annotations

import ast
import dataclasses

from gpu_notebook.cell.facts import SourceLine
from gpu_notebook.cell.names import dotted, logs_with, method_of
from gpu_notebook.cell.syncs import _callee_values, _sync_kind
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import last

# Registrations whose function torch calls on every forward or backward that reaches the
# hooked module or tensor (torch.nn.Module, torch.Tensor, torch.nn.modules.module).
REGISTERS = frozenset({
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_backward_hook", "register_hook",
    "register_post_accumulate_grad_hook", "register_module_forward_hook",
    "register_module_forward_pre_hook", "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
})  # fmt: skip

_KINDS = {
    "register_hook": "gradient hook",
    "register_post_accumulate_grad_hook": "gradient hook",
}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_Hook = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def registered_hook_reads(
    tree: CellTree, live: frozenset[tuple[int, int]] | None = None
) -> tuple[SourceLine, ...]:
    """Ungated host reads of device values in the functions the cell registers as hooks, each
    with ``called_in`` saying which hook and where it is registered (``forward hook `hook`
    (registered at line 47)``). A read behind an ``if`` in the hook (a flag set on the logging
    steps) runs on some steps only: left out. A hook whose handle the cell removes
    (``handle.remove()``) is still read: it runs until then; unless ``live`` (the positions,
    ``hook_position``, of the cell's hook functions on the live modules as it started or ended,
    ``cell.live_hooks``; None: not read) shows it gone and the removal comes before the step
    loop (it never ran there)."""
    found: dict[tuple[int, str], SourceLine] = {}
    for kind, at, fn in _registered(tree, live):
        label = fn.name if not isinstance(fn, ast.Lambda) else "lambda"
        for line in hook_reads_in(tree, fn, f"{kind} `{label}` (registered at line {at})"):
            found.setdefault((line.line, line.kind), line)
    return tuple(sorted(found.values(), key=lambda s: s.line))


def hook_reads_in(tree: CellTree, fn: _Hook, called_in: str) -> list[SourceLine]:
    """The ungated reads of device values in ``fn``'s own body (not its nested functions'),
    each said as read in ``called_in``."""
    values = _values(fn)
    out = []
    for read in (c for c in ast.walk(fn) if isinstance(c, ast.Call)):
        sync = _sync_kind(tree, read, values)
        if sync is None or tree.nearest(read, _FUNCTIONS) is not fn:
            continue
        if sync == "float" and not _reads_tensor(read, values):
            continue
        if tree.gated(read, fn) or _after_early_return(tree, fn, read):
            continue
        out.append(dataclasses.replace(tree.source_line(read, sync), called_in=called_in))
    return out


def reading_hook_lines(
    tree: CellTree, live: frozenset[tuple[int, int]] | None = None
) -> frozenset[int]:
    """Every line of the registered functions that read (``registered_hook_reads``): what gating
    or removing such a hook saves is its whole body's time (the reductions it reads and the
    statements around them), which the stack sampler measures on these lines."""
    reading = {id(s.node) for s in registered_hook_reads(tree, live)}
    lines: set[int] = set()
    for _kind, _at, fn in _registered(tree, live):
        nodes = list(ast.walk(fn))
        if any(id(n) in reading for n in nodes):
            lines |= {tree.line_of(n) for n in nodes if isinstance(n, (ast.stmt, ast.expr))}
    return frozenset(lines)


def _registered(
    tree: CellTree, live: frozenset[tuple[int, int]] | None
) -> list[tuple[str, int, _Hook]]:
    """Each registered function the cell shows: its hook kind, its register call's line. Left
    out: one gone from the live modules (``live``) whose handle the cell removes before its
    step loop."""
    out = []
    for call in tree.calls():
        # On any receiver: ``model.layers[3].register_forward_hook(...)`` has no dotted name.
        name = method_of(call) or last(dotted(call.func) or "")
        if name not in REGISTERS or not call.args or not tree.in_cell(call):
            continue
        kind = (
            _KINDS.get(name)
            or (
                name.removeprefix("register_").removeprefix("module_").removesuffix("_hook")
            ).replace("_", " ")
            + " hook"
        )
        for fn in _resolve(tree, call.args[0], depth=0):
            if (
                live is not None
                and hook_position(fn) not in live
                and removed_before_loop(tree, call)
            ):
                continue
            out.append((kind, tree.line_of(call), fn))
    return out


def hook_position(fn: _Hook) -> tuple[int, int]:
    """Where a hook function starts in the tree: two lambdas of one line differ by column."""
    return fn.lineno, fn.col_offset


def _first_step_loop(tree: CellTree) -> int | None:
    """The line the cell's steps start at: its first step loop's; in a cell without one (the
    loop is a framework's, ``trainer.fit(...)``, or a function's of an earlier cell), its last
    top-level statement that calls something other than a ``.remove()`` or a log (the steps
    run in some call, and a removal after the last such one came after them)."""
    loops = [
        tree.line_of(lp) for lp in tree.loops if id(lp) in tree.step_loops and tree.in_cell(lp)
    ]
    if loops:
        return min(loops)
    working = [
        tree.line_of(stmt)
        for stmt in tree.tree.body
        if tree.in_cell(stmt)
        and any(
            isinstance(c, ast.Call) and method_of(c) != "remove" and logs_with(c) is None
            for c in ast.walk(stmt)
        )
    ]
    return max(working) if working else None


def removals_before_loop(tree: CellTree) -> tuple[str, ...]:
    """The dotted names whose hook handles the cell removes before its first step loop, outside
    any: ``h`` of ``h.remove()``, ``hs`` of ``for h in hs: h.remove()`` (or of a comprehension,
    or of ``hs.values()``), ``self.handles``: a handle an earlier cell made and this one removes
    (``cell.live_hooks`` finds its slot through the name)."""
    first = _first_step_loop(tree)
    if first is None:
        return ()
    over: dict[str, str] = {}  # a loop's name -> the dotted name it iterates
    for target in list(ast.walk(tree.tree)):
        if isinstance(target, (ast.For, ast.comprehension)) and isinstance(target.target, ast.Name):
            source = target.iter
            if isinstance(source, ast.Call) and method_of(source) == "values" and not source.args:
                source = source.func.value  # type: ignore[attr-defined]
            name = dotted(source)
            if name is not None:
                over[target.target.id] = name
    out: list[str] = []
    for call in tree.calls():
        receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if (
            receiver is not None
            and method_of(call) == "remove"
            and not call.args
            and tree.in_cell(call)
            and tree.line_of(call) < first
            and tree.step_loop_of(call) is None
        ):
            out.append(over.get(receiver, receiver))
    return tuple(dict.fromkeys(out))


def removed_before_loop(tree: CellTree, register: ast.Call) -> bool:
    """The handle ``register`` returns is removed before the cell's first step loop: the call
    is a ``with`` item whose block ends there, or its handle (``h = ...``, ``hs.append(...)``,
    ``hs = [... for ...]``) has ``.remove()`` called on it (or on the names a loop over it
    binds) between the registration and that loop, outside any step loop."""
    first = _first_step_loop(tree)
    if first is None or tree.step_loop_of(register) is not None:
        return False
    at = tree.line_of(register)
    for a in tree.ancestors(register):
        if isinstance(a, (ast.With, ast.AsyncWith)) and any(
            register in ast.walk(item.context_expr) for item in a.items
        ):
            return a.end_lineno is not None and tree.line_of(a) + (a.end_lineno - a.lineno) < first
    held = _handle_names(tree, register)
    if not held:
        return False
    for target in list(ast.walk(tree.tree)):  # ``for h in handles: h.remove()``
        if (
            isinstance(target, (ast.For, ast.comprehension))
            and isinstance(target.iter, ast.Name)
            and target.iter.id in held
            and isinstance(target.target, ast.Name)
        ):
            held.add(target.target.id)
    for call in tree.calls():
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        if (
            method_of(call) == "remove"
            and isinstance(receiver, ast.Name)
            and receiver.id in held
            and tree.in_cell(call)
            and at < tree.line_of(call) < first
            and tree.step_loop_of(call) is None
        ):
            return True
    return False


def _handle_names(tree: CellTree, register: ast.Call) -> set[str]:
    """The names that hold the handle ``register`` returns (assigned, appended, collected)."""
    for a in tree.ancestors(register):
        if isinstance(a, ast.Assign):
            return {t.id for t in a.targets if isinstance(t, ast.Name)}
        if isinstance(a, ast.Call) and method_of(a) in ("append", "extend"):
            receiver = a.func.value if isinstance(a.func, ast.Attribute) else None
            return {receiver.id} if isinstance(receiver, ast.Name) else set()
        if isinstance(a, ast.stmt):
            return set()
    return set()


def _after_early_return(tree: CellTree, fn: _Hook, node: ast.AST) -> bool:
    """``node`` follows a guard that returns on some calls (``if not log_now: return`` at the
    hook's top, the gate the finding advises): it runs on the logging steps only."""
    if isinstance(fn, ast.Lambda):
        return False
    top = next((a for a in (node, *tree.ancestors(node)) if a in fn.body), None)
    for stmt in fn.body:
        if stmt is top:
            return False
        if isinstance(stmt, ast.If) and any(isinstance(b, ast.Return) for b in stmt.body):
            return True
    return False


def _values(fn: _Hook) -> set[str]:
    if isinstance(fn, ast.Lambda):
        a = fn.args
        return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    return _callee_values(fn)


def _reads_tensor(call: ast.Call, values: set[str]) -> bool:
    return bool({n.id for n in ast.walk(call.args[0]) if isinstance(n, ast.Name)} & values)


def _resolve(tree: CellTree, node: ast.AST, depth: int) -> list[_Hook]:
    """The function objects ``node`` evaluates to, as far as the cell shows them."""
    if depth > 3:
        return []
    if isinstance(node, ast.Lambda):
        return [node]
    if isinstance(node, ast.Name):
        return [d for d in _defs_named(tree, node.id)]
    if isinstance(node, ast.Attribute):  # self.hook, obj.method: a def of that name in a class
        return [d for d in _defs_named(tree, node.attr) if _in_class(tree, d)]
    if isinstance(node, ast.Call):
        callee = dotted(node.func) or ""
        if last(callee) == "partial" and node.args:
            return _resolve(tree, node.args[0], depth + 1)
        out: list[_Hook] = []
        target = node.func.id if isinstance(node.func, ast.Name) else method_of(node)
        for factory in _defs_named(tree, target) if target else []:
            for ret in ast.walk(factory):
                if (
                    isinstance(ret, ast.Return)
                    and ret.value is not None
                    and tree.nearest(ret, _FUNCTIONS) is factory
                ):
                    out += [f for f in _resolve(tree, ret.value, depth + 1) if f is not factory]
        return out
    return []


def _defs_named(tree: CellTree, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        n
        for n in ast.walk(tree.tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
    ]


def _in_class(tree: CellTree, fn: ast.AST) -> bool:
    return any(isinstance(a, ast.ClassDef) for a in tree.ancestors(fn))
