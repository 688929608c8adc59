"""The watcher of a cell's outputs (views/cell_outputs): which outputs a pending
``clear_output(wait=True)`` would take, kept for a replay before the report.

The messages are built by jupyter_client's own ``Session.msg``, as ipykernel builds the ones its
hooks see; the end-to-end case (a real kernel, nbclient applying the clear) is in
tests/test_example_notebooks.py (``10_live_display``'s ``rep_lastclear``).
"""

from __future__ import annotations

from jupyter_client.session import Session

from gpu_notebook.views import cell_outputs
from gpu_notebook.views.cell_outputs import OutputWatcher

SESSION = Session()


def _watching() -> OutputWatcher:
    w = OutputWatcher()
    w._active = True
    w._watching_streams = True  # as after start() in a kernel whose two streams are hooked
    return w


def _display(w: OutputWatcher, text: str, display_id: str | None = None) -> None:
    content = {"data": {"text/plain": text}, "metadata": {}, "transient": {}}
    if display_id is not None:
        content["transient"] = {"display_id": display_id}
    assert w._on_display(SESSION.msg("display_data", content)) is not None


def _update(w: OutputWatcher, text: str, display_id: str) -> None:
    content = {
        "data": {"text/plain": text},
        "metadata": {},
        "transient": {"display_id": display_id},
    }
    w._on_display(SESSION.msg("update_display_data", content))


def _clear(w: OutputWatcher, wait: bool) -> None:
    w._on_display(SESSION.msg("clear_output", {"wait": wait}))


def _print(w: OutputWatcher, text: str) -> None:
    msg = SESSION.msg("stream", {"name": "stdout", "text": text})
    assert w._on_stream(msg) is msg  # passed through untouched


def test_a_pending_wait_clear_keeps_the_outputs_it_would_take() -> None:
    w = _watching()
    _print(w, "step 0\n")
    _clear(w, wait=True)
    _print(w, "step 20\n")  # takes the clear: 'step 0' is gone from the screen
    _display(w, "chart", display_id="d1")
    _update(w, "chart v2", display_id="d1")
    _clear(w, wait=True)  # the cell's last act
    assert w.cleared and w.replay_needed()
    assert [(k, c.get("text") or c["data"]["text/plain"]) for k, c in w._shown] == [
        ("stream", "step 20\n"),
        ("display_data", "chart v2"),  # its latest value, as shown
    ]


def test_no_replay_when_an_output_took_the_clear_or_a_clear_was_immediate() -> None:
    w = _watching()
    _print(w, "step 0\n")
    _clear(w, wait=True)
    _print(w, "done\n")
    assert not w.replay_needed()  # 'done' is on screen; the report follows it
    _clear(w, wait=False)
    assert not w.replay_needed() and w._shown == []


def test_no_replay_when_the_outputs_are_too_many_to_keep_or_prints_are_unseen(monkeypatch) -> None:
    monkeypatch.setattr(cell_outputs, "MAX_KEPT_OUTPUTS", 3)
    w = _watching()
    for i in range(4):
        _print(w, f"line {i}\n")
    _clear(w, wait=True)
    assert not w.replay_needed() and w._shown == []  # nothing held past the bound
    _print(w, "after\n")
    _clear(w, wait=True)
    assert w.replay_needed()
    w._watching_streams = False  # e.g. a stdout replaced by the user: a print could be unseen
    assert not w.replay_needed()


def test_nothing_is_kept_once_stopped() -> None:
    w = _watching()
    w.stop()
    _print(w, "late\n")
    _clear(w, wait=True)
    assert w._shown == [] and not w.cleared


def test_what_goes_into_an_output_widget_is_the_widgets_own() -> None:
    # 19_output_widget_log: `with out: clear_output(wait=True); print(...)` and a last
    # `out.clear_output(wait=True)`; the frontend routes these into the widget (its msg_id is
    # the cell's while inside `with out:`). Read as the cell's own, the pending clear had the
    # widget's last line replayed into the cell, below the widget: plain shows it only inside.
    import ipywidgets

    cell = SESSION.msg("execute_request", {})
    out = ipywidgets.Output()
    try:
        w = _watching()

        def msg(kind: str, content: dict) -> dict:
            return SESSION.msg(kind, content, parent=cell)

        w._on_stream(msg("stream", {"name": "stdout", "text": "header\n"}))
        out.msg_id = cell["header"]["msg_id"]  # as Output.__enter__ sets it
        w._on_display(msg("clear_output", {"wait": True}))
        w._on_stream(msg("stream", {"name": "stdout", "text": "step 48\n"}))
        out.msg_id = ""  # __exit__
        out.msg_id = cell["header"]["msg_id"]  # out.clear_output(wait=True), the last act
        w._on_display(msg("clear_output", {"wait": True}))
        out.msg_id = ""
        assert not w.cleared and not w.replay_needed()
        assert [c["text"] for _, c in w._shown] == ["header\n"]
        # Outside the widget, the cell's own clear is read as before.
        w._on_display(msg("clear_output", {"wait": True}))
        assert w.cleared and w.replay_needed()
    finally:
        out.close()
