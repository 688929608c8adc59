"""The hooks on the live modules once the cell ran, and their reads of device values.

A notebook registers its monitoring hooks in one cell (``for n, m in model.named_modules():
m.register_forward_hook(make_hook(n))``) and trains in another: the measured cell shows only
``model(x)``, so ``cell.registered_hooks``, which reads registrations in the cell's source, sees
none; an imported helper (``utils.attach_stats(model)``) hides them the same way. The objects
hold them: each module's ``_forward_hooks``, ``_forward_pre_hooks``, ``_backward_hooks`` and
``_backward_pre_hooks``, each parameter's gradient hooks, and torch's global dicts. This module
reads those dicts (instance ``__dict__`` lookups and ``type()`` only: nothing of the user's runs,
nothing is attached or changed), follows each hook to its function (through
``functools.partial``, a bound method, a callable object's ``__call__``), keeps the user's own
(another cell, a ``.py`` file of theirs: never torch's or a library's) and reads its source as
``cell.registered_hooks`` reads a registered one, each fact keeping where it was defined
(``In[3] line 5``, ``utils.py:14``): the stack sampler names those lines by their file, so the
hook's cost is its own frames' samples.

Read after the cell ran: a hook the cell removed (``handle.remove()`` before its loop) is gone,
and the names of the cell's own hook functions still on are handed to ``cell.registered_hooks``
to tell a handle removed before the loop from one that ran.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpu_notebook.cell.calls import _other_cell, _users_file
from gpu_notebook.cell.facts import ORIGIN_LINES, Origin, SourceLine
from gpu_notebook.cell.ipython import cell_number
from gpu_notebook.cell.registered_hooks import hook_reads_in
from gpu_notebook.cell.tree import CellTree

# A module's hook dicts, by the kind of hook torch runs from each.
_MODULE_DICTS = {
    "_forward_pre_hooks": "forward pre hook",
    "_forward_hooks": "forward hook",
    "_backward_pre_hooks": "backward pre hook",
    "_backward_hooks": "backward hook",
}
_GLOBAL_DICTS = {f"_global{name}": kind for name, kind in _MODULE_DICTS.items()}
_TENSOR_DICTS = ("_backward_hooks", "_post_accumulate_grad_hooks")
MAX_MODULES = 5000  # a walk bound: a model of more modules is read up to here
MAX_HOOKS = 16  # distinct hook functions read at most
# Where a live hook's reading lines start: far above the cell's reading (cell.calls' origins).
_FIRST_OFFSET = 1000 * ORIGIN_LINES


@dataclass(frozen=True)
class LiveHooks:
    """What the live hook dicts hold for the cell."""

    # Reads in hooks defined outside the cell (another cell, a user's file): ``origin`` set.
    reads: tuple[SourceLine, ...] = ()
    # Every line of those hooks that read (their whole body), ``origin`` set: their cost.
    lines: tuple[SourceLine, ...] = ()
    # The names of the hook functions the cell's own source defines that are still on a live
    # module or tensor (``<lambda>`` for a lambda); None: the dicts were not read.
    still_on: frozenset[str] | None = None


def live_hooks(
    namespace: Mapping[str, Any] | None, names: Iterable[str], source: str, torch: Any
) -> LiveHooks:
    """The hooks on the modules bound to ``names`` in ``namespace`` (and their parameters), and
    torch's global module hooks; ``source``: the measured cell (or script), whose own hook
    functions ``cell.registered_hooks`` reads, so they are only named here."""
    if namespace is None or torch is None:
        return LiveHooks()
    found: dict[tuple[types.CodeType, str], tuple[types.FunctionType, list[str]]] = {}
    for kind, where, hook in _hooks(namespace, names, torch):
        fn = _function(hook)
        if fn is not None:
            found.setdefault((fn.__code__, kind), (fn, []))[1].append(where)
    reads: list[SourceLine] = []
    lines: list[SourceLine] = []
    still_on: set[str] = set()
    for index, ((code, kind), (fn, places)) in enumerate(list(found.items())[:MAX_HOOKS]):
        text = _source(fn)
        if text is None or not _users(code.co_filename):
            continue
        if text.strip() in source:  # the cell's own: read from its source (registered_hooks)
            still_on.add(fn.__name__)
            continue
        origin = Origin(
            filename=code.co_filename,
            function=fn.__name__,
            cell_number=cell_number(code.co_filename),
            in_file=_users_file(code.co_filename),
            first_line=code.co_firstlineno,
            offset=_FIRST_OFFSET + index * ORIGIN_LINES,
            text=text,
        )
        read = _read(origin, kind, places)
        if read is not None:
            reads += read[0]
            lines += read[1]
    return LiveHooks(tuple(reads), tuple(lines), frozenset(still_on))


def _hooks(
    namespace: Mapping[str, Any], names: Iterable[str], torch: Any
) -> Iterator[tuple[str, str, Any]]:
    """(kind, where, hook) for every hook on the modules the names hold, their parameters, and
    torch's global module hooks."""
    module_cls, parameter_cls = torch.nn.Module, torch.nn.Parameter
    seen: set[int] = set()
    todo: list[tuple[str, Any]] = []
    for name in sorted(set(names)):
        try:
            value = namespace.get(name)
        except Exception:  # noqa: BLE001 -- a user's namespace mapping may raise on lookup
            continue
        if value is not None and issubclass(type(value), module_cls):
            todo.append((name, value))
    while todo and len(seen) < MAX_MODULES:
        where, module = todo.pop(0)
        if id(module) in seen:
            continue
        seen.add(id(module))
        held = _own(module)
        for attr, kind in _MODULE_DICTS.items():
            for hook in _values(held.get(attr)):
                yield kind, where, hook
        for pname, param in _items(held.get("_parameters")):
            if type(param) is parameter_cls:  # exactly: a subclass may dispatch code of its own
                for attr in _TENSOR_DICTS:
                    for hook in _values(getattr(param, attr, None)):
                        yield "gradient hook", f"{where}.{pname}", hook
        todo += [
            (f"{where}.{k}", m) for k, m in _items(held.get("_modules"))
            if m is not None and issubclass(type(m), module_cls)
        ]  # fmt: skip
    if seen:  # the global hooks run on every module's call: read where a model is in reach
        globals_ = vars(torch.nn.modules.module)
        for attr, kind in _GLOBAL_DICTS.items():
            for hook in _values(globals_.get(attr)):
                yield kind, "*", hook


def _own(obj: Any) -> dict[str, Any]:
    try:
        held = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return held if type(held) is dict else {}


def _values(held: Any) -> list[Any]:
    """The hooks a torch hook dict holds (an ``OrderedDict``/``dict`` of id -> hook)."""
    return list(dict.values(held)) if isinstance(held, dict) else []


def _items(held: Any) -> list[tuple[str, Any]]:
    return list(dict.items(held)) if isinstance(held, dict) else []


def _function(hook: Any) -> types.FunctionType | None:
    """The Python function a hook runs: through partials, bound methods, ``__call__``."""
    for _ in range(4):
        if isinstance(hook, functools.partial):
            hook = hook.func
        elif isinstance(hook, types.MethodType):
            hook = hook.__func__
        else:
            break
    if isinstance(hook, types.FunctionType):
        return hook
    call = inspect.getattr_static(type(hook), "__call__", None)
    return call if isinstance(call, types.FunctionType) else None


def _users(filename: str) -> bool:
    return cell_number(filename) is not None or _other_cell(filename) or _users_file(filename)


def _source(fn: types.FunctionType) -> str | None:
    """The function's dedented source (linecache: IPython keeps every cell there)."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError, IndentationError):
        return None
    return text if text.endswith("\n") else text + "\n"


def _read(
    origin: Origin, kind: str, places: list[str]
) -> tuple[list[SourceLine], list[SourceLine]] | None:
    """The hook's reads and, where it reads, its whole body's lines; None: its source does not
    parse on its own (a lambda inside a longer expression)."""
    try:
        tree = ast.parse(origin.text)
    except SyntaxError:
        return None
    lines = origin.text.splitlines()
    read = CellTree(
        tree, lines, [origin.offset + k for k in range(1, len(lines) + 1)], frozenset(), (origin,)
    )
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    fn = next((n for n in ast.walk(tree) if isinstance(n, functions)), None)
    if fn is None:
        return None
    label = "lambda" if isinstance(fn, ast.Lambda) else origin.function
    more = f" +{len(places) - 1}" if len(places) > 1 else ""
    reads = hook_reads_in(read, fn, f"{kind} `{label}` (on `{places[0]}`{more})")
    if not reads:
        return [], []
    body = [
        SourceLine(read.line_of(n), "", "hook-body", origin=origin)
        for n in ast.walk(fn)
        if isinstance(n, ast.stmt | ast.expr)
    ]
    unique = {s.line: s for s in body}
    return reads, sorted(unique.values(), key=lambda s: s.line)
