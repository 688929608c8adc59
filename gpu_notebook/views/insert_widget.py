"""``InsertFixWidget``: one fix, its diff preview and an "Insert fix" button.

The button dispatches the DOM event of :mod:`gpu_notebook.bridge` (``gpu-notebook:insert-cell``);
the gpu-notebook labextension answers it synchronously by inserting a new, unexecuted code cell
below the widget's cell, even while another cell keeps the kernel busy. When no extension answers
(VS Code, Colab, classic notebook) the widget shows the patched code with a Copy button and a
``%load`` line that inserts it from a new cell. The view always says which path happened.
Rendering lives in ``insert_widget.js`` / ``insert_widget.css``; every user string is set as text
(never HTML) because the source comes from the user's cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import anywidget
import traitlets

from gpu_notebook import bridge

__all__ = ["WIDGET_STATUSES", "InsertFixWidget", "WidgetStatus"]

_HERE = Path(__file__).parent

# What the view reports back: "" before any click, the extension's reply status (spelled once,
# in bridge.InsertStatus; the view's typedef takes it from the generated bridge types), or
# "fallback" when nothing answered the DOM event (the user copies the code or runs %load).
WidgetStatus = Literal["", "fallback", bridge.InsertStatus]
WIDGET_STATUSES: tuple[str, ...] = get_args(WidgetStatus)


class InsertFixWidget(anywidget.AnyWidget):
    """Offer ``source`` (the patched cell) as a new code cell below cell ``cell_id``.

    ``title``: the fix's one-line name. ``source``: the patched code, holding the
    ``# gpucheck fix: ...`` comment on a line of its own (its first line, or lower where the fix
    is placed after the line binding what it sets: ``report.compare._is_fix_cell``). ``diff``:
    a unified diff of the change, shown on demand.
    ``cell_id``: the profiled cell's id (:func:`gpu_notebook.bridge.current_cell_id`, read while
    that cell runs), None when unknown. ``request_id``: dedupes clicks (a fresh id by default);
    it also names the source this kernel holds in memory for the ``%load`` line (no file).
    """

    _esm = _HERE / "insert_widget.js"
    _css = _HERE / "insert_widget.css"

    title = traitlets.Unicode().tag(sync=True)
    source = traitlets.Unicode().tag(sync=True)
    diff = traitlets.Unicode().tag(sync=True)
    cell_id = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    request_id = traitlets.Unicode().tag(sync=True)
    event_name = traitlets.Unicode(bridge.INSERT_EVENT, read_only=True).tag(sync=True)
    load_command = traitlets.Unicode().tag(sync=True)
    # Written by the view: which path the last click took, and the extension's message.
    status = traitlets.Enum(WIDGET_STATUSES, default_value="").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        title: str,
        source: str,
        diff: str,
        cell_id: str | None,
        *,
        request_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        # Validates the fields once, here, rather than in the browser.
        request = bridge.InsertCellRequest(
            request_id=request_id if request_id is not None else bridge.new_request_id(),
            cell_id=cell_id,
            source=source,
            title=title,
        )
        super().__init__(
            title=request.title,
            source=request.source,
            diff=diff,
            cell_id=request.cell_id,
            request_id=request.request_id,
            load_command=bridge.hold_fix(request),
            **kwargs,
        )

    @property
    def request(self) -> bridge.InsertCellRequest:
        """The record the button sends (the DOM event's detail, less handled/reply)."""
        return bridge.InsertCellRequest(
            request_id=self.request_id, cell_id=self.cell_id, source=self.source, title=self.title
        )

    @traitlets.observe("status")
    def _status_changed(self, change: dict[str, Any]) -> None:
        if change["new"] in get_args(bridge.InsertStatus):
            bridge.note_frontend_answer(True)
        elif change["new"] == "fallback":
            bridge.note_frontend_answer(False)

    def __repr__(self) -> str:
        # The text/plain of the output: what a frontend without widgets shows.
        return f"gpucheck fix: {self.title}\nTo insert it, run in a new cell: {self.load_command}"
