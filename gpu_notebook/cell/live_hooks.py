"""The hooks on the live modules while the cell ran, and their reads of device values.

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

Read as the cell starts (``hooks_at_start``: the code and slot of each hook, nothing attached)
and after it ran: what was on during its loop is the hooks of either reading, on a module the
cell still reaches, save those whose handles the cell removes before its loop (its source names
them, ``registered_hooks.removals_before_loop``; the handle names its slot). A hook an earlier
cell attached and the cell removes after its loop is then read; one on a model the cell rebuilt
is not. The cell's own hook functions found on are handed to ``cell.registered_hooks`` by where
their code sits in the cell (``own_positions``: two lambdas alike are two), to tell a handle
removed before the loop from one that ran. The modules a name reaches through a framework's
object (``trainer.model``): ``cell.live_hooks_reach``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import textwrap
import types
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from gpu_notebook.cell.calls import _other_cell, _users_file
from gpu_notebook.cell.facts import ORIGIN_LINES, Origin, SourceLine
from gpu_notebook.cell.ipython import NotPythonCell, cell_number, protect
from gpu_notebook.cell.live_hooks_reach import own, slots
from gpu_notebook.cell.registered_hooks import hook_reads_in
from gpu_notebook.cell.tree import CellTree

MAX_HOOKS = 16  # distinct hook functions read at most
# Where a live hook's reading lines start: far above the cell's reading (cell.calls' origins).
_FIRST_OFFSET = 1000 * ORIGIN_LINES
_Fn = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


@dataclass(frozen=True)
class HookAtStart:
    """One hook on a live module or parameter as the cell started: its function's code (not
    the function, whose closure may hold tensors) and its slot; the module or parameter it
    hangs on is held weakly (the cell may let its old model go)."""

    kind: str
    code: types.CodeType
    holder: weakref.ReferenceType[Any]
    table: int  # id() of the hook dict
    key: Any  # the hook's key there


@dataclass(frozen=True)
class HooksAtStart:
    """The live hook dicts' contents when the cell started (``hooks_at_start``): with those at
    its end, what was on during its loop, though the cell removed it after the loop."""

    hooks: tuple[HookAtStart, ...] = ()


@dataclass(frozen=True)
class LiveHooks:
    """What the live hook dicts hold for the cell."""

    # Reads in hooks defined outside the cell (another cell, a user's file): ``origin`` set.
    reads: tuple[SourceLine, ...] = ()
    # Every line of those hooks that read (their whole body), ``origin`` set: their cost.
    lines: tuple[SourceLine, ...] = ()
    # The code of the hook functions the cell's own source defines that were on a live module
    # or tensor during the cell (at its start or end; ``own_positions`` finds them in the
    # cell); None: the dicts were not read.
    own_on: tuple[types.CodeType, ...] | None = None


def hooks_at_start(
    namespace: Mapping[str, Any] | None, source: str, torch: Any
) -> HooksAtStart | None:
    """The hooks on the modules the cell's names reach before it runs (and on their parameters,
    and torch's global ones): read only, nothing attached. The names: those the cell reads and
    the globals of the functions they hold (``train(model)``'s ``model`` read inside ``train``).
    None: no namespace (a script's, empty before it runs)."""
    if namespace is None:
        return None
    if torch is None:
        return HooksAtStart()
    try:
        tree = ast.parse(protect(source).code)
    except (NotPythonCell, SyntaxError, ValueError):
        return HooksAtStart()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for name in list(names):
        value = namespace.get(name) if isinstance(namespace, dict) else None
        if type(value) is types.FunctionType:
            names |= set(value.__code__.co_names)
    found = []
    for slot in slots(namespace, names, torch):
        fn = _function(slot.hook)
        if fn is None:
            continue
        try:
            holder = weakref.ref(slot.holder)
        except TypeError:
            continue
        found.append(HookAtStart(slot.kind, fn.__code__, holder, slot.table, slot.key))
    return HooksAtStart(tuple(found))


def live_hooks(
    namespace: Mapping[str, Any] | None,
    names: Iterable[str],
    source: str,
    torch: Any,
    *,
    at_start: HooksAtStart | None = None,
    removed: Iterable[str] = (),
) -> LiveHooks:
    """The hooks on the modules ``names`` reach in ``namespace`` (and their parameters), and
    torch's global module hooks, as the cell ended; with ``at_start``, also those on the same
    modules when it started, save those whose handles it removed before its loop (``removed``:
    the dotted names that hold them, ``registered_hooks.removals_before_loop``). ``source``: the
    measured cell (or script), whose own hook functions ``cell.registered_hooks`` reads, so
    they are only named here (``own_on``)."""
    if namespace is None or torch is None:
        return LiveHooks()
    holders: dict[int, tuple[Any, str]] = {}  # what the walk reached: id -> (object, path)
    now = list(slots(namespace, names, torch, holders if at_start is not None else None))
    found: dict[tuple[types.CodeType, str], list[str]] = {}
    for slot in now:
        fn = _function(slot.hook)
        if fn is not None:
            found.setdefault((fn.__code__, slot.kind), []).append(slot.where)
    if at_start is not None:
        on = {(s.table, s.key) for s in now}
        gone = _removed_slots(namespace, removed, torch)
        for hook in at_start.hooks:
            holder = hook.holder()
            reached = holders.get(id(holder))
            if holder is None or reached is None or reached[0] is not holder:
                continue  # not on a module the cell reaches now (its model rebuilt)
            if (hook.table, hook.key) in on or (hook.table, hook.key) in gone:
                continue
            found.setdefault((hook.code, hook.kind), []).append(reached[1])
    reads: list[SourceLine] = []
    lines: list[SourceLine] = []
    own_on: list[types.CodeType] = []
    for index, ((code, kind), places) in enumerate(list(found.items())[:MAX_HOOKS]):
        text = _source(code)
        if text is None or not _users(code.co_filename):
            continue
        if text.strip() in source:  # the cell's own: read from its source (registered_hooks)
            own_on.append(code)
            continue
        origin = Origin(
            filename=code.co_filename,
            function=code.co_name,
            cell_number=cell_number(code.co_filename),
            in_file=_users_file(code.co_filename),
            first_line=code.co_firstlineno,
            offset=_FIRST_OFFSET + index * ORIGIN_LINES,
            text=text,
        )
        read = _read(origin, kind, sorted(set(places), key=places.index))
        if read is not None:
            reads += read[0]
            lines += read[1]
    return LiveHooks(tuple(reads), tuple(lines), tuple(own_on))


def _removed_slots(namespace: Mapping[str, Any], names: Iterable[str], torch: Any) -> set[Any]:
    """The (dict id, key) slots of the ``RemovableHandle`` objects the dotted ``names`` hold
    (a handle, or a list, tuple, set or dict of them), read through instance dicts only."""
    handle_cls = torch.utils.hooks.RemovableHandle
    out = set()
    for name in names:
        first, *rest = name.split(".")
        try:
            value = namespace.get(first)
        except Exception:  # noqa: BLE001 -- a user's namespace mapping may raise on lookup
            continue
        for part in rest:
            value = own(value).get(part)
        held: list[Any] = [value]
        if type(value) in (list, tuple, set):
            held = list(cast("Iterable[Any]", value))
        elif type(value) is dict:
            held = list(dict.values(value))
        for handle in held:
            if type(handle) is handle_cls:
                state = own(handle)
                ref = state.get("hooks_dict_ref")
                table = ref() if type(ref) is weakref.ReferenceType else None
                if table is not None:
                    out.add((id(table), state.get("id")))
    return out


def own_positions(tree: CellTree, codes: Iterable[types.CodeType]) -> frozenset[tuple[int, int]]:
    """The (line, column) in ``tree`` of the cell's function each code object was made from:
    by its first line where the code's file (IPython's cell, the script) lines up with the
    cell, then by the columns its instructions sit at (two lambdas on one line); where that
    cannot tell, every cell function of its name (``<lambda>``: every lambda)."""
    functions = [
        n for n in ast.walk(tree.tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and tree.in_cell(n)
    ]  # fmt: skip
    out: set[tuple[int, int]] = set()
    for code in codes:
        named = [fn for fn in functions if _name(fn) == code.co_name]
        shift = _shift(tree, code.co_filename)
        placed = [
            fn for fn in named if shift is not None and _first(fn) + shift == code.co_firstlineno
        ]  # fmt: skip
        if placed and shift is not None:
            at = _positions(code, shift)
            best = max(placed, key=lambda fn: (sum(_holds(fn, p) for p in at), -_size(fn)))
            out.add((best.lineno, best.col_offset))
        else:
            out |= {(fn.lineno, fn.col_offset) for fn in named}
    return frozenset(out)


def _positions(code: types.CodeType, shift: int) -> list[tuple[int, int]]:
    """Where the code's instructions start, in the tree's lines (the first, ``RESUME``, sits at
    column 0 of the first line: left out); none before Python 3.11 (no columns: the line
    alone tells two lambdas apart)."""
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return []
    return [
        (line - shift, col)
        for line, _end, col, _end_col in list(positions())[1:]
        if line is not None and col is not None
    ]


def _holds(fn: _Fn, at: tuple[int, int]) -> bool:
    end = (fn.end_lineno or fn.lineno, fn.end_col_offset or 0)
    return (fn.lineno, fn.col_offset) <= at < end


def _size(fn: _Fn) -> int:
    lines = (fn.end_lineno or fn.lineno) - fn.lineno
    return lines * 10_000 + (fn.end_col_offset or 0) - fn.col_offset


def _name(fn: _Fn) -> str:
    return "<lambda>" if isinstance(fn, ast.Lambda) else fn.name


def _first(fn: _Fn) -> int:
    """The line a function's code object starts at: its first decorator's, else its own."""
    decorators = [] if isinstance(fn, ast.Lambda) else fn.decorator_list
    return min([d.lineno for d in decorators] + [fn.lineno])


def _shift(tree: CellTree, filename: str) -> int | None:
    """How far the file's lines sit below the tree's (IPython's cell file and the cell read:
    0 or 1 apart, the magic line; a script: its functions read above it), by the shift under
    which most of the cell's lines are the same text; None: the file is not in linecache."""
    text = linecache.getlines(filename)
    if not text:
        return None
    above = sum(len(o.text.splitlines()) for o in tree.origins.values())
    cell = tree.lines[above:]
    best: tuple[int, int] | None = None
    for shift in range(-above - 2, -above + 3):
        same = sum(
            1 for k, line in enumerate(cell, start=above + 1)
            if 0 < k + shift <= len(text) and text[k + shift - 1].rstrip() == line.rstrip() and line.strip()
        )  # fmt: skip
        if best is None or same > best[0]:
            best = (same, shift)
    return best[1] if best is not None and best[0] > 0 else None


def _function(hook: Any) -> types.FunctionType | None:
    """The Python function a hook runs: through partials, bound methods, ``__call__``."""
    for _ in range(4):
        # By ``type()``: ``isinstance`` would ask a proxy's own ``__class__``.
        if issubclass(type(hook), functools.partial):
            hook = hook.func
        elif type(hook) is types.MethodType:
            hook = hook.__func__
        else:
            break
    if type(hook) is types.FunctionType:
        return hook
    call = inspect.getattr_static(type(hook), "__call__", None)
    return call if isinstance(call, types.FunctionType) else None


def _users(filename: str) -> bool:
    return cell_number(filename) is not None or _other_cell(filename) or _users_file(filename)


def _source(code: types.CodeType) -> str | None:
    """The function's dedented source (linecache: IPython keeps every cell there)."""
    try:
        text = textwrap.dedent(inspect.getsource(code))
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
