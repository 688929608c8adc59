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

A clear that takes effect (``clear_output()``, or a ``clear_output(wait=True)`` taken by the
cell's next display) wipes our live box with the cell's outputs (tqdm.notebook's bar, a live
plot: ``wipes`` counts them). Where one comes through the display publisher on the cell's
thread, the ``on_wipe`` callback shows the box again right after it, before the cell's next
output (the layout it had: ours on top, the cell's below): a non-wait clear is sent by the
hook itself, then the box; a wait-clear's taking display waits behind the box, which the clear
takes with the old outputs. A wait-clear taken by a print (a stream: sent from the kernel's IO
thread, where we never display) is not followed: the box stays away until the report, shown
anew after the cell's outputs as before.

Every hook is removed at :meth:`OutputWatcher.stop`; the messages pass through untouched (the
same message, in the same order; a non-wait clear is sent by our hook instead of ipykernel's
code after it, through the hooks registered after ours), and our own outputs (metadata
``gpu_notebook``) are neither kept nor replayed.
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
        self.wipes = 0  # clears that took effect (a wait-clear once an output took it)
        # Called on the cell's thread right after a clear took effect, before the next output:
        # the live view shows its box again (``views.live``). None: nothing shown again.
        self.on_wipe: Callable[[], None] | None = None
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

    @property
    def pending(self) -> bool:
        """A clear_output(wait=True) no output has taken yet."""
        with self._lock:
            return self._pending

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
        if "gpu_notebook" in (content.get("metadata") or {}):
            return msg  # ours (the live box shown again): not the cell's output
        if kind == "clear_output":
            with self._lock:
                self.cleared = True
                if content.get("wait"):
                    self._pending = True
                else:
                    self._reset()
                    self.wipes += 1
            if not content.get("wait"):
                return self._send_then_show(msg)
        elif kind == "display_data":
            if self._keep("display_data", content):
                self._show_again()  # before this output, which the box's display precedes
        elif kind == "update_display_data":
            self._update(content)
        return msg

    def _send_then_show(self, msg: dict[str, Any]) -> Any:
        """Send the clear (through the hooks after ours, as ipykernel would), then show the box
        again after it; the message as it came where the publisher is not ipykernel's."""
        pub = self._pub
        if self.on_wipe is None or pub is None:
            return msg
        hooks = list(getattr(pub, "_hooks", ()))
        session, socket = getattr(pub, "session", None), getattr(pub, "pub_socket", None)
        if self._on_display not in hooks or session is None or socket is None:
            return msg
        sent: Any = msg
        for hook in hooks[hooks.index(self._on_display) + 1 :]:
            sent = hook(sent)
            if sent is None:
                return None  # a later hook used it: it was not sent
        session.send(socket, sent, ident=getattr(pub, "topic", None))
        self._show_again()
        return None

    def _show_again(self) -> None:
        if self.on_wipe is not None:
            self.on_wipe()

    def _on_stream(self, msg: Any) -> Any:
        if (
            self._active
            and isinstance(msg, dict)
            and msg.get("msg_type") == "stream"
            and not _to_an_output_widget(msg)
        ):
            self._keep("stream", msg.get("content") or {})
        return msg

    def _keep(self, kind: str, content: dict[str, Any]) -> bool:
        """Keep an output of the cell's; True: it took a pending clear (a wipe)."""
        took = False
        with self._lock:
            if self._pending:  # this output takes the pending clear
                self._reset()
                self.wipes += 1
                took = True
            if self._lost:
                return took
            size = _size(content)
            if len(self._shown) >= MAX_KEPT_OUTPUTS or self._chars + size > MAX_KEPT_CHARS:
                self._shown, self._chars, self._lost = [], 0, True
                return took
            self._shown.append((kind, copy.deepcopy(content)))
            self._chars += size
        return took

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
