"""Whether a DataLoader iterator reads a stream that its workers would each read whole.

A map-style dataset is split over workers by the sampler's indices. An ``IterableDataset`` is
not: torch copies it into every worker, and each yields all of its items unless its own code
splits the stream by ``torch.utils.data.get_worker_info()`` (torch's documentation, "Multi-process
data loading"). Adding workers to such a loader trains on every item once per worker: a fix
that changes the data, not its speed.

Read from code objects only (the names the dataset's functions refer to, nested functions and
the module-level helpers they call, a few levels deep): none of the user's code is run.
"""

from __future__ import annotations

import types
from typing import Any

# How far the walk follows a function into the module-level functions it names.
_DEPTH = 3
_SPLIT_NAME = "get_worker_info"


def unsplit_stream(iterator: Any) -> bool:
    """True when ``iterator`` (a ``_BaseDataLoaderIter``) reads an ``IterableDataset`` whose
    code never asks which worker it runs in; False for map-style data or a stream that does."""
    from torch.utils import data

    dataset = iterator.__dict__.get("_dataset")
    if not isinstance(dataset, data.IterableDataset):
        return False
    return not _splits(dataset, data)


def _splits(dataset: Any, data: Any, depth: int = 0) -> bool:
    kind = type(dataset)
    if kind.__module__.startswith("torch.utils.data"):
        # torch's own streams (ChainDataset) split nothing themselves: what they chain decides.
        inner = dataset.__dict__.get("datasets") or ()
        parts = [d for d in inner if isinstance(d, data.IterableDataset)]
        return bool(parts) and depth < _DEPTH and all(_splits(d, data, depth + 1) for d in parts)
    seen: set[int] = set()
    for klass in kind.__mro__:
        if klass.__module__.startswith("torch.utils.data") or klass is object:
            continue
        for value in vars(klass).values():
            if any(_names_split(fn, seen, 0) for fn in _functions(value)):
                return True
    return False


def _functions(value: Any) -> list[types.FunctionType]:
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget,) if isinstance(f, types.FunctionType)]
    return [value] if isinstance(value, types.FunctionType) else []


def _names_split(fn: types.FunctionType, seen: set[int], depth: int) -> bool:
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    names = _code_names(fn.__code__)
    if _SPLIT_NAME in names:
        return True
    if depth >= _DEPTH:
        return False
    helpers = (fn.__globals__.get(n) for n in names)
    return any(
        _names_split(h, seen, depth + 1) for h in helpers if isinstance(h, types.FunctionType)
    )


def _code_names(code: types.CodeType) -> set[str]:
    """Every global or attribute name the code and the functions nested in it refer to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names
