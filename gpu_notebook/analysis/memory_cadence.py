"""Where a memory line is fitted from: after the warm-up, and after the first epoch where the
run has one behind it.

The first epoch is where a loop meets every item and every batch size for the first time: a
per-item cache fills, malloc's arenas and the caching allocator grow to the sizes the data
holds (variable-length utterances padded per batch, fragmented by their mix), lazy state is
made. A leak keeps its rate in every epoch; that growth does not come back once every size was
met, or comes back slower each epoch. A line fitted from the run's first tenth through the
first epoch of a 3-epoch run reads the first epoch's growth as the slope of the whole
(stft_per_item_ctc: +55 MiB in its first 40 steps, +10 MiB in the next 80 read "Memory grows
every step"); from the first epoch's end, the growth that is left is fitted on its own.

Within the readings after it, the last epoch's own growth: a leak grows there at the line's
rate, growth that slows each epoch has little left there (stft_per_item_ctc, one run of five
still read as a line after epoch 1: +10 MiB over epoch 2, +2 over epoch 3).

The epoch bounds are the step clock's loader starts (``StepClockRecord.loader_starts``: the
steps whose batch was an iterator's first). A run of one epoch (or none: a generator, an
endless stream, ``max_steps`` inside one epoch) keeps the first-tenth start.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

__all__ = ["fit_start", "last_epoch_rate"]

# Fewer readings than this make no line (run_trend._fit's own minimum).
MIN_READINGS = 8
# The readings after the first epoch are fitted alone when they span at least this share of the
# readings' steps: a run one and a half epochs long has too little left after its first.
AFTER_SHARE = 0.5


def fit_start(points: Sequence[tuple[int, int]], loader_starts: Sequence[int]) -> int:
    """The position in ``points`` ((step, bytes) by step) the memory line is fitted from: past
    the first tenth of the readings (warm-up), and past the first epoch when the readings after
    it number ``MIN_READINGS`` or more and span ``AFTER_SHARE`` of all the readings' steps."""
    tenth = len(points) // 10
    if len(points) < MIN_READINGS:
        return tenth
    first, last = points[0][0], points[-1][0]
    ends = [s for s in sorted(loader_starts) if s > first]
    if not ends:
        return tenth
    after = bisect.bisect_left([p[0] for p in points], ends[0])
    if len(points) - after < MIN_READINGS:
        return tenth
    if last - points[after][0] < AFTER_SHARE * (last - first):
        return tenth
    return max(tenth, after)


def last_epoch_rate(x: np.ndarray, y: np.ndarray, loader_starts: Sequence[int]) -> float | None:
    """The growth per step over the run's last epoch from its first to its last readings (the
    medians of a tenth of them at each end: allocator wobble is not growth). None where the
    fitted readings ``x`` cross no epoch start, or the last epoch holds under ``MIN_READINGS``."""
    inside = [s for s in loader_starts if x[0] < s <= x[-1]]
    if not inside:
        return None
    last = x >= max(inside)
    xs, ys = x[last], y[last]
    if len(xs) < MIN_READINGS:
        return None
    k = max(1, len(xs) // 10)
    span = float(np.median(xs[-k:]) - np.median(xs[:k]))
    if span <= 0:
        return None
    return float(np.median(ys[-k:]) - np.median(ys[:k])) / span
