"""The only door between the kernel and the notebook frontend: ask it to insert a fix as a new cell.

A fix is never executed: the frontend inserts a *code cell* holding the patched source directly
below the profiled cell, and the user decides when to run it. Two channels reach the gpu-notebook
labextension (``labextension/``, JupyterLab 4 and Notebook 7); both carry the same records and
dedupe by ``request_id`` (the inserted cell keeps it in its metadata under ``gpu_notebook``):

* **comm** (kernel -> frontend): :func:`insert_cell` opens a comm to the target
  :data:`COMM_TARGET` with an :class:`InsertCellRequest`; the frontend inserts below the cell whose
  id is ``request.cell_id`` and answers with an :class:`InsertCellReply`, then closes the comm.
  The kernel handles that answer on its main thread, so a synchronous cell sees it only after it
  ends (an ``async`` cell sees it while it awaits, see :meth:`PendingInsert.wait_async`).
* **DOM event** (widget -> frontend, never through the kernel): the ``InsertFixWidget`` view
  dispatches a bubbling ``CustomEvent`` named :data:`INSERT_EVENT` whose ``detail`` is the request
  plus ``handled: false`` and ``reply: null``. The labextension listens on each notebook panel,
  inserts below the cell that encloses the widget, sets ``detail.handled = true``, stores the
  reply in ``detail.reply`` and calls ``preventDefault()``. This works while another cell keeps
  the kernel busy. When nothing answers, the widget shows a copy / ``%load`` fallback.

``set_next_input`` is deliberately not used here: it only works during an execute_request (from
a button or comm handler it lands after the *next* cell the user runs). The ``%load`` line of the
fallback (:func:`load_command`) is typed by the user into a new cell, a normal execution.

The records are mirrored field by field by ``labextension/src/records.ts``
(``IInsertCellRequest`` / ``IInsertCellReply``); ``tests/test_bridge.py`` checks the parity.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = [
    "COMM_TARGET",
    "INSERT_EVENT",
    "InsertCellReply",
    "InsertCellRequest",
    "InsertStatus",
    "PendingInsert",
    "current_cell_id",
    "fix_file",
    "frontend_has_extension",
    "insert_cell",
    "load_command",
    "new_request_id",
]

# The comm target the labextension registers on every notebook kernel.
COMM_TARGET = "gpu_notebook.insert_cell"
# The DOM CustomEvent the widget dispatches (bubbling) and the labextension answers.
INSERT_EVENT = "gpu-notebook:insert-cell"
# Metadata key of the inserted cell; it holds {"request_id": ..., "title": ...}.
CELL_METADATA_KEY = "gpu_notebook"

InsertStatus = Literal["inserted", "duplicate", "error"]
_STATUSES: tuple[str, ...] = get_args(InsertStatus)
# When several frontends answer one request (two notebooks sharing a kernel), the best answer wins.
_STATUS_RANK = {"error": 0, "duplicate": 1, "inserted": 2}
# nbformat 4.5 cell ids: the frontend could not hold any other id, so reject the rest early.
_CELL_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class BridgeError(ValueError):
    """A message that does not match the records (wrong field set or types)."""


def _check_fields(cls_name: str, data: Mapping[str, Any], names: tuple[str, ...]) -> None:
    if not isinstance(data, Mapping):
        raise BridgeError(f"{cls_name}: expected an object, got {type(data).__name__}")
    missing = [name for name in names if name not in data]
    extra = [key for key in data if key not in names]
    if missing or extra:
        raise BridgeError(f"{cls_name}: missing fields {missing}, unknown fields {extra}")


def _check_str(cls_name: str, name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        expected = "str or None" if optional else "str"
        raise BridgeError(f"{cls_name}.{name}: expected {expected}, got {type(value).__name__}")


@dataclass(frozen=True)
class InsertCellRequest:
    """Kernel/widget -> frontend: insert ``source`` as a new code cell below cell ``cell_id``.

    ``request_id`` makes the request idempotent: a second request with the same id inserts
    nothing and is answered ``duplicate``. ``cell_id`` is the nbformat id of the profiled cell
    (:func:`current_cell_id`), None when unknown (the DOM channel then uses the cell that encloses
    the widget; the comm channel answers ``error``). ``source``'s first line is the fix's
    ``# gpucheck fix: ...`` comment. ``title`` is the fix's one-line name.
    """

    request_id: str
    cell_id: str | None
    source: str
    title: str

    def __post_init__(self) -> None:
        name = type(self).__name__
        _check_str(name, "request_id", self.request_id)
        _check_str(name, "cell_id", self.cell_id, optional=True)
        _check_str(name, "source", self.source)
        _check_str(name, "title", self.title)
        if not self.request_id:
            raise BridgeError(f"{name}.request_id must not be empty")
        if self.cell_id is not None and not _CELL_ID_RE.match(self.cell_id):
            raise BridgeError(f"{name}.cell_id {self.cell_id!r} is not an nbformat cell id")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object sent to the frontend (``IInsertCellRequest``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InsertCellRequest:
        """Parse a message; raises :class:`BridgeError` on a missing, unknown or mistyped field."""
        _check_fields(cls.__name__, data, _field_names(cls))
        return cls(
            request_id=data["request_id"],
            cell_id=data["cell_id"],
            source=data["source"],
            title=data["title"],
        )


@dataclass(frozen=True)
class InsertCellReply:
    """Frontend -> kernel: what became of one :class:`InsertCellRequest`.

    ``inserted``: a new code cell holds the source, directly below the target cell.
    ``duplicate``: a cell inserted for this ``request_id`` already exists; nothing changed.
    ``error``: nothing inserted; ``message`` says why (target cell not found, no notebook...).
    """

    request_id: str
    status: InsertStatus
    message: str

    def __post_init__(self) -> None:
        name = type(self).__name__
        _check_str(name, "request_id", self.request_id)
        _check_str(name, "message", self.message)
        if self.status not in _STATUSES:
            raise BridgeError(f"{name}.status: expected one of {_STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the frontend sends back (``IInsertCellReply``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InsertCellReply:
        """Parse a message; raises :class:`BridgeError` on a missing, unknown or mistyped field."""
        _check_fields(cls.__name__, data, _field_names(cls))
        return cls(request_id=data["request_id"], status=data["status"], message=data["message"])


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def new_request_id() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


# --------------------------------------------------------------------------------------------
# Kernel side
# --------------------------------------------------------------------------------------------


def _kernel() -> Any | None:
    """The running ipykernel, or None outside a kernel (plain IPython, a script, pytest)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def current_cell_id() -> str | None:
    """The nbformat id of the cell being executed, or None when the frontend did not send one.

    JupyterLab and Notebook 7 put it in the execute_request metadata (``cellId``). Call this while
    the profiled cell runs (when the widget is made): inside a comm or widget handler the parent
    message is that comm message and carries no cell id.
    """
    kernel = _kernel()
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell")
    except TypeError:  # ipykernel < 6.? took no channel argument
        parent = kernel.get_parent()
    metadata = (parent or {}).get("metadata") or {}
    cell_id = metadata.get("cellId")
    return cell_id if isinstance(cell_id, str) and cell_id else None


# What the kernel has learned about the frontend: True once the labextension answered (comm
# reply or a widget's DOM event), False once a frontend closed our comm unanswered or a widget's
# event went unanswered, None until then. Learned, never asked: asking would block a busy kernel.
_frontend_state: bool | None = None
_state_lock = threading.Lock()


def frontend_has_extension() -> bool | None:
    """Whether the frontend runs the gpu-notebook labextension: True, False, or None (not known yet).

    Known without blocking only after the frontend answered something: a comm reply of
    :func:`insert_cell`, or an ``InsertFixWidget`` click it reported.
    """
    return _frontend_state


def note_frontend_answer(has_extension: bool) -> None:
    """Record what a frontend answer revealed (used by the widget and by :class:`PendingInsert`)."""
    global _frontend_state
    with _state_lock:
        # One positive answer is proof; a negative one may come from a second, plainer frontend.
        if has_extension or _frontend_state is None:
            _frontend_state = has_extension


class PendingInsert:
    """One :func:`insert_cell` request and, once the frontend answered, its reply.

    The reply arrives through the kernel's main-thread event loop: after the current (synchronous)
    cell ends, or while an ``async`` cell awaits :meth:`wait_async`. :meth:`wait` blocks and is
    only useful from another thread.
    """

    def __init__(self, request: InsertCellRequest, comm: Any | None = None) -> None:
        self.request = request
        self._comm = comm
        self._reply: InsertCellReply | None = None
        self._answered = threading.Event()
        self._lock = threading.Lock()

    @property
    def reply(self) -> InsertCellReply | None:
        """The frontend's answer, None while none arrived."""
        return self._reply

    def done(self) -> bool:
        """True once an answer (or a local error) is known."""
        return self._answered.is_set()

    def wait(self, timeout_s: float) -> InsertCellReply | None:
        """Block up to ``timeout_s`` for the reply (None on timeout).

        Raises RuntimeError on the kernel's main thread, where the reply cannot be handled while
        the caller blocks (use :meth:`wait_async` in an ``async`` cell instead).
        """
        if not self.done() and _kernel() is not None and _on_main_thread():
            raise RuntimeError(
                "PendingInsert.wait() on the kernel's main thread would block the reply it waits "
                "for: read .reply after the cell, or `await pending.wait_async(timeout_s)` in an "
                "async cell"
            )
        self._answered.wait(timeout_s)
        return self._reply

    async def wait_async(self, timeout_s: float, poll_s: float = 0.02) -> InsertCellReply | None:
        """Await the reply up to ``timeout_s`` (None on timeout), letting the kernel handle it."""
        deadline = time.monotonic() + timeout_s
        while not self.done() and time.monotonic() < deadline:
            # Yield to the kernel's loop: ipykernel dispatches comm messages while a cell awaits.
            await asyncio.sleep(poll_s)
        return self._reply

    def _resolve(self, reply: InsertCellReply) -> None:
        with self._lock:
            current = self._reply
            if current is None or _STATUS_RANK[reply.status] > _STATUS_RANK[current.status]:
                self._reply = reply
        self._answered.set()

    def _on_comm_msg(self, msg: Mapping[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        try:
            reply = InsertCellReply.from_dict(data)
        except BridgeError as err:
            reply = InsertCellReply(self.request.request_id, "error", f"malformed reply: {err}")
        else:
            note_frontend_answer(True)
        if reply.request_id != self.request.request_id:
            reply = InsertCellReply(
                self.request.request_id,
                "error",
                f"reply for another request ({reply.request_id!r})",
            )
        self._resolve(reply)

    def _on_comm_close(self, msg: Mapping[str, Any]) -> None:
        self._comm = None
        if self.done():
            return
        # JupyterLab closes a comm at once when no handler exists for its target.
        note_frontend_answer(False)
        self._resolve(
            InsertCellReply(
                self.request.request_id,
                "error",
                "the frontend closed the request unanswered: the gpu-notebook labextension is "
                "not active there (copy the fix instead)",
            )
        )

    def __repr__(self) -> str:
        return f"PendingInsert(request_id={self.request.request_id!r}, reply={self._reply!r})"


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def insert_cell(request: InsertCellRequest, timeout_s: float = 0.0) -> PendingInsert:
    """Ask the labextension, through a comm, to insert ``request.source`` below ``request.cell_id``.

    Returns at once (``timeout_s=0``, the right choice inside a running cell: the frontend
    inserts the cell right away, and its reply fills ``PendingInsert.reply`` once the kernel is
    free). With ``timeout_s > 0``, waits that long for the reply; that only works off the
    kernel's main thread, so on it a RuntimeError says what to do instead. Outside a kernel the
    returned request is already answered ``error``.
    """
    if timeout_s > 0 and _kernel() is not None and _on_main_thread():
        raise RuntimeError(
            "insert_cell(timeout_s>0) on the kernel's main thread cannot receive the reply while "
            "it blocks: call it with timeout_s=0 and read .reply after the cell, or "
            "`await insert_cell(request).wait_async(timeout_s)` in an async cell"
        )
    if _kernel() is None:
        pending = PendingInsert(request)
        pending._resolve(
            InsertCellReply(request.request_id, "error", "not running in a Jupyter kernel")
        )
        return pending

    from comm import create_comm

    # primary=False: register the callbacks before the frontend can see the comm, then open it.
    channel = create_comm(target_name=COMM_TARGET, primary=False)
    pending = PendingInsert(request, channel)
    channel.on_msg(pending._on_comm_msg)
    channel.on_close(pending._on_comm_close)
    channel.open(data=request.to_dict())
    if timeout_s > 0:
        pending.wait(timeout_s)
    return pending


# --------------------------------------------------------------------------------------------
# Fallback when no extension answers: a file the user loads with %load in a new cell
# --------------------------------------------------------------------------------------------


def fix_file(request: InsertCellRequest, directory: Path | None = None) -> Path:
    """Write ``request.source`` to ``<tmp>/gpu_notebook-fixes/<request_id>.py`` and return it.

    The kernel writes it, so the kernel's ``%load`` can read it wherever the browser runs.
    """
    folder = directory if directory is not None else Path(tempfile.gettempdir())
    folder = folder / "gpu_notebook-fixes"
    folder.mkdir(parents=True, exist_ok=True)
    safe_id = re.sub(r"[^a-zA-Z0-9_-]", "_", request.request_id)
    path = folder / f"{safe_id}.py"
    path.write_text(request.source, encoding="utf-8")
    return path


def load_command(path: Path) -> str:
    """The line a user runs in a new cell to replace it with the fix: ``%load <path>``."""
    text = str(path)
    if re.search(r"\s|['\"]", text):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"%load {text}"
