"""What the running cell's output area shows, so the report never clears it.

Jupyter's ``clear_output(wait=True)`` clears at the *next* output. A cell whose last act is
``clear_output(wait=True)`` (a progress print, then a wait-clear; no output after it) keeps its
outputs on screen when it runs plain: nothing comes next. Under the magic the report comes next,
and the frontend clears the cell's last outputs for it (unseen round 9, ``10_live_display``).

:class:`OutputWatcher` follows the cell's outputs as the kernel sends them: the display
publisher's messages (``display_data``, ``update_display_data``, ``clear_output``) and the
``stream`` messages of ``sys.stdout``/``sys.stderr`` (ipykernel's ``OutStream`` hooks, which are
kept per thread and run on its IO thread: they are registered there). It keeps the outputs sent
since the last clear that took effect, a bounded copy. When the cell ends with a wait-clear
pending, :meth:`OutputWatcher.replay` sends those outputs again just before the report: the
pending clear takes the old copies, and the cell shows what it showed without us, then the
report. Where a stream cannot be watched, or the outputs since the clear are too many to keep,
nothing is replayed (the report then clears them, as before).

Every hook is removed at :meth:`OutputWatcher.stop`; the messages pass through untouched.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["OutputWatcher"]

# Outputs since the last clear kept for a replay: a progress display is one or a few outputs;
# a cell printing thousands of lines after its last clear is not replayed (never held in memory).
MAX_KEPT_OUTPUTS = 64
MAX_KEPT_CHARS = 1_000_000
# How long stop() waits for a kernel's IO thread to drop the stream hooks.
_IO_THREAD_WAIT_S = 2.0


class OutputWatcher:
    """Follows one cell's outputs (see the module docstring). ``start`` on the cell's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shown: list[tuple[str, dict[str, Any]]] = []  # (msg_type, content), oldest first
        self._chars = 0
        self._pending = False  # a clear_output(wait=True) not yet taken by an output
        self._lost = False  # outputs since the last clear that were not kept
        self.cleared = False  # the cell sent a clear_output of any kind
        self._pub: Any = None
        self._streams: list[Any] = []  # the OutStreams whose IO thread runs our hook
        self._watching_streams = False
        self._active = False

    # ------------------------------------------------------------------ lifecycle

    def start(self, display_pub: Any) -> None:
        """Watch ``display_pub`` (the shell's) and the kernel's stdout/stderr streams."""
        self._active = True
        if display_pub is not None and hasattr(display_pub, "register_hook"):
            display_pub.register_hook(self._on_display)
            self._pub = display_pub
        streams = [s for s in (sys.stdout, sys.stderr) if _hookable(s)]
        if len(streams) != 2:
            return
        self._streams = streams
        self._watching_streams = _on_io_threads(streams, lambda s: s.register_hook(self._on_stream))

    def stop(self) -> None:
        """Stop watching: the cell's last prints are flushed through the hooks first."""
        for stream in self._streams:
            try:
                stream.flush()  # ipykernel's flush waits for the IO thread to send
            except (OSError, ValueError):  # a closed stream: its last prints may be unseen
                self._watching_streams = False
        self._active = False
        pub, self._pub = self._pub, None
        if pub is not None:
            pub.unregister_hook(self._on_display)
        streams, self._streams = self._streams, []
        _on_io_threads(streams, lambda s: s.unregister_hook(self._on_stream))

    # ------------------------------------------------------------------ the report's turn

    def replay_needed(self) -> bool:
        """The cell ended with a wait-clear pending over outputs we kept, all of them."""
        if not self._watching_streams:  # a print after the clear would go unseen
            return False
        with self._lock:
            return self._pending and bool(self._shown) and not self._lost

    def replay(self) -> None:
        """Send the kept outputs again (after :meth:`stop`, on the cell's thread)."""
        from IPython.display import publish_display_data

        with self._lock:
            shown, self._shown = self._shown, []
        for kind, content in shown:
            if kind == "stream":
                target = sys.stderr if content.get("name") == "stderr" else sys.stdout
                target.write(content.get("text", ""))
                target.flush()
            else:
                publish_display_data(
                    content.get("data", {}),
                    metadata=content.get("metadata") or None,
                    transient=content.get("transient") or None,
                )

    # ------------------------------------------------------------------ hooks

    def _on_display(self, msg: Any) -> Any:
        if not self._active or not isinstance(msg, dict) or _to_an_output_widget(msg):
            return msg
        kind = msg.get("msg_type")
        content = msg.get("content") or {}
        if kind == "clear_output":
            with self._lock:
                self.cleared = True
                if content.get("wait"):
                    self._pending = True
                else:
                    self._reset()
        elif kind == "display_data":
            self._keep("display_data", content)
        elif kind == "update_display_data":
            self._update(content)
        return msg

    def _on_stream(self, msg: Any) -> Any:
        if (
            self._active
            and isinstance(msg, dict)
            and msg.get("msg_type") == "stream"
            and not _to_an_output_widget(msg)
        ):
            self._keep("stream", msg.get("content") or {})
        return msg

    def _keep(self, kind: str, content: dict[str, Any]) -> None:
        with self._lock:
            if self._pending:  # this output takes the pending clear
                self._reset()
            if self._lost:
                return
            size = _size(content)
            if len(self._shown) >= MAX_KEPT_OUTPUTS or self._chars + size > MAX_KEPT_CHARS:
                self._shown, self._chars, self._lost = [], 0, True
                return
            self._shown.append((kind, copy.deepcopy(content)))
            self._chars += size

    def _update(self, content: dict[str, Any]) -> None:
        """An update of a shown display (``display(..., display_id=...)``, ``handle.update``)
        replaces its data where it is shown: a replay shows its latest value."""
        display_id = (content.get("transient") or {}).get("display_id")
        if display_id is None:
            return
        with self._lock:
            for kind, shown in self._shown:
                if (
                    kind == "display_data"
                    and (shown.get("transient") or {}).get("display_id") == display_id
                ):
                    shown["data"] = copy.deepcopy(content.get("data", {}))
                    shown["metadata"] = copy.deepcopy(content.get("metadata", {}))

    def _reset(self) -> None:
        self._shown, self._chars, self._lost, self._pending = [], 0, False, False


def _to_an_output_widget(msg: dict[str, Any]) -> bool:
    """The message goes into an ``ipywidgets.Output`` (``with out:``, ``out.clear_output()``),
    not to the cell's output area: the frontend routes every message whose parent is the
    widget's ``msg_id`` into the widget while it is set (ipywidgets' ``Output.__exit__``
    flushes the streams before it unsets it, so a stream hook on the IO thread still sees it).
    Its clears and outputs are the widget's own: a replay of them would put a copy of the
    widget's content into the cell (unseen round 12, 19_output_widget_log)."""
    widget = sys.modules.get("ipywidgets.widgets.widget")
    output = sys.modules.get("ipywidgets.widgets.widget_output")
    parent = (msg.get("parent_header") or {}).get("msg_id")
    instances = getattr(widget, "_instances", None)
    kind = getattr(output, "Output", None)
    if not parent or not isinstance(instances, dict) or kind is None:
        return False
    # list(): the cell's thread may make widgets while the IO thread reads (one C-level copy).
    return any(
        isinstance(w, kind) and getattr(w, "msg_id", "") == parent for w in list(instances.values())
    )


def _hookable(stream: Any) -> bool:
    """An ipykernel ``OutStream``: stream hooks, run on its IO thread."""
    return (
        hasattr(stream, "register_hook")
        and hasattr(stream, "unregister_hook")
        and hasattr(getattr(stream, "pub_thread", None), "schedule")
    )


def _on_io_threads(streams: list[Any], fn: Callable[[Any], None]) -> bool:
    """Run ``fn(stream)`` on each stream's IO thread, where its ``_flush`` runs the
    (thread-local) hooks, and wait for it (up to ``_IO_THREAD_WAIT_S`` a stream). True: it ran
    within the wait on every stream."""
    ran = []
    for stream in streams:
        done = threading.Event()

        def call(s: Any = stream, done: threading.Event = done) -> None:
            fn(s)
            done.set()

        stream.pub_thread.schedule(call)
        ran.append(done.wait(_IO_THREAD_WAIT_S))
    return all(ran)


def _size(content: dict[str, Any]) -> int:
    text = content.get("text")
    if isinstance(text, str):
        return len(text)
    data = content.get("data") or {}
    return sum(len(v) if isinstance(v, str) else 256 for v in data.values())
