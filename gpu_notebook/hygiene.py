"""Leave the process's warning filters as we found them when our own imports change them.

Some libraries we import change global state at import time: bokeh adds ``warnings`` filters
(``simplefilter("always", BokehDeprecationWarning)``...). A user who never asked for bokeh would
find them in ``warnings.filters`` after their first measured cell. :func:`our_imports_leave_no_filters`
removes, of the filters added inside it, those for the warning classes of the packages only we
import. Nothing else is touched: a filter that torch or numpy adds while the user imports them
on another thread (the warm-up imports run beside the user's first cells) is theirs, in its place.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# Packages the user gets only through us: their import-time filters are ours to take back.
OUR_PACKAGES = ("bokeh", "libcst", "jinja2", "msgspec", "anywidget", "gpu_notebook")


def _ours(entry: object) -> bool:
    category = entry[2] if isinstance(entry, tuple) and len(entry) > 2 else None
    classes = category if isinstance(category, tuple) else (category,)
    return any(isinstance(c, type) and c.__module__.split(".")[0] in OUR_PACKAGES for c in classes)


@contextmanager
def our_imports_leave_no_filters() -> Iterator[None]:
    before = list(warnings.filters)
    try:
        yield
    finally:
        added = [f for f in warnings.filters if f not in before and _ours(f)]
        if added:
            filters: list[object] = warnings.filters  # type: ignore[assignment]  # a list at run time
            filters[:] = [f for f in filters if f not in added]
            warnings._filters_mutated()  # type: ignore[attr-defined]  # invalidate the cached lookups
