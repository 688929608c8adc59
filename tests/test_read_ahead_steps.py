"""A loop whose iterator reads the loader one batch ahead (accelerate's DataLoaderShard under the
HF Trainer, a user's prefetching generator, a CUDA-prefetcher class) reads batch k+1 from the
DataLoader in the step that trains batch k. Where batches differ in size (a short last batch, a
bucketing sampler), each step is credited the batch it consumed, not the one read for the next
step: main read HF Trainer's 32 + 16 an epoch as "batch 16" for every step (unseen round 18),
and a one-ahead generator over 60 uneven batches as the next batch's size at every step.

Real DataLoaders and real autograd; the reference is the size of the batch each step trained.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import pytest
import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from gpu_notebook.capture.stepclock import StepClock


def _one_ahead(loader: Iterable) -> Iterator:
    """A user's prefetching generator: the next batch is fetched before this one is yielded."""
    it = iter(loader)
    try:
        nxt = next(it)
    except StopIteration:
        return
    for batch in it:
        yield nxt
        nxt = batch
    yield nxt


class _Prefetcher:
    """The CUDA-prefetcher shape (a class holding the next batch, loaded in ``preload``), on CPU."""

    def __init__(self, loader: Iterable) -> None:
        self.it = iter(loader)
        self.preload()

    def preload(self) -> None:
        try:
            self.next = next(self.it)
        except StopIteration:
            self.next = None

    def __iter__(self) -> _Prefetcher:
        return self

    def __next__(self):
        batch = self.next
        if batch is None:
            raise StopIteration
        self.preload()
        return batch


class _Buckets(Sampler[list[int]]):
    """Batches of differing sizes in a fixed cycle (a bucketing sampler)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def __iter__(self):
        start = 0
        for n in self.sizes:
            yield list(range(start, start + n))
            start += n

    def __len__(self) -> int:
        return len(self.sizes)


def _run(loader: DataLoader, wrap: Callable[[DataLoader], Iterable], epochs: int, micro: int = 1):
    """Trains ``epochs`` epochs over ``wrap(loader)``, ``micro`` micro-batches a step (each read,
    then a backward each, then the step: HF's get_batch_samples). Returns (each step's batch
    size as trained, each step's batch size as recorded)."""
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    trained: list[int] = []
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(epochs):
            it = iter(wrap(loader))
            while True:
                batches = []
                for _ in range(micro):
                    try:
                        batches.append(next(it))
                    except StopIteration:
                        break
                if not batches:
                    break
                for x, y in batches:
                    torch.nn.functional.mse_loss(net(x), y).backward()
                opt.step()
                opt.zero_grad()
                trained.append(sum(len(x) for x, _ in batches))
    finally:
        clock.uninstall()
    return trained, [s.batch_size for s in clock.record().steps]


def _data(n: int) -> TensorDataset:
    return TensorDataset(torch.randn(n, 4), torch.randn(n, 1))


_WRAPPERS = {"generator": _one_ahead, "prefetcher": _Prefetcher}


@pytest.mark.parametrize("wrapper", list(_WRAPPERS))
@pytest.mark.parametrize("epochs", [1, 4])
def test_a_short_last_batch_read_ahead_is_credited_to_the_step_that_trains_it(wrapper, epochs):
    # 48 samples in batches of 32: 32 + 16 an epoch (unseen round 18's HF Trainer script).
    trained, recorded = _run(DataLoader(_data(48), batch_size=32), _WRAPPERS[wrapper], epochs)
    assert trained == [32, 16] * epochs
    assert recorded == trained


@pytest.mark.parametrize("wrapper", list(_WRAPPERS))
def test_uneven_batches_of_one_long_epoch_read_ahead_are_each_steps_own(wrapper):
    # One epoch of 60 steps from a bucketing sampler: the steps are corrected once the
    # loader's end shows the loop reads ahead; the samples over the run are the true count.
    sizes = [4, 12, 8] * 20
    loader = DataLoader(_data(sum(sizes)), batch_sampler=_Buckets(sizes))
    trained, recorded = _run(loader, _WRAPPERS[wrapper], epochs=1)
    assert trained == sizes
    assert recorded == sizes
    assert sum(recorded) == sum(sizes)


def test_micro_batches_read_ahead_are_credited_to_their_step():
    # Two micro-batches a step read through a one-ahead reader (HF Trainer under
    # gradient_accumulation_steps over accelerate's loader), uneven sizes, three epochs.
    sizes = [4, 12, 8, 6, 10]
    loader = DataLoader(_data(sum(sizes)), batch_sampler=_Buckets(sizes))
    trained, recorded = _run(loader, _one_ahead, epochs=3, micro=2)
    assert trained == [16, 14, 10] * 3
    assert recorded == trained


def _plain(loader: DataLoader) -> Iterable:
    return loader


def _skip_first(loader: DataLoader) -> Iterator:
    """A loop that reads the epoch's first batch and trains from the second on (no read ahead:
    the second read is the step's own)."""
    it = iter(loader)
    next(it)
    yield from it


@pytest.mark.parametrize("wrap", [_plain, _skip_first])
def test_a_loop_that_reads_its_own_batch_is_left_as_read(wrap):
    # The controls: uneven batches read in their own step keep their sizes, whether or not
    # the epoch's first read is skipped (the same two reads before the first backward).
    sizes = [4, 12, 8] * 4
    loader = DataLoader(_data(sum(sizes)), batch_sampler=_Buckets(sizes))
    trained, recorded = _run(loader, wrap, epochs=2)
    assert recorded == trained


def test_samples_per_second_is_the_mean_step_s_samples_over_the_median_step():
    # 32 + 16 an epoch read ahead: each step's size right, the rate is the 24 samples a step
    # trains on average over the median step, not the modal batch's 32 (the analysis read by
    # ``gpucheck run``; a ratio of the record's own figures, independent of the machine's speed).
    from gpu_notebook.analysis.steps import step_stats

    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loader = DataLoader(_data(48), batch_size=32)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(6):
            for x, y in _one_ahead(loader):
                torch.nn.functional.mse_loss(net(x), y).backward()
                opt.step()
                opt.zero_grad()
    finally:
        clock.uninstall()
    stats = step_stats(clock.record(), warmup_steps=2)
    assert stats.batch_size in (16, 32)
    assert stats.median_s and stats.samples_per_s == pytest.approx(24 / stats.median_s)
