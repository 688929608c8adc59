"""Leave the process's warning filters as we found them when our own imports change them.

Some libraries we import change global state at import time: bokeh adds ``warnings`` filters
(``simplefilter("always", BokehDeprecationWarning)``...). A user who never asked for bokeh would
find them in ``warnings.filters`` after their first measured cell. Only filters for the warning
classes of packages that *we* imported first are taken back: a package the user imported before
us added its filters for them, and they stay.

Taken back twice: when our imports end, and after each measured cell (``sweep``). The second
catches what a race put back: the warm-up imports run on a thread beside the user's first cells,
and ``warnings.catch_warnings`` (torch and many libraries use it) restores, on exit, the list
object it saved on entry, which may hold filters removed meanwhile.

bokeh also replaces ``warnings.formatwarning`` with a wrapper of its own at import. Python passes
a warning's ``source`` (an unclosed file, an unawaited coroutine) only to its own
``formatwarning``: under the wrapper the "Enable tracemalloc to get the object allocation
traceback" line, or the allocation traceback itself, was gone from every such warning for the
rest of the session. ``warnings.formatwarning``/``showwarning`` set by a package we imported
first are taken back the same way, to the function they wrap.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# Packages the user gets only through us: their import-time filters are ours to take back.
OUR_PACKAGES = ("bokeh", "libcst", "jinja2", "msgspec", "anywidget", "gpu_notebook")

# Of those, the ones not imported yet when our imports first ran: their filters are ours.
_FIRST_IMPORTED_BY_US: set[str] = set()
_SEEN = False


def _note_first_importer() -> None:
    global _SEEN
    if not _SEEN:
        _SEEN = True
        _FIRST_IMPORTED_BY_US.update(p for p in OUR_PACKAGES if p not in sys.modules)
        _FIRST_IMPORTED_BY_US.add("gpu_notebook")


def _ours(entry: object) -> bool:
    category = entry[2] if isinstance(entry, tuple) and len(entry) > 2 else None
    classes = category if isinstance(category, tuple) else (category,)
    return any(
        isinstance(c, type) and c.__module__.split(".")[0] in _FIRST_IMPORTED_BY_US for c in classes
    )


def _is_ours(fn: object) -> bool:
    module = getattr(fn, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] in _FIRST_IMPORTED_BY_US


def _unwrapped(fn: object, python_own: object) -> object:
    """The function an import-time wrapper of a package of ours wraps (bokeh's holds it in its
    closure); Python's own where that cannot be told."""
    while _is_ours(fn):
        cells = getattr(fn, "__closure__", None) or ()
        inner = [c.cell_contents for c in cells if callable(c.cell_contents)]
        fn = inner[0] if len(inner) == 1 else python_own
    return fn


def _hooks_taken_back() -> None:
    for name, python_own in (
        ("formatwarning", getattr(warnings, "_formatwarning_orig", None)),
        ("showwarning", getattr(warnings, "_showwarning_orig", None)),
    ):
        current = getattr(warnings, name, None)
        if python_own is not None and _is_ours(current):
            setattr(warnings, name, _unwrapped(current, python_own))


def sweep() -> None:
    """Remove every filter for a warning class of a package we imported first, and take back
    the warning hooks such a package replaced."""
    _hooks_taken_back()
    filters: list[object] = warnings.filters  # type: ignore[assignment]  # a list at run time
    kept = [f for f in filters if not _ours(f)]
    if len(kept) != len(filters):
        filters[:] = kept
        warnings._filters_mutated()  # type: ignore[attr-defined]  # invalidate the cached lookups


@contextmanager
def our_imports_leave_no_filters() -> Iterator[None]:
    _note_first_importer()
    try:
        yield
    finally:
        sweep()
