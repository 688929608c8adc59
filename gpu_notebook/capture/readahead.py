"""Which batch a training step consumed where the loop's iterator reads one batch ahead.

A wrapper that fetches the next batch before it hands out the current one (accelerate's
DataLoaderShard under the HF Trainer, a user's prefetching generator, a CUDA prefetcher class)
reads batch k+1 from the DataLoader in the step that trains batch k: the loader reads the step
clock sees are one ahead of what the steps consume. Where batches differ in size (a short last
batch, a bucketing sampler), each step counted the size of the batch read for the next one:
HF Trainer over 32 + 16 an epoch read "batch 16" for every step (unseen round 18).

The reads alone cannot tell such a loop from one that reads its batch in its own step (nor
from one that skips the epoch's first batch): the loader's end does. A wrapper reading ahead
finds the end while the loop still has a batch to train: the step in which it ends runs one
backward more than it read batches. A plain loop finds it after its last step (a read of the
next epoch comes first), or, reading micro-batches, in a step that trains as many as it read.
So each step's correction is kept (the batch delivered first in the step less the one read
last), applied once an iterator's end says the loop reads ahead: to the steps since the
iterator began (their records), and as they close from then on, until an iterator's end says
otherwise (those it corrected are set back).

Typed state only, no reference to the user's objects: the iterator is known by its ``id``.
"""

from __future__ import annotations

from typing import Any

# Corrected steps kept per iterator (one an uneven batch: none where every batch is alike).
_KEPT = 4096


class ReadAhead:
    """One per step clock. ``read`` at each training read, ``ended`` at an iterator's end,
    ``close`` at each step end (under the optimizer anchor); ``decide`` where a read follows
    an end first (``read`` does)."""

    __slots__ = (
        "_delivered",
        "_ended",
        "_ended_size",
        "_first",
        "_key",
        "_last",
        "_mixed",
        "_prev",
        "_read_sum",
        "_reads",
        "_steps",
        "on",
    )

    def __init__(self) -> None:
        self.on = False  # the loop reads ahead: steps are corrected as they close
        self._key = 0  # the iterator followed (its id), 0: none
        self._prev: int | None = None  # the size of its latest read
        self._first: int | None = None  # the open step's first delivered batch (None: no read)
        self._last = 0  # ... and its latest read
        self._reads = 0  # ... and how many of the followed iterator's it read
        self._read_sum = 0  # ... their samples
        self._delivered = 0  # ... and those of the batches they delivered read ahead
        self._mixed = False  # the open step read another iterator before the one followed
        # (step index, correction, applied) of the followed iterator's steps with a correction.
        self._steps: list[tuple[int, int, bool]] = []
        self._ended: list[tuple[int, int, bool]] | None = None  # an ended iterator's, undecided
        self._ended_size = 0  # ... and its last read's samples

    def read(self, key: int, n: int | None) -> dict[int, int]:
        """A training read of ``n`` samples from iterator ``key`` (None: not known). Read
        ahead, it delivers the iterator's previous batch (its first read delivers none, the
        next one delivers it). A read first after an iterator's end decides: none read ahead
        (returns ``decide(False)``'s corrections; none otherwise)."""
        fixes = self.decide(False) if self._ended is not None else {}
        if n is None:
            return fixes
        if key != self._key:  # another iterator (each of a zip's alike: no correction)
            self._mixed = self._mixed or self._first is not None
            self._key, self._prev, self._first, self._steps, self._reads = key, None, None, [], 0
            self._read_sum = self._delivered = 0
        if self._first is None:
            self._first = n if self._prev is None else self._prev
        self._delivered += self._prev or 0
        self._read_sum += n
        self._last = self._prev = n
        self._reads += 1
        return fixes

    def ended(self, key: int) -> None:
        """Iterator ``key`` raised StopIteration: its steps wait for what comes next. Not where
        the open step read another iterator first: a validation with autograd on inside a
        training step, its backward still to come, is no loop reading ahead. The open step
        has no correction of its own: the clock credits the batch it trains after the end
        (``StepClock._loader_ended``), or ``close`` does."""
        if key == self._key:
            self._ended = None if self._mixed else self._steps
            self._ended_size = self._prev or 0
            self._steps, self._first = [], None
            self._key, self._prev = 0, None

    def close(
        self, index: int, backs: int | None, samples: int | None
    ) -> tuple[int | None, dict[int, int]]:
        """The step ``index`` ends after ``backs`` backward passes with ``samples`` counted:
        returns its samples, corrected where the loop is known to read ahead, and the
        corrections of earlier steps to make now (step index: samples). A step in which the
        followed iterator ended decides: a loop reading ahead trains one batch more than it
        read in that step (its last one, after the end); a plain loop none more.

        ``backs`` None: a lean step, its backward passes not counted. One that read no batch
        before the end trained one read in the step before: read ahead. One that read some
        leaves the loop as the timed steps found it (micro-batches read ahead, or a plain
        loop's flush of its last micro-batches: the reads alone cannot tell)."""
        first, self._first = self._first, None
        reads, self._reads = self._reads, 0
        read_sum, delivered, self._read_sum, self._delivered = self._read_sum, self._delivered, 0, 0
        self._mixed = False
        if self._ended is not None:
            if backs is None and reads:
                self._ended = None
                return samples, {}
            ahead = backs is None or backs > reads
            if ahead and samples is None:
                samples = self._ended_size
            return samples, self.decide(ahead)
        if first is None:
            return samples, {}
        # Timed, the clock kept the step's last read of the iterator (each earlier one went at
        # the next: no backward between); lean, it kept every read: read ahead, the step
        # trained the batches its reads delivered (each the one read before it).
        delta = first - self._last if backs is not None else delivered - read_sum
        if delta and len(self._steps) < _KEPT:
            self._steps.append((index, delta, self.on))
        if delta and self.on and samples is not None:
            samples = max(0, samples + delta)
        return samples, {}

    def decide(self, ahead: bool) -> dict[int, int]:
        """Whether the ended iterator was read ahead. Returns the corrections of its closed
        steps to make now, by index (set back where the loop no longer reads ahead)."""
        steps, self._ended = self._ended, None
        was, self.on = self.on, ahead
        if not steps or was == ahead:
            return {}
        sign = 1 if ahead else -1
        return {i: sign * d for i, d, applied in steps if applied != ahead}

    def forget_steps(self) -> None:
        """The steps counted so far are gone (the clock's anchor rose): none to correct."""
        self._steps = []


def corrected_rows(rows: list[tuple[Any, ...]], fixes: dict[int, int], size_at: int) -> int:
    """Adds ``fixes`` (step index: samples) to the batch size (column ``size_at``) of the rows
    kept of those steps, in place; returns how many it changed. Rows are in index order."""
    if not fixes:
        return 0
    first = min(fixes)
    changed = 0
    for pos in range(len(rows) - 1, -1, -1):
        row = rows[pos]
        if row[0] < first:
            break
        delta = fixes.get(row[0])
        if delta and row[size_at] is not None:
            rows[pos] = (*row[:size_at], max(0, row[size_at] + delta), *row[size_at + 1 :])
            changed += 1
    return changed
