"""The functions the cell calls that the user defined before it: read with the cell, as one text.

A common notebook defines ``def train_one_epoch(model, loader, opt): for x, y in loader: ...``
in one cell and measures ``for epoch in range(3): train_one_epoch(model, loader, opt)`` in
another: the step loop, its ``.item()`` and its ``print`` are not in the measured cell. Read
alone, the cell says nothing about them; read with the functions it calls, every family of facts
finds them where they are.

The reading is a text: the source of each such function (from its code object, through
``inspect``/``linecache``: IPython caches each cell there, a user's module is on disk), then the
cell. Its lines above the cell are numbered apart (``Origin.offset``: never a line of the cell),
and every fact found there keeps its :class:`~gpu_notebook.cell.facts.Origin`: the cell or file
and its own line ("In[3] line 4", "utils.py:14"). The same text, patched, is the fix's cell: the
patched definition, then the cell, so running it redefines and runs (a fresh kernel included, as
the two cells ran).

Only the user's code is read: functions of another cell of this session, or of a ``.py`` file
outside the standard library and the installed packages (never a framework's, never ours), at
module level (a nested function cannot be redefined on its own), and only those that hold a loop
or a ``.backward()``: a helper that builds a model is no step. Depth bounded: the cell's calls,
and what those call in turn (``train_one_epoch`` calling ``train_step``), ``MAX_DEPTH`` levels.

A class of the user's that derives from a framework's (a LightningModule or DataModule, a torch
``Dataset`` or ``nn.Module``, an HF ``Trainer`` subclass or callback) is read whole when the code
makes it (``model = Lit()``): the framework calls its methods (``train_dataloader``,
``training_step``, ``__getitem__``), the code never does. One the cell only hands over
(``trainer.fit(model)``, made in an earlier cell) is read too, marked made before the cell: the
fix says the change and makes none (the object keeps the class it was made from).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import sys
import textwrap
from collections.abc import Iterator, Mapping
from functools import lru_cache
from types import FunctionType, ModuleType
from typing import Any

from gpu_notebook.cell.facts import ORIGIN_LINES, Origin
from gpu_notebook.cell.ipython import NotPythonCell, cell_number, magic_statements, protect
from gpu_notebook.cell.names import has_backward
from gpu_notebook.cell.parse import parse_ast

MAX_DEPTH = 2  # the cell's calls, and theirs
MAX_CALLEES = 8  # functions read at most: a cell is not a program's call graph


def callees(source: str, namespace: Mapping[str, Any] | None) -> tuple[Origin, ...]:
    """The user's functions ``source`` (a cell, its magic line included or not) calls, and
    those they call (``MAX_DEPTH``), each read from where it was defined; in the order the
    reading puts them (first found first). Never raises on user code: a function whose source
    cannot be read is left out."""
    if not namespace:
        return ()
    try:
        cell = protect(source)
        tree = parse_ast(cell.code)
    except (NotPythonCell, SyntaxError, ValueError):
        return ()
    hidden = magic_statements(cell)
    if hidden:  # `%time hist = fit(model, epochs=2)` calls fit (unseen 39)
        tree = ast.Module(body=[*tree.body, *hidden], type_ignores=[])
    bound_here = _bound(tree)
    found: list[Origin] = []
    seen: set[int] = set()
    frontier: list[tuple[ast.AST, Mapping[str, Any], set[str]]] = [(tree, namespace, bound_here)]
    for depth in range(MAX_DEPTH):
        following: list[tuple[ast.AST, Mapping[str, Any], set[str]]] = []
        for node, names, local in frontier:
            # Each with the name the code calls it through (None: a function) and whether
            # that object is made here (a patched class above the code reaches it).
            called: list[tuple[FunctionType | type, str | None, bool]] = [
                (fn, None, True) for fn in _called_functions(node, names, local)
            ]
            # A framework class the code makes (``model = Lit()``): the framework calls its
            # methods, the code never does; its object is made here, from the class read above.
            called += [(cls, held, True) for cls, held in made_classes(node, names, local)]
            if depth == 0:  # a method of an object the cell holds (``trainer.fit()``)
                called += [
                    (cls, held, held in local)
                    for cls, held in _called_methods(node, names)
                    if not _defined_here(cls, names, local)
                ]
                # A framework object of an earlier cell the cell hands over (``fit(model)``):
                # read so the fix can say the change, never made (it keeps its class).
                called += [(cls, held, False) for cls, held in _handed_objects(node, names, local)]
            for target, instance, made_here in called:
                if id(target) in seen or len(found) >= MAX_CALLEES:
                    continue
                seen.add(id(target))
                index = len(found) + 1
                origin = _origin(target, index, instance, made_here)
                if origin is None:
                    continue
                found.append(origin)
                body = ast.parse(origin.text)
                scope = getattr(sys.modules.get(target.__module__), "__dict__", None)
                globals_ = target.__globals__ if isinstance(target, FunctionType) else scope
                if isinstance(globals_, Mapping):
                    following.append((body, globals_, _bound(body) - {target.__name__}))
        frontier = following
    return tuple(found)


def reading(source: str, origins: tuple[Origin, ...]) -> str:
    """``source`` (a cell, its magic line kept first) with the functions' definitions put
    before its body, a blank line after each: the text the fixes patch, and the patched cell a
    user runs."""
    if not origins:
        return source
    magic, newline, body = source.partition("\n") if source.startswith("%%") else ("", "", source)
    return magic + newline + "".join(o.text + "\n" for o in origins) + body


def _bound(tree: ast.AST) -> set[str]:
    """Names the code binds itself (a def of the cell shadows an earlier cell's)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _callees(
    tree: ast.AST, names: Mapping[str, Any], local: set[str]
) -> Iterator[tuple[ast.Call, Any]]:
    """Each call of ``tree`` by a name it does not bind itself, or as an attribute of a module
    that name holds (``train_epoch(...)``, ``utils.train_epoch(...)``), with what ``names``
    holds there (plain dict lookups: no user code runs; a module's own dict, so no module
    ``__getattr__`` runs either)."""
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        head = func.value if isinstance(func, ast.Attribute) else func
        if not isinstance(head, ast.Name) or head.id in local:
            continue
        try:
            held = names.get(head.id)
        except Exception:  # noqa: BLE001 - a user's namespace mapping may raise on lookup
            continue
        if isinstance(func, ast.Attribute):
            held = vars(held).get(func.attr) if isinstance(held, ModuleType) else None
        yield call, held


def _called_functions(
    tree: ast.AST, names: Mapping[str, Any], local: set[str]
) -> list[FunctionType]:
    """The plain functions ``tree`` calls by a name it does not bind itself, or as an attribute
    of a module that name holds, looked up in ``names`` (``_callees``)."""
    out: list[FunctionType] = []
    for _, held in _callees(tree, names, local):
        if isinstance(held, FunctionType) and held not in out:
            out.append(held)
    return out


def _defined_here(cls: type, names: Mapping[str, Any], local: set[str]) -> bool:
    """The class is the one the code itself defines (its name bound here, and the namespace's
    object of that name): its lines are read already. A script's own ``class Trainer`` whose
    ``fit()`` it calls read again above it doubled every fact of the class (``gpucheck run``
    hands the script's globals as the namespace)."""
    try:
        return cls.__name__ in local and names.get(cls.__name__) is cls
    except Exception:  # noqa: BLE001 - a user's namespace mapping may raise on lookup
        return False


def _called_methods(tree: ast.AST, names: Mapping[str, Any]) -> list[tuple[type, str]]:
    """The user's classes whose methods ``tree`` calls on a name (``trainer.fit()``), with that
    name: the class in the object's type's MRO that defines the method (only a plain dict
    lookup and ``type()``: no user code runs, no attribute of the object is read)."""
    out: list[tuple[type, str]] = []
    for call in ast.walk(tree):
        func = call.func if isinstance(call, ast.Call) else None
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            continue
        try:
            held = names.get(func.value.id)
        except Exception:  # noqa: BLE001 - a user's namespace mapping may raise on lookup
            continue
        if held is None or isinstance(held, (type, ModuleType, FunctionType)):
            continue
        owner = next((k for k in type(held).__mro__ if func.attr in vars(k)), None)
        method = vars(owner).get(func.attr) if owner is not None else None
        if isinstance(method, (staticmethod, classmethod)):
            method = method.__func__
        if owner is None or not isinstance(method, FunctionType):
            continue
        if owner not in [k for k, _ in out]:
            out.append((owner, func.value.id))
    return out


def made_classes(
    tree: ast.AST, names: Mapping[str, Any], local: set[str]
) -> list[tuple[type, str]]:
    """The user's framework classes (:func:`_framework_class`) ``tree`` makes by a name it does
    not bind itself (``Lit(...)``, ``data.Dm(...)``), each with the name its object is bound
    to there (``model = Lit()``), else the class's own (``trainer.fit(Lit())``)."""
    out: list[tuple[type, str]] = []
    bound_to: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                bound_to[id(node.value)] = targets[0].id
    for call, held in _callees(tree, names, local):
        if not isinstance(held, type) or not _framework_class(held):
            continue
        if held not in [k for k, _ in out]:
            out.append((held, bound_to.get(id(call), held.__name__)))
    return out


def _handed_objects(
    tree: ast.AST, names: Mapping[str, Any], local: set[str]
) -> list[tuple[type, str]]:
    """The classes of the user's framework objects made before the code (names it does not
    bind) that it hands to a call (``trainer.fit(model, datamodule=dm)``), with their names:
    plain dict lookups and ``type()``, no user code runs."""
    out: list[tuple[type, str]] = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if not isinstance(arg, ast.Name) or arg.id in local:
                continue
            try:
                held = names.get(arg.id)
            except Exception:  # noqa: BLE001 - a user's namespace mapping may raise on lookup
                continue
            if held is None or isinstance(held, (type, ModuleType, FunctionType)):
                continue
            cls = type(held)
            if _framework_class(cls) and cls not in [k for k, _ in out]:
                out.append((cls, arg.id))
    return out


# The frameworks whose classes a user's class derives from so that the framework calls its
# methods (``training_step``, ``train_dataloader``, ``forward``, ``__getitem__``, hooks).
_FRAMEWORKS = ("torch", "lightning", "pytorch_lightning", "transformers", "trl", "accelerate")


def _framework_class(cls: type) -> bool:
    """A class of the user's (not a framework's: its module is none of theirs) that derives
    from a framework's class: its methods run when the framework calls them."""
    if _framework_module(cls):
        return False
    return any(_framework_module(base) for base in cls.__mro__[1:])


def _framework_module(cls: type) -> bool:
    module = vars(cls).get("__module__")
    return isinstance(module, str) and module.partition(".")[0] in _FRAMEWORKS


def _origin(
    target: FunctionType | type, index: int, instance: str | None, made_here: bool
) -> Origin | None:
    """Where ``target`` was defined and its source, when it is the user's, at module level, and
    holds a loop or a backward; else None. A class is read whole, found by its methods' code (a
    class of a cell has no file ``inspect`` finds)."""
    if isinstance(target, type):
        codes = [f.__code__ for f in vars(target).values() if isinstance(f, FunctionType)]
        if target.__qualname__ != target.__name__ or not codes:
            return None
        filename, first = codes[0].co_filename, codes[0].co_firstlineno
    elif target.__qualname__ != target.__name__ or "<" in target.__name__:
        return None  # nested, a method or a lambda: it cannot be redefined on its own
    else:
        filename = target.__code__.co_filename
    number = cell_number(filename)
    in_file = number is None and _users_file(filename)
    if number is None and not in_file and not _other_cell(filename):
        return None
    if isinstance(target, type):
        # A framework class is read whole whatever it holds: the framework calls its methods
        # (``train_dataloader`` builds the loader, ``training_step`` holds no backward).
        read = _class_source(target, filename, first, whole=_framework_class(target))
    else:
        read = _function_source(target)
    if read is None:
        return None
    first_line, text = read
    return Origin(
        filename=filename,
        function=target.__name__,
        cell_number=number,
        in_file=in_file,
        first_line=first_line,
        offset=index * ORIGIN_LINES,
        text=text if text.endswith("\n") else text + "\n",
        instance=instance,
        made_here=made_here,
        framework=isinstance(target, type) and _framework_class(target),
    )


def _class_source(
    cls: type, filename: str, first: int, *, whole: bool = False
) -> tuple[int, str] | None:
    """(first line, source) of the module-level class of ``filename`` that holds line ``first``
    (one of its methods'), decorators included; only one that holds a step unless ``whole``."""
    lines = linecache.getlines(filename)
    try:
        module = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    defined = [
        node
        for node in module.body
        if isinstance(node, ast.ClassDef)
        and node.name == cls.__name__
        and node.end_lineno is not None
        and node.lineno <= first <= node.end_lineno
    ]
    if len(defined) != 1 or not (whole or _steps(defined[0])):
        return None
    node = defined[0]
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return start, "".join(lines[start - 1 : node.end_lineno])


def _function_source(fn: FunctionType) -> tuple[int, str] | None:
    """(first line, dedented source) of ``fn``, a function of its own."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError, IndentationError):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    defined = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(defined, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _steps(defined):
        return None
    return fn.__code__.co_firstlineno, text


def _steps(node: ast.AST) -> bool:
    """It holds a loop or a ``.backward()``: what a step or its loop is made of."""
    loops = (ast.For, ast.AsyncFor, ast.While)
    return has_backward(node) or any(isinstance(n, loops) for n in ast.walk(node))


def _other_cell(filename: str) -> bool:
    """A cell of this session that IPython does not number: terminal IPython's
    "<ipython-input-N-hash>" (numbered by :func:`cell_number`) or ipykernel's files, one folder
    per kernel ("/tmp/ipykernel_PID/HASH.py")."""
    if filename.startswith("<ipython-input-"):
        return True
    folder = os.path.basename(os.path.dirname(filename))
    return folder.startswith("ipykernel_") and filename.endswith(".py")


def _users_file(filename: str) -> bool:
    """A ``.py`` file of the user's own: on disk, outside the standard library and the
    installed packages, and not this package's."""
    if filename.startswith("<") or not os.path.isabs(filename) or not filename.endswith(".py"):
        return False
    if not os.path.isfile(filename) or any(
        part in ("site-packages", "dist-packages") for part in filename.split(os.sep)
    ):
        return False
    real = os.path.realpath(filename)
    return not any(p.startswith(_not_users()) for p in (filename, real))


@lru_cache(maxsize=1)
def _not_users() -> tuple[str, ...]:
    """Path prefixes of code that is never the user's: the standard library, the installed
    packages (and any ``site-packages`` on ``sys.path``), this package."""
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found |= {p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))}
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found.add(ours)
    prefixes = {os.path.join(p, "") for p in found} | {
        os.path.join(os.path.realpath(p), "") for p in found
    }
    return tuple(sorted(prefixes))


def defined_text(source: str, name: str) -> str | None:
    """The text of the module-level ``def name`` (or ``class name``) in ``source`` (a cell,
    IPython lines and a magic line allowed), decorators included; None when there is not
    exactly one."""
    try:
        code = protect(source, ours=True).code
        tree = ast.parse(code)
    except (NotPythonCell, SyntaxError, ValueError):
        return None
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    found = [node for node in tree.body if isinstance(node, defs) and node.name == name]
    if len(found) != 1 or found[0].end_lineno is None:
        return None
    node = found[0]
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = code.splitlines(keepends=True)
    return "".join(lines[first - 1 : node.end_lineno])
