"""How sure a figure is: seeded bootstrap ranges over the steps a figure was read from.

A share of the step (data wait 22%) read from three profiled steps, or from a run whose steps
differ, is one sample; the verdict's thresholds (20% input-bound) must not be read off one
sample as a fact. Ranges are percentiles of a bootstrap over the steps (resampled with
replacement, each resample's share being the ratio of its sums, so long steps weigh what they
cost), with a fixed seed: the same steps give the same range every time. No normal assumption.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gpu_notebook.records import PhaseBreakdown

__all__ = ["LEVEL", "ratio_interval", "sampled_share_low", "share_interval"]

LEVEL = 0.9
RESAMPLES = 1000
SEED = 0


def share_interval(
    phases: PhaseBreakdown,
    phase: str | Sequence[str],
    *,
    typical: bool = False,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> tuple[float, float] | None:
    """The ``LEVEL`` range of ``phase``'s share of the step over ``phases``' steps; None when the
    phase was not measured or there are fewer than two steps. Several phases (host time outside
    the model: sync, other, unattributed): each step's sum of those measured, one share.

    ``typical``: the share of the typical step, each resample's middle step by its own share (the
    upper of two middles) rather than the ratio of its sums: one long step, a stall or a
    stand-in for many steps of a whole-run estimate, weighs one step, not its time (six steps
    each waiting 13-16% for data read 5.6% as a ratio when one 3 ms stand-in waited 1%). With
    the upper middle one odd low step of six moves the interval's low end only where a resample
    draws it four times (under 1%), not three (6%, inside the 5% tail)."""
    names = [p for p in ((phase,) if isinstance(phase, str) else phase) if p in phases.measured]
    if not names or len(phases.steps) < 2:
        return None
    part = np.fromiter(
        (sum(s.phase_us.get(p, 0.0) for p in names) for s in phases.steps), dtype=float
    )
    dur = np.fromiter((s.duration_us for s in phases.steps), dtype=float)
    return ratio_interval(part, dur, typical=typical, seed=seed, resamples=resamples)


def ratio_interval(
    part: npt.NDArray[np.float64],
    whole: npt.NDArray[np.float64],
    *,
    typical: bool = False,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> tuple[float, float] | None:
    """The ``LEVEL`` range of ``part``'s share of ``whole`` over the steps (one element each),
    each resample's share the ratio of its sums (``typical``: its middle step's own share, as
    ``share_interval`` says); None with fewer than two steps or nothing in ``whole``."""
    if part.size < 2 or whole.sum() <= 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(whole), size=(resamples, len(whole)))
    if typical:
        own = part / np.maximum(whole, 1e-12)
        shares = np.quantile(own[idx], 0.5, axis=1, method="higher")
    else:
        shares = part[idx].sum(axis=1) / np.maximum(whole[idx].sum(axis=1), 1e-12)
    tail = (1.0 - LEVEL) / 2 * 100
    return float(np.percentile(shares, tail)), float(np.percentile(shares, 100 - tail))


def sampled_share_low(share: float, samples: int, *, z: float = 1.96) -> float:
    """The low end of a share read off ``samples`` stack samples (Wilson's score interval, 95%
    two-sided): the least the share can be, with a few samples as with many. A hard count of
    samples made a run whose count sat at it flip between a finding and none (issue 26: a
    Lightning hook taking 80% of the step, 29 samples one run, 30 the next); this bound moves
    with the count instead of jumping."""
    if samples <= 0:
        return 0.0
    p = min(max(share, 0.0), 1.0)
    n = float(samples)
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))
