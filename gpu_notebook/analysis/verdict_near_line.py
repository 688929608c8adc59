"""A verdict's line read with the deciding share's range: the same code gives the same answer.

A share read against a fixed line (data wait 20%: input-bound) as a point gives one verdict to
a run whose share reads 19% and another to the next run of the same program at 21%. The share
is read with its 90% interval over the steps it rests on (the run's steps where the step clock
overrules the window: ``verdict.run_data_overrules``; else the window's, ``share_interval``),
widened as a finding's level is (``level_range``) by what two runs of the same code differ by
on a quiet machine (``RUN_TO_RUN``): another run of this code may read up to
``reach(high, margin)``, or as little as its mirror, ``(low - margin) / (1 - margin)`` (a step
``margin`` shorter, the whole difference out of this phase).

A range whose widened top reaches the line decides as the line (the line's verdict, said as near
it), as ``host.overhead_reach`` decides host-bound: two runs whose shares differ within their
margin on either side of the line then give one verdict, and a run clearly under (its top,
widened, short of the line) or clearly past (its low end past it, narrowed) is read as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.analysis.level_range import reach

__all__ = ["LineReading", "line_reading"]


@dataclass(frozen=True)
class LineReading:
    """One share against one line: ``share`` as read, its range ``low``-``high`` over ``steps``
    (None: not read, the point alone decides), and ``margin``, what two runs may differ by."""

    share: float
    line: float
    low: float | None = None
    high: float | None = None
    steps: int = 0
    margin: float = 0.0

    @property
    def reaches(self) -> bool:
        """The line's verdict: the share at or past the line, or its widened top reaching it."""
        if self.share >= self.line:
            return True
        return self.high is not None and reach(self.high, self.margin) >= self.line

    @property
    def near(self) -> bool:
        """Another run of this code may read the share on the other side of the line: its range,
        widened by the margin, holds the line."""
        if self.low is None or self.high is None:
            return False
        least = max(0.0, (min(self.low, self.share) - self.margin) / (1.0 - self.margin))
        return least < self.line <= reach(max(self.high, self.share), self.margin)


def line_reading(
    share: float,
    line: float,
    span: tuple[float, float] | None,
    steps: int,
    *,
    widen: bool = True,
) -> LineReading:
    """``share`` against ``line`` with its range ``span`` (None: no range read) over ``steps``,
    widened by ``RUN_TO_RUN``. Not by the run's own margin (``Analysis.run_margin``): that is the
    spread of its fifths' steps, which load moves (29%-33% at load 16-19 on 2 cores), and a
    margin that wide reaches the line from nothing (a data wait of 0% read input-bound): the
    verdict would move with the machine, the flip this reading exists to stop. ``widen``
    False: the range alone, for a line within two margins of nothing (the host's wait in
    collectives, 10%: a margin's reach would name 5.5% of the step communication-bound)."""
    if span is None:
        return LineReading(share, line)
    margin = RUN_TO_RUN if widen else 0.0
    return LineReading(share, line, span[0], span[1], steps, margin)
