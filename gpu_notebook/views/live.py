"""The live view while a measured cell runs; it becomes the final report in the same place.

``LiveView`` is displayed at the start of the cell, so it sits above everything the cell prints.
The sampler thread calls :meth:`LiveView.update` with each :class:`LiveStatus`; the view only
sets widget traits (a thread may not print or display: that output would land in whatever cell
runs then, as seen in JupyterLab 4.6), at most ``max_rate_hz`` times a second, from a bounded
ring of recent points. The sparklines are inline SVG in an ``ipywidgets.HTML`` value, no script. When the cell
ends, :meth:`LiveView.finish` swaps the live content for the report widget, in the same output.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets

from gpu_notebook.formatting import fmt_bytes, fmt_seconds
from gpu_notebook.records import LiveStatus, Report
from gpu_notebook.views.cell_outputs import OutputWatcher
from gpu_notebook.views.charts import cpu_axis_max
from gpu_notebook.views.html_report import esc
from gpu_notebook.views.text import render_text

__all__ = ["LiveView", "sparkline_svg"]

# On every output of ours, so a tool (or a test) can tell them from the cell's own.
OUTPUT_METADATA = {"gpu_notebook": {"view": "live"}}

SPARK_WIDTH_PX = 220
SPARK_HEIGHT_PX = 34
_GPU_COLOR = "#1f77b4"
_CPU_COLOR = "#555555"


def sparkline_svg(
    values: Sequence[float | None],
    *,
    capacity: int,
    top: float = 100.0,
    color: str = _GPU_COLOR,
    label: str = "",
) -> str:
    """A small inline SVG line of ``values`` (0..``top``), newest at the right edge.

    ``capacity`` fixes the x spacing so the line grows from the right as points arrive and
    scrolls once the ring is full. ``None`` values leave a gap. Only numbers and ``label``
    (escaped) reach the markup.
    """
    w, h = SPARK_WIDTH_PX, SPARK_HEIGHT_PX
    step = w / max(1, capacity - 1)
    offset = capacity - len(values)
    runs: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
            continue
        x = (offset + i) * step
        y = h - 1 - (h - 2) * max(0.0, min(1.0, v / top))
        runs[-1].append(f"{x:.1f},{y:.1f}")
    lines = "".join(
        f'<polyline points="{" ".join(r)}" fill="none" stroke="{color}" stroke-width="1.6"/>'
        for r in runs
        if r
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        f'role="img" aria-label="{esc(label)}" style="vertical-align:middle;background:#f1f3f5;'
        f'border-radius:3px">{lines}</svg>'
    )


def step_time_row(step_times_s: Sequence[float]) -> str:
    """Step time over the run so far (the step clock's buckets, oldest at the left): drift and
    stalls show while the cell runs. Scaled to the slowest bucket, which is written beside."""
    top = max(step_times_s) or 1.0
    svg = sparkline_svg(
        list(step_times_s), capacity=len(step_times_s), top=top, color=_CPU_COLOR,
        label="step time over the run",
    )  # fmt: skip
    return (
        f'<div style="margin:2px 0"><b style="display:inline-block;width:52px">step</b>{svg} '
        f"first {esc(fmt_seconds(step_times_s[0]))}, now {esc(fmt_seconds(step_times_s[-1]))}, "
        f"slowest {esc(fmt_seconds(top))}</div>"
    )


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _LiveBox(ipywidgets.VBox):  # type: ignore[misc]
    """The displayed box; its text/plain says what a frontend without widgets should show."""

    plain_text = "gpucheck: measuring this cell (the live view needs a widget frontend)"

    def __repr__(self) -> str:
        return self.plain_text

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data = super()._repr_mimebundle_(**kwargs)
        if isinstance(data, dict):
            data["text/plain"] = self.plain_text
        return data


class LiveView:
    """Live GPU / CPU sparklines, memory, step count and median step time, then the report.

    ``update`` may be called from any thread; it never prints. ``max_rate_hz`` caps how often
    the widgets change (points arriving between two pushes are kept in the ring and drawn at
    the next push). ``max_points``: length of the ring per series. ``cell_id``: the profiled
    cell, for the Insert-fix buttons of the report (read from the kernel when not given).
    ``clock``: monotonic seconds, replaceable in tests.
    """

    def __init__(
        self,
        *,
        max_points: int = 120,
        max_rate_hz: float = 5.0,
        cell_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, got {max_points}")
        if not max_rate_hz > 0:
            raise ValueError(f"max_rate_hz must be > 0, got {max_rate_hz}")
        if cell_id is None:
            from gpu_notebook.bridge import current_cell_id

            cell_id = current_cell_id()
        self.cell_id = cell_id
        self.max_points = max_points
        self.min_interval_s = 1.0 / max_rate_hz
        self._clock = clock
        self._lock = threading.Lock()
        self._cores = _cpu_count()
        self._cpu: deque[float | None] = deque(maxlen=max_points)
        self._gpu_util: dict[int, deque[float | None]] = {}
        self._latest: LiveStatus | None = None
        self._last_push_s: float | None = None
        self._finished = False
        self.updates = 0  # calls to update() that were accepted
        self.pushes = 0  # times the widgets were changed
        self.status_line = ipywidgets.HTML(value=self._status_html(None))
        self.sparkline = ipywidgets.HTML(value=self._spark_html())
        self.box = _LiveBox(children=(self.status_line, self.sparkline))
        self.report_view: ipywidgets.Widget | None = None
        self._handle: Any = None
        self._outputs = OutputWatcher()  # the cell's outputs: clears, and what a clear takes
        self._shown_at = 0  # the watcher's wipes when the box was last shown

    # ------------------------------------------------------------------ environment

    @staticmethod
    def available() -> bool:
        """True inside a Jupyter kernel (a ZMQ shell) with ipywidgets importable.

        Terminal IPython, plain Python and scripts get False: the magic prints the text report
        there. A kernel cannot know whether its frontend renders widgets (jupyter console does
        not); there the text/plain of the box and of the report stands in.
        """
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
        if shell is None:
            return False
        if not any(cls.__name__ == "ZMQInteractiveShell" for cls in type(shell).__mro__):
            return False
        return importlib.util.find_spec("ipywidgets") is not None

    # ------------------------------------------------------------------ lifecycle

    def show(self) -> None:
        """Display the live box in the running cell's output (call on the cell's thread).

        Every output of ours carries ``metadata["gpu_notebook"]`` (tools that compare a
        notebook run with and without the magic drop those). A display-publisher hook notes
        a ``clear_output`` the cell sends: the live box is gone then. Where the clear took
        effect through the publisher on the cell's thread (a ``clear_output()``, or a wait-clear
        taken by a display), the box is shown again right after it, and the report goes into
        it; else (a wait-clear taken by a print, or pending at the end) the report is shown
        anew instead of in its place (after the cell's last outputs again, where the cell ended
        with a ``clear_output(wait=True)`` the report would carry out: :mod:`cell_outputs`).
        The cell's own outputs (a tqdm.notebook bar a clear took) are never shown again.
        """
        from IPython import get_ipython
        from IPython.display import display

        self._handle = display(self.box, display_id=True, metadata=OUTPUT_METADATA)
        self._outputs.on_wipe = self._show_again
        self._outputs.start(getattr(get_ipython(), "display_pub", None))

    def _show_again(self) -> None:
        """The cell's clear took the live box with its outputs: show it again where the cell's
        next output goes (called by :mod:`cell_outputs` on the cell's thread, before it)."""
        from IPython.display import display

        with self._lock:
            if self._finished:
                return
        self._handle = display(self.box, display_id=True, metadata=OUTPUT_METADATA)
        self._shown_at = self._outputs.wipes

    def detach(self) -> None:
        """Stop watching the cell's output (the cell is over)."""
        self._outputs.stop()

    def discard(self) -> None:
        """No report follows (the cell did not compile): the live box leaves the output."""
        with self._lock:
            self._finished = True
        if self._handle is not None:
            self._handle.update({"text/plain": ""}, raw=True, metadata=OUTPUT_METADATA)
        self.box.close()

    def update(self, status: LiveStatus) -> None:
        """Take one sampler tick; redraw when the last redraw is at least 1/max_rate_hz old."""
        with self._lock:
            if self._finished:
                return
            self.updates += 1
            self._record(status)
            now = self._clock()
            if self._last_push_s is not None and now - self._last_push_s < self.min_interval_s:
                return
            self._last_push_s = now
            self._push()

    def flush(self) -> None:
        """Draw the points received since the last redraw, whatever the rate limit says."""
        with self._lock:
            if not self._finished and self._latest is not None:
                self._last_push_s = self._clock()
                self._push()

    def finish(self, report: Report) -> None:
        """Replace the live content with the report widget, where the live view was."""
        from gpu_notebook.views.report_widget import report_widget

        with self._lock:
            self._finished = True
        view = report_widget(report, cell_id=self.cell_id)
        self.report_view = view
        self.box.plain_text = render_text(report)
        self.box.children = (view,)
        if self._handle is None:
            return
        if self._outputs.cleared and (
            self._outputs.wipes > self._shown_at or self._outputs.pending
        ):
            # The cell cleared its output (clear_output) after the box was last shown, or a
            # wait-clear is pending (the report would take it): the live box may be gone. Empty it
            # where it still is, and show the report as a new output, after the cell's last
            # outputs again where a wait-clear is pending (the report would clear them).
            from IPython.display import display

            self._handle.update({"text/plain": ""}, raw=True, metadata=OUTPUT_METADATA)
            if self._outputs.replay_needed():
                self._outputs.replay()
            self._handle = display(self.box, display_id=True, metadata=OUTPUT_METADATA)
            return
        # Same output (shown again after the cell's last clear where it cleared), refreshed:
        # text/plain becomes the text report for saved notebooks.
        self._handle.update(self.box, metadata=OUTPUT_METADATA)

    def abandon(self, message: str) -> None:
        """Stop updating and say why no report follows (the magic itself failed)."""
        with self._lock:
            self._finished = True
        self.box.plain_text = f"gpucheck: {message}"
        self.box.children = (
            ipywidgets.HTML(value=f'<div style="color:#c92a2a">gpucheck: {esc(message)}</div>'),
        )

    # ------------------------------------------------------------------ drawing

    def _record(self, status: LiveStatus) -> None:
        s = status.sample
        # 100 = one core: a pegged Python loop reads 100%; None (a gap) where a worker was
        # listed but not read.
        cpu = s.ours_cpu_pct()
        self._cpu.append(cpu)
        seen = {g.index for g in s.gpus}
        for g in s.gpus:
            ring = self._gpu_util.get(g.index)
            if ring is None:
                # A GPU seen late starts with gaps so that all rows share one time axis.
                padding: list[float | None] = [None] * (len(self._cpu) - 1)
                ring = self._gpu_util[g.index] = deque(padding, maxlen=self.max_points)
            ring.append(g.utilization_pct)
        for index, ring in self._gpu_util.items():
            if index not in seen:  # lost GPU: a gap, the row stays
                ring.append(None)
        self._latest = status

    def _push(self) -> None:
        status = self._latest
        spark = self._spark_html()
        line = self._status_html(status)
        if spark != self.sparkline.value:
            self.sparkline.value = spark
        if line != self.status_line.value:
            self.status_line.value = line
        self.pushes += 1

    def _spark_html(self) -> str:
        status = self._latest
        rows: list[str] = []
        gpus = {g.index: g for g in status.sample.gpus} if status is not None else {}
        for index in sorted(self._gpu_util):
            ring = self._gpu_util[index]
            g = gpus.get(index)
            util = (
                "lost"
                if g is None
                else ("n/a" if g.utilization_pct is None else f"{g.utilization_pct:.0f}%")
            )
            mem = ""
            if g is not None and g.memory_used_bytes is not None:
                mem = f" &middot; memory {esc(fmt_bytes(g.memory_used_bytes))} / {esc(fmt_bytes(g.memory_total_bytes))}"
            svg = sparkline_svg(
                list(ring), capacity=self.max_points, label=f"GPU {index} utilization"
            )
            rows.append(
                f'<div style="margin:2px 0"><b style="display:inline-block;width:52px">GPU {index}</b>'
                f"{svg} <b>{esc(util)}</b>{mem}</div>"
            )
        cpu_now = self._cpu[-1] if self._cpu else None
        cpu_text = "n/a" if cpu_now is None else f"{cpu_now:.0f}%"
        if not self._gpu_util:
            top = cpu_axis_max([v for v in self._cpu if v is not None])
            svg = sparkline_svg(
                list(self._cpu),
                capacity=self.max_points,
                top=top,
                color=_CPU_COLOR,
                label="CPU use",
            )
            rows.append(
                f'<div style="margin:2px 0"><b style="display:inline-block;width:52px">CPU</b>{svg} '
                f"<b>{esc(cpu_text)}</b> (this process + workers, 100% = one core, "
                f"{self._cores} cores; no GPU visible)</div>"
            )
        if status is not None and len(status.step_times_s) >= 2:
            rows.append(step_time_row(status.step_times_s))
        return "".join(rows)

    def _status_html(self, status: LiveStatus | None) -> str:
        if status is None:
            return "<div><b>gpucheck</b> &middot; measuring this cell&hellip;</div>"
        s = status.sample
        parts = [
            f"<b>{status.step_count}</b> steps",
            f"median step <b>{esc(fmt_seconds(status.median_step_s))}</b>",
        ]
        if self._gpu_util:
            cpu_now = self._cpu[-1] if self._cpu else None
            parts.append(f"CPU {'n/a' if cpu_now is None else f'{cpu_now:.0f}%'} (100% = one core)")
        if s.rss_bytes is not None:
            parts.append(f"RAM {esc(fmt_bytes(s.rss_bytes))}")
        parts.append(f"{s.t_s:.1f} s")
        if status.recording:
            parts.append('<span style="color:#d9480f">&#9679; profiling steps</span>')
        return f"<div><b>gpucheck</b> &middot; measuring &middot; {' &middot; '.join(parts)}</div>"
