"""Words of the torch.compile rule (rules/recompiles.py)."""

from __future__ import annotations

from gpu_notebook.rules.recompiles import Recompiles
from gpu_notebook.words.common import Words, worder, words


@worder(Recompiles)
def recompiles(s: Recompiles) -> Words:
    return words(
        "torch.compile keeps recompiling",
        [
            f"{s.graphs} graphs compiled in this kernel so far (cumulative, not only this cell)"
            if s.kernel
            else f"{s.graphs} graphs compiled in this run",
            f"recompile limit ({s.limit}) reached {s.hits} time(s): those frames now run uncompiled"
            if s.hits
            else f"as many graphs as the recompile limit ({s.limit})",
            "no gain bound: compile time is not separated in the measurement",
        ],
        "Keep shapes fixed (pad/bucket), or compile with dynamic=True / mark_dynamic; run with "
        "TORCH_LOGS=recompiles to see why.",
        "torch._dynamo.config.recompile_limit (8)",
    )
