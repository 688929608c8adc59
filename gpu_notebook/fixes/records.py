"""Records the fixes package hands out: a Patch (the user's cell, patched) or a Refusal (why not).

Both are frozen and hold only JSON-friendly values (str, int, bool, None, tuples), so the bridge
can send them to the frontend with ``gpu_notebook.records.to_jsonable`` (msgspec) unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ParamValue = str | int | float | bool | None


@dataclass(frozen=True)
class Patch:
    """The user's cell with one fix applied, ready to be inserted as a new cell (never run)."""

    fix_id: str
    title: str
    why: tuple[str, str]  # two short lines: what is slow, what the fix changes
    doc_url: str
    source_before: str
    source_after: str  # first line (after a leading %%gpucheck line) names the fix
    diff: str  # unified diff labelled 'before' / 'after'
    changed_lines: tuple[int, ...]  # 1-based lines of source_after that are new or changed


@dataclass(frozen=True)
class Refusal:
    """A fix that cannot be made on this cell, and why (instead of broken code)."""

    fix_id: str
    reason: str
    # The reason said of a script (``gpucheck run``), where a cell's differs: a script has no
    # earlier cells and no kernel to import again in (None: ``reason`` holds for both).
    on_script: str | None = None


@dataclass(frozen=True)
class Fix:
    """One fix: its title, why it helps, where to read more, and its codemod
    (``codemod(module, **params) -> Edited | Declined``, see ``fixes/cst_tools.py``). The
    catalog's own fixes (each beside its codemod in a ``codemods_*`` module, found there) and
    those a rule module owns beside its check are applied alike, by ``apply_fix(fix, source)``."""

    fix_id: str
    title: str
    why: tuple[str, str]
    doc_url: str
    codemod: Callable[..., Any]

    @property
    def params(self) -> tuple[inspect.Parameter, ...]:
        """The codemod's keyword-only parameters (``.name``, ``.default``): the fix's."""
        found = inspect.signature(self.codemod).parameters.values()
        return tuple(p for p in found if p.kind is inspect.Parameter.KEYWORD_ONLY)
