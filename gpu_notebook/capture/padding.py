"""Real tokens in the first batches the loop reads: the padding rule's evidence (rules/padding.py).

The step clock hands each training batch the DataLoader iterator returns (before the loop moves
it anywhere) to ``PaddingReader.read`` until ``PADDING_BATCHES`` were looked at: a few reads,
then nothing for the rest of the run. A batch is read where it holds a token field:

- an ``attention_mask`` of 0/1 (a dict batch, or Hugging Face's ``BatchEncoding``, whose dict is
  its ``.data``): each row's real tokens are its ones;
- else ``input_ids`` of a dict batch, the first 2-D integer tensor of a tuple/list batch, or a
  batch that is one such tensor: the value most rows end in is the candidate pad value, and each
  row's real tokens are those before its trailing run of it. Whether that value is padding the
  rule decides (rules/padding.py: every batch read ends in the same columns of it).

Read as numpy views of CPU tensors (``Tensor.numpy``: no operator is dispatched, so no profiler,
dispatch mode or Tensor subclass sees the reading, and nothing is copied). A tensor on another
device is never read (that would wait for the device): the batch counts in ``on_device``. Only
plain ``torch.Tensor`` objects are read; nothing is kept of the batch but the counts.
"""

from __future__ import annotations

from typing import Any

from gpu_notebook.records import PaddedBatch, PaddingReading

PADDING_BATCHES = 4  # batches looked at: the first of the run (a few reads, bounded)
MIN_LENGTH = 8  # a field shorter than this is not a sequence worth padding
_MASK = "attention_mask"
_IDS = "input_ids"


class PaddingReader:
    """The first training batches' padding, counted (``read``), then handed up (``record``)."""

    def __init__(self) -> None:
        self.reads = 0
        self._on_device = 0
        self._batches: list[PaddedBatch] = []

    def wants(self) -> bool:
        return self.reads < PADDING_BATCHES

    def read(self, batch: Any) -> None:
        """Count one batch's real tokens (never raises: a batch we cannot read is skipped); past
        the first ``PADDING_BATCHES``, nothing."""
        if not self.wants():
            return
        self.reads += 1
        try:
            found = _token_field(batch)
            if found is None:
                return
            name, tensor = found
            if tensor.device.type != "cpu":
                self._on_device += 1  # reading it would wait for the device
                return
            counted = _counted(name, tensor)
        except Exception:  # noqa: BLE001 -- a batch we cannot read has no padding; the loop goes on
            return
        if counted is not None:
            self._batches.append(counted)

    def record(self) -> PaddingReading | None:
        if not self.reads:
            return None
        return PaddingReading(tuple(self._batches), self.reads, self._on_device)


def _fields(batch: Any) -> dict[str, Any] | None:
    """A dict batch's fields (``BatchEncoding``'s ``.data``), read without the user's code."""
    if issubclass(type(batch), dict):
        return dict(dict.items(batch))
    try:
        data = object.__getattribute__(batch, "__dict__").get("data")
    except AttributeError:
        return None
    return dict(data) if type(data) is dict else None


def _token_field(batch: Any) -> tuple[str, Any] | None:
    import torch

    fields = _fields(batch)
    if fields is not None:
        for name in (_MASK, _IDS):
            value = fields.get(name)
            if type(value) is torch.Tensor and _tokens_like(value, torch):
                return name, value
        return None
    if type(batch) is torch.Tensor:
        return ("batch", batch) if _tokens_like(batch, torch) else None
    if type(batch) in (tuple, list):
        for i, value in enumerate(batch):
            if type(value) is torch.Tensor and _tokens_like(value, torch):
                return f"batch[{i}]", value
    return None


def _tokens_like(tensor: Any, torch: Any) -> bool:
    """Rows of token ids (or a mask): 2-D, integer or bool, at least ``MIN_LENGTH`` long."""
    with torch._C.DisableTorchFunction():
        if tensor.dim() != 2 or tensor.shape[1] < MIN_LENGTH or tensor.shape[0] < 1:
            return False
        return bool(tensor.dtype == torch.bool or not tensor.dtype.is_floating_point) and not (
            tensor.dtype.is_complex
        )


def _counted(name: str, tensor: Any) -> PaddedBatch | None:
    import torch

    with torch._C.DisableTorchFunction():
        if tensor.requires_grad or tensor.is_sparse:
            return None
        rows = tensor.numpy()
    length = int(rows.shape[1])
    if name == _MASK:
        if rows.min() < 0 or rows.max() > 1:
            return None  # not a 0/1 mask
        real = rows.sum(axis=1)
        return PaddedBatch(int(rows.shape[0]), length, int(real.max()), int(real.sum()), name)
    last = rows[:, -1]
    values, counts = _unique_counts(last)
    pad = int(values[counts.argmax()])
    # Each row's trailing run of the pad value: the columns from its last other value on.
    other = rows != pad
    last_real = length - other[:, ::-1].argmax(axis=1)
    last_real[~other.any(axis=1)] = 0
    return PaddedBatch(
        int(rows.shape[0]), length, int(last_real.max()), int(last_real.sum()), name, pad
    )


def _unique_counts(values: Any) -> tuple[Any, Any]:
    import numpy as np

    return np.unique(values, return_counts=True)
