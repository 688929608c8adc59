"""torch.compile rule: recompilation storms (best-effort).

Dynamo recompiles a function for each new guard failure (often a new shape) up to
``torch._dynamo.config.recompile_limit`` (8), then falls back to eager for it. We read Dynamo's
own counters from the live process: they are cumulative since the kernel started, not per cell
(the capture does not snapshot them yet), so the evidence says "in this kernel". Fires only when
the cell or a live model uses torch.compile. No gain bound: compile time is not separated.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import finding


def recompiles(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    live = facts.live
    compiled = facts.compiled or any(m.compiled for m in live.models)
    if not compiled or live.dynamo_unique_graphs is None:
        return None
    limit = live.dynamo_recompile_limit or 8
    hits = live.dynamo_recompile_limit_hits or 0
    if hits == 0 and live.dynamo_unique_graphs < limit:
        return None
    evidence = [
        f"{live.dynamo_unique_graphs} graphs compiled in this kernel so far (cumulative, not only this cell)",
        f"recompile limit ({limit}) reached {hits} time(s): those frames now run uncompiled"
        if hits
        else f"as many graphs as the recompile limit ({limit})",
        "no gain bound: compile time is not separated in the measurement",
    ]
    return finding(
        "compile.recompiles",
        "torch.compile keeps recompiling",
        "medium" if hits else "low",
        evidence,
        "Keep shapes fixed (pad/bucket), or compile with dynamic=True / mark_dynamic; run with "
        "TORCH_LOGS=recompiles to see why.",
        "torch._dynamo.config.recompile_limit (8)",
    )


RULES = (recompiles,)
