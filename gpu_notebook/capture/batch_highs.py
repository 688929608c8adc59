"""The steps at which the loop's batches reached a new largest size: the memory rule's evidence.

Memory that rises while the batches are still getting larger (variable-length sequences padded
to each batch's longest, a shuffled dataset of mixed image sizes) is the allocator growing to
the largest batch seen, not a leak: it stops once no larger batch comes. The step clock hands
each training batch the DataLoader iterator returns to ``BatchHighs.read`` with the index of
the step it feeds; the batch's size is the elements of its plain tensors (the batch itself, or
those one level inside a tuple, list or dict, a ``UserDict`` such as Hugging Face's
``BatchEncoding`` by its ``.data``; types read with ``type()``, so nothing of the user's runs). A
step is kept where that size beats every earlier batch's by more than ``GROWTH``: in a run of
shuffled batches new highs come rarer and rarer, a few dozen at most, and they are bounded.

``Tensor.numel`` reads the tensor's shape (no operator is dispatched, nothing is copied, a
tensor on a device is not waited for); only plain ``torch.Tensor`` objects are read, so no
subclass or mode sees it. Nothing of the batch is kept.
"""

from __future__ import annotations

from collections import UserDict
from typing import Any

from gpu_notebook.records import BatchHighsReading

GROWTH = 0.01  # a batch 1% over the largest so far is a new high
HIGHS_KEPT = 256  # steps kept; past it the reading says it stopped (``complete`` False)


class BatchHighs:
    """Steps where the batches reached a new largest size (``read``), handed up (``record``)."""

    def __init__(self) -> None:
        self._tensor: Any = None
        self._modes_on: Any = None
        self._largest = 0
        self._highs: list[int] = []
        self._reads = 0
        self._sized = 0
        self._complete = True

    def read(self, step: int, batch: Any) -> None:
        """Count one batch's elements against the largest so far (never raises). One call a
        step, nothing else of ours (tests/test_capture_cost.py counts them)."""
        self._reads += 1
        if not self._complete:
            return
        plain = self._tensor
        if plain is None:
            import torch

            self._tensor = plain = torch.Tensor
            self._modes_on = torch._C._is_torch_function_mode_enabled
        if self._modes_on():
            return  # a torch-function mode of the cell's would see ``numel``
        try:
            if type(batch) is plain:
                size = batch.numel()
            else:
                # Types read with type(): no property or __class__ of the user's runs.
                kind = type(batch)
                if issubclass(kind, UserDict):  # Hugging Face's BatchEncoding
                    batch, kind = batch.data, type(batch.data)
                if issubclass(kind, dict):
                    parts = batch.values()
                elif issubclass(kind, tuple | list):
                    parts = batch
                else:
                    return
                size = 0
                for part in parts:
                    if type(part) is plain:
                        size += part.numel()
        except Exception:  # noqa: BLE001 -- a batch we cannot size says nothing; the loop goes on
            return
        if size <= 0:
            return
        self._sized += 1
        if size > self._largest * (1 + GROWTH):
            self._largest = size
            if not self._highs or self._highs[-1] != step:
                self._highs.append(step)
            if len(self._highs) >= HIGHS_KEPT:
                self._complete = False

    def record(self) -> BatchHighsReading | None:
        if not self._sized:
            return None
        return BatchHighsReading(
            steps=tuple(self._highs),
            reads=self._reads,
            sized=self._sized,
            complete=self._complete,
        )
