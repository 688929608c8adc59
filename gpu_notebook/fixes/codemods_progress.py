"""Codemod of a progress bar redrawn on every step: ``bar_refresh_off``.

``bar.set_postfix(loss=...)`` and ``bar.set_description(...)`` redraw a tqdm bar on each call
(``refresh=True`` by default), bypassing its ``mininterval``: called every step, they write the
bar to the terminal every step. ``refresh=False`` stores the values only; the bar shows the
latest at its next redraw (the loop's own ``update``, at most every ``mininterval``).

What it edits is what the rule counted: the per-step calls of the cell's facts
(``SourceFacts.redraws``, cell/syncs.redraws). It never searches the cell.
"""

from __future__ import annotations

import libcst as cst

from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    expression,
    facts_of,
    nodes_of,
    replace_nodes,
    set_keyword,
)
from gpu_notebook.fixes.records import Fix


def bar_refresh_off(module: cst.Module) -> CodemodResult:
    """Pass ``refresh=False`` to the per-step ``set_postfix``/``set_description`` calls."""
    facts = facts_of(module)
    lines = [s for s in facts.per_step(facts.redraws) if s.origin is None]
    calls = [n for n in nodes_of(module, [s.node for s in lines]) if isinstance(n, cst.Call)]
    if not calls:
        return Declined(
            "no progress-bar call in a loop of this cell redraws on each call (set_postfix or "
            "set_description without refresh=False)"
        )
    edits: dict[cst.CSTNode, Replacement] = dict.fromkeys(calls, _refresh_off)
    return Edited(replace_nodes(module, edits), "refresh=False")


def _refresh_off(call: cst.Call) -> cst.Call:
    return set_keyword(call, "refresh", expression("False"))


BAR_REFRESH_OFF = Fix(
    "bar_refresh_off",
    "Let the progress bar redraw at its own interval",
    (
        "set_postfix/set_description redraw the bar on every call, bypassing its mininterval.",
        "refresh=False stores the values; the bar shows the latest at its next redraw.",
    ),
    "https://tqdm.github.io/docs/tqdm/#set_postfix",
    bar_refresh_off,
)
