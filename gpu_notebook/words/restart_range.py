"""Words for a loader's start-ups read on the clock a trial compares on (each step less its wait
for a core), shared by the remade loader's and the restarted workers' evidence."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_share
from gpu_notebook.records import StartUpBursts


def ran_clock_clause(b: StartUpBursts) -> str:
    """``; each step less its wait for a core ...`` where that reading differs from the wall's,
    else nothing: the range's ends may come from either clock."""
    if b.ran_share is None or round(b.ran_share, 2) == round(b.share, 2):
        return ""
    return (
        f"; with each step less its wait for a core (the steps' own time, as a trial compares "
        f"them) {fmt_share(b.ran_share)}"
    )
