"""Fixes: source-to-source codemods of a user's cell, returned as a Patch (never run) or a Refusal.

Pure functions of the cell's text: no torch, no IPython shell, no notebook. The bridge inserts a
Patch's ``source_after`` as a new cell below the measured one; the user decides to run it.

Usage::

    from gpu_notebook.fixes import apply_fix

    result = apply_fix("dataloader_workers", cell_source, num_workers=4)  # Patch | Refusal
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu_notebook.fixes.catalog import (
        FIXES,
        HEADER_PREFIX,
        apply_fix,
        describe,
        inserted_patch,
        prepended_patch,
        to_proposal,
    )
    from gpu_notebook.fixes.records import Fix, Patch, Refusal

__all__ = [
    "FIXES",
    "HEADER_PREFIX",
    "Fix",
    "Patch",
    "Refusal",
    "apply_fix",
    "describe",
    "inserted_patch",
    "prepended_patch",
    "to_proposal",
]

# Imported on first use: the catalog imports libcst (~0.3 s), and a report builds its patches
# only when a view or a file shows them (``gpucheck run`` prints text and builds none); importing
# ``gpu_notebook.fixes.records`` alone must not pay for it.
_FROM_RECORDS = {"Fix", "Patch", "Refusal"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(
        "gpu_notebook.fixes.records" if name in _FROM_RECORDS else "gpu_notebook.fixes.catalog"
    )
    return getattr(module, name)
