"""torch.compile rule: recompilation storms (best-effort).

Dynamo recompiles a function for each new guard failure (often a new shape) up to
``torch._dynamo.config.recompile_limit`` (8), then falls back to eager for it. We read Dynamo's
own counters from the live process: they are cumulative since the kernel started, not per cell
(the capture does not snapshot them yet), so the evidence says "in this kernel". Fires only when
the cell or a live model uses torch.compile. No gain bound: compile time is not separated.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, uses_compile


@dataclass(frozen=True)
class Recompiles(Said):
    graphs: int  # compiled in this kernel so far
    limit: int  # torch._dynamo.config.recompile_limit
    hits: int  # times the limit was reached
    kernel: bool = True  # counted over a notebook kernel's life; False: over this script's run


def recompiles(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    live = facts.live
    if not uses_compile(facts) or live.dynamo_unique_graphs is None:
        return None
    limit = live.dynamo_recompile_limit or 8
    hits = live.dynamo_recompile_limit_hits or 0
    if hits == 0 and live.dynamo_unique_graphs < limit:
        return None
    said = Recompiles(live.dynamo_unique_graphs, limit, hits, kernel=live.made_before)
    return found("compile.recompiles", "medium" if hits else "low", said)


TIE = 150  # where its findings tie: the verdict table's order (rules._families)
RULES = (recompiles,)
