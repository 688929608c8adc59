"""Loaders whose dataset already builds each batch in one call (unseen round 20).

``DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 64, False), batch_size=None)`` is
torch's documented batched indexing: the loader does not batch, each index the sampler yields is
a batch's list, and ``ds[indices]`` builds the batch at once; a dataset with ``__getitems__``
gets the same from a batching loader. Its data wait is the loader's own per-batch work, not
per-sample assembly: "index whole batches" names what the code already does (the unseen
batch_sampler_fetch: the product advised exactly the loader the script had).
"""

from __future__ import annotations

import ast

from gpu_notebook.cell.facts import LoaderCall
from gpu_notebook.cell.live import LiveLoader
from gpu_notebook.cell.names import dotted


def fetches_whole_batches(static: LoaderCall | None, live: LiveLoader | None) -> bool:
    """The loader hands its dataset whole batches: as the cell writes it (``batch_size=None``
    and a ``sampler=`` made by a ``...BatchSampler(...)`` call), or as the live object holds it
    (``LiveLoader.whole_batch_fetch``: the cell's name looked up where the cell builds it)."""
    if static is not None and static.unbatched and _batch_sampler_call(static.sampler):
        return True
    return live is not None and live.whole_batch_fetch


def _batch_sampler_call(text: str | None) -> bool:
    if text is None:
        return False
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    callee = dotted(node.func) if isinstance(node, ast.Call) else None
    return callee is not None and callee.split(".")[-1].endswith("BatchSampler")
