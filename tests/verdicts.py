"""A real run's verdict, held to the gate the product read it by.

Where a run's steps waited for a core at least ``TOO_BUSY_WAIT`` of their time (other programs
held the CPU: a loaded CI machine), and the deciding share lies on both sides of its line with
that wait put elsewhere, the product rightly names no bound ("Too busy to judge",
analysis/too_busy). A test of a real run that expects a verdict then checks that this is what
the recorded readings gave, and that the share as read still gave the expected verdict: the
mechanism is asserted either way, never the machine's load.
"""

from __future__ import annotations

from typing import get_args

from gpu_notebook.analysis.too_busy import TOO_BUSY_WAIT
from gpu_notebook.records import Report, VerdictCategory


def judged_as(report: Report, category: str) -> bool:
    """Assert that ``report``'s verdict is ``category``, or too busy to judge by the recorded
    gate with ``category`` one of the two it names; True when the verdict was judged."""
    verdict, wait = report.verdict, report.verdict.core_wait
    if wait is not None and not wait.judged:
        # The gate, from the readings the report carries: the steps mostly waited, and the
        # range the share reads with that wait put elsewhere holds the line.
        assert wait.wait_share >= TOO_BUSY_WAIT and wait.low < wait.line <= wait.high, wait
        # Both verdicts are named: the one the shares give as read, and the other side.
        assert category in (wait.found, wait.other), wait
        assert verdict.category == "unknown" and verdict.headline.startswith("Too busy to judge")
        return False
    assert verdict.category == category, verdict
    return True


def judged_among(report: Report, categories: tuple[str, ...]) -> bool:
    """``judged_as`` for a run whose verdict may be any of ``categories`` (which one may depend
    on the load): too busy to judge by the recorded gate is accepted where what the readings
    gave as read is one of them; True when the verdict was judged."""
    verdict, wait = report.verdict, report.verdict.core_wait
    if wait is not None and not wait.judged:
        assert wait.wait_share >= TOO_BUSY_WAIT and wait.low <= wait.line <= wait.high, wait
        assert wait.found in categories, wait
        assert verdict.category == "unknown" and verdict.headline.startswith("Too busy to judge")
        return False
    assert verdict.category in categories, verdict
    return True


def judged_at_all(report: Report) -> bool:
    """``judged_among`` every category but "unknown": a run whose steps were measured gives a
    verdict, or (its steps mostly waiting for a core, the deciding share on both sides of its
    line) too busy to judge by the recorded gate, what the shares gave as read a verdict. Any
    other "unknown" (no step, no compute evidence, the window not the run's) fails, load or not.
    True when the verdict was judged."""
    known = tuple(c for c in get_args(VerdictCategory) if c != "unknown")
    return judged_among(report, known)
