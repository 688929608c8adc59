"""A loop that reads another loader between (or inside) its training steps, with autograd on or
off, keeps each training step's samples its own: a validation pass between epochs or every k
steps, a batch of a second loader read once an epoch, whether the iterators live on (each its
own ``id``) or are freed as the loop goes (CPython hands the next iterator the freed one's
``id``: the clock told iterators apart by ``id`` alone, and a validation iterator's end, read
as the HF Trainer's loader ending with a batch read ahead, gave the next epoch's first step 8
samples more: "16" for 8, tests/test_invisible_capture's validation case on 2154ca5).
"""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from gpu_notebook.capture.stepclock import StepClock

_TRAIN_BATCH = 8
_EPOCHS = 3
_BATCHES = 8  # an epoch's training batches


def _clocked(loop) -> list[tuple[int, int | None]]:
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        loop()
    finally:
        clock.uninstall()
    return [(s.backward_calls, s.batch_size) for s in clock.record().steps]


def _loop(shape: str, *, grad: bool, keep: bool, other_batch: int = 16):
    """``shape``: where the loop reads its other loader (64 samples): "epoch", a
    validation pass after each epoch; "every3", one after every third step; "once", a single
    batch of a fresh iterator after each epoch; "inside", a validation pass in the middle of
    every fourth step (after its batch is read, before its backward). ``keep``: every iterator
    is kept alive, so none shares an ``id`` with another."""

    def loop() -> None:
        ds = TensorDataset(torch.randn(_BATCHES * _TRAIN_BATCH, 4), torch.randn(64, 1))
        net = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        train = DataLoader(ds, batch_size=_TRAIN_BATCH)
        other = DataLoader(ds, batch_size=other_batch)
        kept: list[object] = []

        def side(batches: int | None) -> None:
            it = iter(other)
            if keep:
                kept.append(it)
            with torch.set_grad_enabled(grad):
                for i, (x, _y) in enumerate(it):
                    net(x).sum().item()
                    if batches is not None and i + 1 == batches:
                        break

        for _ in range(_EPOCHS):
            it = iter(train)
            if keep:
                kept.append(it)
            for i, (x, y) in enumerate(it):
                loss = torch.nn.functional.mse_loss(net(x), y)
                if shape == "inside" and i % 4 == 1:
                    side(None)
                loss.backward()
                opt.step()
                opt.zero_grad()
                if shape == "every3" and i % 3 == 2:
                    side(None)
            if shape == "epoch":
                side(None)
            elif shape == "once":
                side(1)

    return loop


@pytest.mark.parametrize("keep", [False, True], ids=["freed", "kept"])
@pytest.mark.parametrize("grad", [True, False], ids=["autograd_on", "no_grad"])
@pytest.mark.parametrize("shape", ["epoch", "every3", "inside"])
def test_another_loader_read_around_the_steps_is_none_of_their_samples(shape, grad, keep):
    """2154ca5 (freed, epoch, autograd on): 16 at each epoch's first step after the first.
    Main: 24 for 8 at each step holding a validation pass with autograd on (inside)."""
    steps = _clocked(_loop(shape, grad=grad, keep=keep))
    assert steps == [(1, _TRAIN_BATCH)] * (_EPOCHS * _BATCHES)


@pytest.mark.parametrize("shape", ["epoch", "every3", "inside"])
def test_a_validation_loader_of_one_batch_with_autograd_on_is_none_of_the_steps(shape):
    """A pass of a single read, ended before any backward: its read goes when the loader ends
    (main: 72 for 8 at the step holding it or the step after it)."""
    steps = _clocked(_loop(shape, grad=True, keep=True, other_batch=64))
    assert steps == [(1, _TRAIN_BATCH)] * (_EPOCHS * _BATCHES)


@pytest.mark.parametrize("keep", [False, True], ids=["freed", "kept"])
def test_a_batch_of_a_second_loader_read_once_an_epoch_under_no_grad_is_none_of_the_steps(keep):
    """With autograd on, such a lone read before the next epoch's first read is not told from
    a zip's first step (both loaders' batches count) nor from an extra batch the step trains
    on (``if i % k == 0: loss += f(next(extra))``): that step holds it, as on main."""
    steps = _clocked(_loop("once", grad=False, keep=keep))
    assert steps == [(1, _TRAIN_BATCH)] * (_EPOCHS * _BATCHES)
