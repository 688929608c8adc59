"""One measured cell: capture session around the IPython cell runner, then the report."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from gpu_notebook.capture.session import (
    CaptureOptions,
    CaptureSession,
    LiveListener,
    private_scratch,
)
from gpu_notebook.cell.live_hooks import hooks_at_start
from gpu_notebook.cellrun import CellOutcome, run_cell_body
from gpu_notebook.exit_signals import cleanup_before_signal_death
from gpu_notebook.hygiene import our_imports_leave_no_filters
from gpu_notebook.records import Report
from gpu_notebook.report.build import build_report


def _mark() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


@dataclass
class CellCost:
    """Where a measured cell's time went: (wall, process CPU) clock marks, in order.

    ``enter`` -> ``body_start``: the live hooks read (``cell.live_hooks``), the capture starting
    (hooks, sampler); ``body_start`` ->
    ``body_end``: the user's code; ``body_end`` -> ``closed``: profiler stopped if still on,
    hooks removed, samplers joined (the end of the cell); ``closed`` -> ``report``: the trace
    file written, analysis;
    ``report`` -> ``shown``: rendering and display. ``benchmarks/overhead.py`` reads it to split
    the cell's cost from the report's (the report's latency is a budget of its own).
    """

    marks: dict[str, tuple[float, float]] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.marks[name] = _mark()

    def span(self, first: str, last: str, *, cpu: bool = False) -> float | None:
        """Seconds between two marks (process CPU with ``cpu``); None when one is missing."""
        if first not in self.marks or last not in self.marks:
            return None
        k = 1 if cpu else 0
        return self.marks[last][k] - self.marks[first][k]


@asynccontextmanager
async def measured_cell(
    shell: Any,
    cell: str,
    header_line: str,
    options: CaptureOptions,
    live_listener: LiveListener | None = None,
    history: Sequence[Report] = (),
    price_per_gpu_hour: float | None = None,
    cost: CellCost | None = None,
    target_gpu: str | None = None,
    on_outcome: Callable[[CellOutcome], None] | None = None,
) -> AsyncIterator[Report | None]:
    """Run ``cell`` under a capture session and yield its report (None: the cell did not compile).

    The session is closed whatever the cell did; ``on_outcome`` is told how the cell ended
    (its last value included) before the report is built. The profiler's trace lives in a private folder
    (0700) for as long as the caller holds the context (to export it), and is removed after.
    """
    cost = cost if cost is not None else CellCost()
    cost.mark("enter")
    # The hooks on the cell's models now: one the cell removes after its loop ran in it.
    at_start = hooks_at_start(shell.user_ns, cell, sys.modules.get("torch"))
    session = CaptureSession(options, cell, live_listener, magic_line=header_line)
    outcome: CellOutcome | None = None
    with session:
        cost.mark("body_start")
        outcome = await run_cell_body(shell, cell, header_line)
        cost.mark("body_end")
    if on_outcome is not None:
        on_outcome(outcome)
    cost.mark("closed")
    if outcome.compiled is False:
        # A SyntaxError: IPython showed it, nothing ran, there is nothing to report.
        session.finish(outcome.status, outcome.error)
        yield None
        return
    # A SIGTERM (jupyter_client's shutdown) or SIGHUP while the report is built removes our
    # folder first, then the kernel's own handling (its default: the process ends) goes on.
    folders: list[str] = []
    with (
        cleanup_before_signal_death(lambda: _remove(folders)),
        private_scratch() as scratch,
        our_imports_leave_no_filters(),
    ):
        folders.append(scratch)
        run = session.finish(outcome.status, outcome.error, scratch=scratch)
        report = build_report(
            run,
            price_per_gpu_hour=price_per_gpu_hour,
            namespace=shell.user_ns,
            history=history,
            target_gpu=target_gpu,
            hooks_at_start=at_start,
        )
        cost.mark("report")
        yield report


def _remove(folders: list[str]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
