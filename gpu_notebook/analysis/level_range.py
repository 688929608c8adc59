"""A finding's level as a range: what this run has shown, and what another run may read.

Same code, same answer. A rule levels a share by lines (10% medium, 20% high, ...) and reads the
share with its 90% interval (``rules.common.share_range``): the level is the one its low end
clears (``severity_in``), "at least this much of the step". Two runs of the same code differ by
more than either run's interval shows (the unseen compile_graph_break's optimizer read 19% in one
run and 26-30% in two others, at the 20% line: [medium], [medium], [low]): a run whose share sits
under a line gives the level below, the next run the level above, and the two contradict.

The run's margin (``compare_samples.run_margin``: what two runs of this code may differ by here,
at least ``RUN_TO_RUN``) says how far another run may read: a step ``m`` longer whose whole
difference is in this phase reads its share ``(s + m) / (1 + m)`` (``reach``). The level that
reach clears is the range's top (``Level.most``): the run says "medium-high" where its share's
interval, widened so, crosses the 20% line. Two runs whose shares differ within the margin then
give levels that overlap: the lower run's reach reaches the higher run's share, and each run's
range holds the level of its own share. Only the top is widened: the level a finding is ranked
and gated by (``Finding.severity``, the low end's) stays the one read, so no rule moves under
load for it (widening every rule's reading by the margin did).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.records import Severity

# Levels from lowest to highest (the rank rules.common.SEVERITY_RANK sorts by, reversed).
ORDER: tuple[Severity, ...] = ("info", "low", "medium", "high")


@dataclass(frozen=True)
class Level:
    """A share's level: ``least``, the level its interval's low end clears (what the run has
    shown: the finding's ``severity``); ``most``, the level its high end reaches widened by what
    two runs of the code differ by here (``Finding.severity_reach``), never below ``least``."""

    least: Severity
    most: Severity


def margin_of(run_margin: float | None) -> float:
    """What two runs of this code may differ by: the run's own margin, at least ``RUN_TO_RUN``."""
    return max(RUN_TO_RUN, run_margin or 0.0)


def reach(share: float, margin: float) -> float:
    """The most ``share`` may read in another run whose step is ``margin`` longer, the whole
    difference in this phase: ``(share + margin) / (1 + margin)``, at most the whole step."""
    return min(1.0, (share + margin) / (1.0 + margin))


def higher(a: Severity, b: Severity) -> Severity:
    """The higher of two levels."""
    return a if ORDER.index(a) >= ORDER.index(b) else b


def widened(least: Severity, most: Severity | None) -> Level:
    """``least`` with ``most`` as its top, never below it (None: the level is the one read)."""
    return Level(least, least if most is None else higher(least, most))
