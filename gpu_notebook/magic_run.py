"""One measured cell: capture session around the IPython cell runner, then the report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpu_notebook.capture.session import CaptureOptions, CaptureSession, LiveListener
from gpu_notebook.cellrun import CellOutcome, run_cell_body
from gpu_notebook.records import Report
from gpu_notebook.report.build import build_report


def run_measured_cell(
    shell: Any,
    cell: str,
    header_line: str,
    options: CaptureOptions,
    live_listener: LiveListener | None = None,
    history: Sequence[Report] = (),
    price_per_gpu_hour: float | None = None,
) -> Report:
    """Run ``cell`` under a capture session; the session is closed whatever the cell did."""
    session = CaptureSession(options, cell, live_listener, magic_line=header_line)
    outcome: CellOutcome | None = None
    with session:
        outcome = run_cell_body(shell, cell, header_line)
    if outcome is None:  # pragma: no cover - run_cell_body returns or raises out of the with
        outcome = CellOutcome("interrupted", "KeyboardInterrupt", None)
    run = session.finish(outcome.status, outcome.error)
    return build_report(
        run, price_per_gpu_hour=price_per_gpu_hour, namespace=shell.user_ns, history=history
    )
