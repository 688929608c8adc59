"""Where the live hook dicts are: the modules a cell's names reach, and each hook slot on them.

A name the cell reads may hold the model (``model``) or an object that holds it: an HF
``Trainer`` (``trainer.model``), a user's class (``self.model``), accelerate's ``Accelerator``
(``_models``, a list), Lightning's ``Trainer`` (``_accelerator_connector.strategy
._lightning_module``, three attributes down). From each such object the walk follows instance
``__dict__`` entries and the items of plain lists, tuples and dicts, a few levels and a bounded
number of objects, to the ``nn.Module`` values; then every module's submodules. Read only: an
instance ``__dict__`` taken through the type's own slot (never a property, never ``getattr``),
``dict`` and ``list`` contents, ``type()``: nothing of the user's runs.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# A module's hook dicts, by the kind of hook torch runs from each.
MODULE_DICTS = {
    "_forward_pre_hooks": "forward pre hook",
    "_forward_hooks": "forward hook",
    "_backward_pre_hooks": "backward pre hook",
    "_backward_hooks": "backward hook",
}
_GLOBAL_DICTS = {f"_global{name}": kind for name, kind in MODULE_DICTS.items()}
_TENSOR_DICTS = ("_backward_hooks", "_post_accumulate_grad_hooks")
MAX_MODULES = 5000  # a walk bound: a model of more modules is read up to here
# Objects followed from a name to its modules: attributes (or items) this many levels down, at
# most this many objects in all, this many items of one list or dict.
MAX_DEPTH = 3
MAX_OBJECTS = 400
MAX_ITEMS = 32
_SKIPPED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType, types.CodeType, str, bytes)  # fmt: skip


@dataclass(frozen=True)
class Slot:
    """One hook in a live hook dict."""

    kind: str  # "forward hook", "gradient hook"...
    where: str  # the module's path from the cell's name (``trainer.model.0``), "*": global
    hook: Any  # what the dict holds
    holder: Any  # the module, parameter (or torch's module of global hooks) whose dict it is
    table: int  # id() of that dict
    key: Any  # the hook's key there (a RemovableHandle's ``id``)


def slots(
    namespace: Mapping[str, Any],
    names: Iterable[str],
    torch: Any,
    holders: dict[int, tuple[Any, str]] | None = None,
) -> Iterator[Slot]:
    """Every hook on the modules ``names`` reach in ``namespace``, their parameters, and
    torch's global module hooks (where a module is in reach). ``holders`` is filled with every
    module and parameter reached, hooked or not (id -> (object, path))."""
    record = holders is not None
    holders = {} if holders is None else holders
    module_cls, parameter_cls = torch.nn.Module, torch.nn.Parameter
    seen: set[int] = set()
    todo = deque(modules_reached(namespace, names, torch))
    while todo and len(seen) < MAX_MODULES:
        where, module = todo.popleft()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if record:
            holders[id(module)] = (module, where)
        held = own(module)
        for attr, kind in MODULE_DICTS.items():
            for key, hook in items(held.get(attr)):
                yield Slot(kind, where, hook, module, id(held.get(attr)), key)
        for pname, param in items(held.get("_parameters")):
            if type(param) is parameter_cls:  # exactly: a subclass may dispatch code of its own
                if record:
                    holders.setdefault(id(param), (param, f"{where}.{pname}"))
                for attr in _TENSOR_DICTS:
                    table = getattr(param, attr, None)  # torch's own slots, no user code
                    for key, hook in items(table):
                        yield Slot("gradient hook", f"{where}.{pname}", hook, param, id(table), key)
        todo.extend(
            (f"{where}.{k}", m) for k, m in items(held.get("_modules"))
            if m is not None and issubclass(type(m), module_cls)
        )  # fmt: skip
    if seen:  # the global hooks run on every module's call: read where a model is in reach
        holder = torch.nn.modules.module
        holders[id(holder)] = (holder, "*")
        globals_ = vars(holder)
        for attr, kind in _GLOBAL_DICTS.items():
            for key, hook in items(globals_.get(attr)):
                yield Slot(kind, "*", hook, holder, id(globals_.get(attr)), key)


def modules_reached(
    namespace: Mapping[str, Any], names: Iterable[str], torch: Any
) -> list[tuple[str, Any]]:
    """(path, module) for each module a name holds, or that an object a name holds reaches
    through its attributes and plain containers (breadth first, the shortest path named):
    the names' own modules first."""
    module_cls = torch.nn.Module
    found: list[tuple[str, Any]] = []
    todo: deque[tuple[str, Any, int]] = deque()
    for name in sorted(set(names)):
        try:
            value = namespace.get(name)
        except Exception:  # noqa: BLE001 -- a user's namespace mapping may raise on lookup
            continue
        if issubclass(type(value), module_cls):
            found.append((name, value))
        elif not _leaf(value, torch):
            todo.append((name, value, 0))
    seen = {id(m) for _, m in found}
    visited = 0
    while todo and visited < MAX_OBJECTS:
        where, obj, depth = todo.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        visited += 1
        for key, value in _inside(obj, where):
            if issubclass(type(value), module_cls):
                if id(value) not in seen:
                    seen.add(id(value))
                    found.append((key, value))
            elif depth + 1 < MAX_DEPTH and not _leaf(value, torch):
                todo.append((key, value, depth + 1))
    return found


def _inside(obj: Any, where: str) -> list[tuple[str, Any]]:
    """(path, value) of what ``obj`` holds: a plain list's, tuple's or dict's items, or an
    instance's ``__dict__`` entries."""
    kind = type(obj)
    if kind is list or kind is tuple:
        return [(f"{where}[{k}]", v) for k, v in enumerate(obj[:MAX_ITEMS])]
    if kind is dict:
        # A key is named only where its repr is Python's own (a user's class's may run code).
        return [
            (f"{where}[{k!r}]" if type(k) in (str, int) else f"{where}[...]", v)
            for k, v in list(dict.items(obj))[:MAX_ITEMS]
        ]
    return [(f"{where}.{k}", v) for k, v in items(own(obj)) if type(k) is str]


def _leaf(value: Any, torch: Any) -> bool:
    """Nothing to follow: no value, a class, module, function, text, or a tensor. By ``type()``:
    ``isinstance`` would ask the object's own ``__class__``, which a proxy's code answers."""
    return value is None or issubclass(type(value), (*_SKIPPED, torch.Tensor))


def own(obj: Any) -> dict[str, Any]:
    """``obj``'s instance ``__dict__`` through the C slot types give it: {} where a class
    defines ``__dict__`` itself (a property would run its code) or has none."""
    if not _plain_slot(type(obj)):
        return {}
    try:
        held = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return {}
    return held if type(held) is dict else {}


def _plain_slot(kind: type) -> bool:
    """The type's instances keep their ``__dict__`` in the slot Python makes."""
    for klass in kind.__mro__:
        slot = vars(klass).get("__dict__")
        if slot is not None:
            return isinstance(slot, types.GetSetDescriptorType)
    return False


def items(held: Any) -> list[tuple[Any, Any]]:
    """A dict's items (a torch hook dict: an ``OrderedDict`` of id -> hook), else none."""
    return list(dict.items(held)) if issubclass(type(held), dict) and held else []
