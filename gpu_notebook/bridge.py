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
  plus ``handled: false``, ``reply: null`` and ``trigger``, the user's click that caused it. The
  labextension listens on each notebook panel and answers only a request that a real
  (``isTrusted``) click on the widget's own Insert button is dispatching right now, from a widget
  in a cell's output whose id is ``request.cell_id``, within the schema's bounds; it inserts below
  that cell, sets ``detail.handled = true``, stores the reply in ``detail.reply`` and calls
  ``preventDefault()``. A page script can neither forge the click nor aim at another cell. This
  works while another cell keeps the kernel busy. When nothing answers, the widget shows a copy /
  ``%load`` fallback.

``set_next_input`` is deliberately not used here: it only works during an execute_request (from
a button or comm handler it lands after the *next* cell the user runs). The ``%load`` line of the
fallback (:func:`load_command`) is typed by the user into a new cell, a normal execution.

The records are frozen ``msgspec.Struct`` classes that reject unknown fields, bad ``Literal``
values and values outside their bounds, whether built in Python or decoded from a message. ``msgspec.json.schema``
of them is the contract: ``labextension/src/bridge.schema.json`` (and the TypeScript types generated
from it, ``labextension/src/bridge.types.ts``) are checked against it by ``tests/test_bridge.py``, and
the labextension validates every request with that schema.

The ``%load`` fallback reads the fix from memory, never from a file: :func:`hold_fix` keeps the
last :data:`FIXES_HELD` sources in this process and :func:`load_command` is a ``%load`` of an
expression IPython evaluates in the user namespace (``find_user_code``), which adds no name to it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec

__all__ = [
    "COMM_TARGET",
    "INSERT_EVENT",
    "InsertCellReply",
    "InsertCellRequest",
    "InsertStatus",
    "PendingInsert",
    "current_cell_id",
    "fix_source",
    "frontend_has_extension",
    "hold_fix",
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
# When several frontends answer one request (two notebooks sharing a kernel), the best answer wins.
_STATUS_RANK = {"error": 0, "duplicate": 1, "inserted": 2}

# Bounds every message is checked against, here and (through the schema) in the labextension:
# a page script must not make the frontend insert megabytes, and ids end up in a %load line.
MAX_SOURCE_CHARS = 500_000
MAX_TITLE_CHARS = 300
MAX_MESSAGE_CHARS = 2_000
# nbformat 4.5 cell ids: the frontend could not hold any other id. Request ids share the shape,
# which also keeps them safe to quote inside the %load expression.
_ID_PATTERN = "^[a-zA-Z0-9_-]{1,64}$"
RequestId = Annotated[str, msgspec.Meta(pattern=_ID_PATTERN)]
CellId = Annotated[str, msgspec.Meta(pattern=_ID_PATTERN)]
Source = Annotated[str, msgspec.Meta(max_length=MAX_SOURCE_CHARS)]
Title = Annotated[str, msgspec.Meta(max_length=MAX_TITLE_CHARS)]
Message = Annotated[str, msgspec.Meta(max_length=MAX_MESSAGE_CHARS)]


class BridgeError(ValueError):
    """A message that does not match the records (wrong field set, types or bounds)."""


# A message class: what ``from_dict`` decodes into is the class it was called on.
_R = TypeVar("_R", bound="_Record")


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A message: built in Python or decoded, every field is checked against its annotation."""

    def __post_init__(self) -> None:
        # msgspec checks types and bounds when it decodes, not when Python code builds a record;
        # checking here makes both ways equal (a decode turns the BridgeError into its own error).
        for field in msgspec.structs.fields(self):
            try:
                msgspec.convert(getattr(self, field.name), field.type, strict=True)
            except msgspec.ValidationError as err:
                raise BridgeError(f"{type(self).__name__}.{field.name}: {err}") from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object sent over the wire."""
        return msgspec.structs.asdict(self)

    @classmethod
    def from_dict(cls: type[_R], data: object) -> _R:
        """Decode a message; raises :class:`BridgeError` on a missing, unknown or bad field."""
        try:
            return msgspec.convert(data, cls, strict=True)
        except msgspec.ValidationError as err:
            raise BridgeError(f"{cls.__name__}: {err}") from None


class InsertCellRequest(_Record, frozen=True, forbid_unknown_fields=True):
    """Kernel/widget -> frontend: insert ``source`` as a new code cell below cell ``cell_id``.

    ``request_id`` makes the request idempotent: a second request with the same id inserts
    nothing and is answered ``duplicate``. ``cell_id`` is the nbformat id of the profiled cell
    (:func:`current_cell_id`), None when unknown (the frontend then answers ``error``: it only
    inserts below the cell the request names). ``source`` holds the fix's
    ``# gpucheck fix: ...`` comment on a line of its own: its first line, or lower where the fix
    is placed after the line binding what it sets. ``title`` is the fix's one-line name.
    """

    request_id: RequestId
    cell_id: CellId | None
    source: Source
    title: Title


class InsertCellReply(_Record, frozen=True, forbid_unknown_fields=True):
    """Frontend -> kernel: what became of one :class:`InsertCellRequest`.

    ``inserted``: a new code cell holds the source, directly below the target cell.
    ``duplicate``: a cell inserted for this ``request_id`` already exists; nothing changed.
    ``error``: nothing inserted; ``message`` says why (target cell not found, no notebook...).
    ``request_id`` is free-form here: a reply to a malformed request echoes what it got.
    """

    request_id: str
    status: InsertStatus
    message: Message


def contract() -> dict[str, Any]:
    """The JSON Schema of the messages plus the channel names: what the labextension is built on.

    ``labextension/src/bridge.schema.json`` is this, written out (tests/test_bridge.py fails when
    the two differ).
    """
    _, components = msgspec.json.schema_components(
        (InsertCellRequest, InsertCellReply), ref_template="#/$defs/{name}"
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "Generated from gpu_notebook/bridge.py by tests/test_bridge.py; do not edit.",
        "constants": {
            "COMM_TARGET": COMM_TARGET,
            "INSERT_EVENT": INSERT_EVENT,
            "CELL_METADATA_KEY": CELL_METADATA_KEY,
        },
        "$defs": components,
    }


def new_request_id() -> str:
    """A fresh request id (32 hex digits, unguessable: it names a held fix)."""
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
            reply = _error_reply(self.request.request_id, f"malformed reply: {err}")
        else:
            note_frontend_answer(True)
        if reply.request_id != self.request.request_id:
            reply = _error_reply(
                self.request.request_id, f"reply for another request ({reply.request_id!r})"
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


def _error_reply(request_id: str, message: str) -> InsertCellReply:
    """An ``error`` reply made here; the text quotes what the frontend sent, so it is cut to fit."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 3] + "..."
    return InsertCellReply(request_id, "error", message)


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
# Fallback when no extension answers: a %load line that reads the fix from this kernel's memory
# --------------------------------------------------------------------------------------------

# How many fix sources the kernel keeps for %load (the most recently shown win): a report shows a
# handful, so this covers every widget on screen while a long session's memory stays bounded.
FIXES_HELD = 256
_held_sources: OrderedDict[str, str] = OrderedDict()
_held_lock = threading.Lock()


def hold_fix(request: InsertCellRequest) -> str:
    """Keep ``request.source`` in memory for the ``%load`` fallback; return the line to run.

    No file is written: the cell's source may hold secrets, and a file in a shared temp folder
    could be read, or swapped before ``%load`` reads it, by another local user.
    """
    with _held_lock:
        _held_sources[request.request_id] = request.source
        _held_sources.move_to_end(request.request_id)
        while len(_held_sources) > FIXES_HELD:
            _held_sources.popitem(last=False)
    return load_command(request.request_id)


def fix_source(request_id: str) -> str:
    """The source :func:`hold_fix` kept for ``request_id`` (what the ``%load`` line evaluates).

    A fix this process no longer holds (the kernel restarted, or more than :data:`FIXES_HELD`
    fixes were shown since) loads as a comment saying so, rather than as an opaque %load error.
    """
    with _held_lock:
        source = _held_sources.get(request_id)
    if source is None:
        return (
            f"# gpucheck: this kernel no longer holds fix {request_id} (it restarted, or more than "
            f"{FIXES_HELD} fixes were shown since): copy the code from the widget instead\n"
        )
    return source


def load_command(request_id: str) -> str:
    """The line a user runs in a new cell to replace it with the fix held for ``request_id``.

    ``%load`` evaluates an argument that is not history, a URL or a file in the user namespace
    (IPython's ``find_user_code``); ``__import__`` reaches this module without binding a name
    there. The double quotes keep the inner quotes through ``%load``'s argument splitting.
    """
    InsertCellRequest(request_id, None, "", "")  # the id must be safe inside the expression
    return f"%load \"__import__('gpu_notebook.bridge').bridge.fix_source('{request_id}')\""
