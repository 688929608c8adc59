"""Optimizer steps in child processes: counted and timed there, read by the parent.

A table in shared memory, one slot per child that steps: ``(pid, steps, first_ns, last_ns)``
(``perf_counter_ns`` is CLOCK_MONOTONIC, one clock for every process of the machine). A child
claims its slot at its first optimizer step and rewrites it at each one; the parent reads the
table when its clock uninstalls.

- *Forked* children inherit the step clock's hooks and an anonymous mapping made just before the
  first fork (see ``stepclock._children_before_fork``).
- *Spawned* children (``mp.spawn``, a spawn or forkserver ``Process``/``Pool``) start a fresh
  interpreter: :class:`SpawnChannel` adds one entry to the preparation data multiprocessing
  sends them; unpickled in the child (before the user's function), it takes the table, a
  memfd passed the way multiprocessing passes descriptors, moves its descriptor to a high
  number (close-on-exec) and puts one optimizer post hook into torch's global dict once the
  child imports torch; each step is one ``pwrite``. Whatever fails there is swallowed: the child
  runs as without us, uncounted. No file, no thread, nothing printed; the descriptor the parent
  keeps for later spawns is close-on-exec, numbered high, and closed at ``uninstall``.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from collections.abc import Callable
from typing import Any

SLOT = struct.Struct("qqqq")
SLOTS = 1024
TABLE_BYTES = SLOTS * SLOT.size

# (pid, slot, steps, first_ns): what a child remembers of its own slot.
Held = tuple[int, int, int, int]
# (pid, steps, span_ns) of a child that stepped.
Row = tuple[int, int, int]


# A table: the forked children's anonymous mapping, or the descriptor of the spawned children's
# memfd, read and written with pread/pwrite (a mapping of it would hold a second descriptor,
# numbered low, for as long as it lives).
Table = mmap.mmap | int


def _pid_at(table: Table, slot: int) -> int:
    if isinstance(table, int):
        return int(struct.unpack("q", os.pread(table, 8, slot * SLOT.size))[0])
    return int(struct.unpack_from("q", table, slot * SLOT.size)[0])


def _put(table: Table, slot: int, *values: int) -> None:
    if isinstance(table, int):
        os.pwrite(table, SLOT.pack(*values), slot * SLOT.size)
    else:
        SLOT.pack_into(table, slot * SLOT.size, *values)


def claim_slot(table: Table, pid: int) -> int | None:
    """A free slot for ``pid``, probing from ``pid % slots`` (children claim at their first
    step; two children claiming the same slot at the same instant would need pids equal modulo
    1024 and is not guarded against). None: the table is full."""
    for k in range(SLOTS):
        slot = (pid + k) % SLOTS
        if _pid_at(table, slot) == 0:
            _put(table, slot, pid, 0, 0, 0)
            return slot
    return None


def count_step(table: Table, held: Held | None, now_ns: int) -> Held | None:
    """One optimizer step of this process into ``table``; returns what to hold for the next."""
    pid = os.getpid()
    if held is None or held[0] != pid:  # first step here (a grandchild gets a slot of its own)
        slot = claim_slot(table, pid)
        if slot is None:
            return held
        held = (pid, slot, 0, now_ns)
    pid, slot, steps, first_ns = held
    _put(table, slot, pid, steps + 1, first_ns, now_ns)
    return (pid, slot, steps + 1, first_ns)


def read_table(table: Table) -> list[Row]:
    data = os.pread(table, TABLE_BYTES, 0) if isinstance(table, int) else table[:TABLE_BYTES]
    rows = []
    for slot in range(SLOTS):
        pid, steps, first_ns, last_ns = SLOT.unpack_from(data, slot * SLOT.size)
        if pid and steps:
            rows.append((pid, steps, last_ns - first_ns))
    return sorted(rows)


def tracing_probe(torch: Any) -> Callable[[], bool]:
    """A function that says whether torch is tracing rather than running: then hooks step aside.

    Dynamo constant-folds ``torch.compiler.is_compiling()`` (the hook traces to nothing, no
    graph break); fx hands Proxies to module hooks during ``symbolic_trace``; the JIT tracer
    would record whatever the hook touches.
    """
    is_compiling = torch.compiler.is_compiling
    tracing_state = torch._C._get_tracing_state
    try:
        from torch.fx._symbolic_trace import is_fx_symbolic_tracing as is_fx_tracing
    except ImportError:  # pragma: no cover - older torch

        def is_fx_tracing() -> bool:
            return False

    def tracing() -> bool:
        return bool(is_compiling() or is_fx_tracing() or tracing_state() is not None)

    return tracing


# ---------------------------------------------------------------- spawned children: the parent

_KEY = "gpu_notebook_child_steps"  # our entry in the preparation data (prepare() ignores it)
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Run by the child's unpickler (``exec`` is a builtin: nothing of ours needs to import for the
# entry itself to load). ``dup`` is multiprocessing's own descriptor handle.
_CHILD_CODE = """
fd = None
try:
    fd = dup.detach()
    try:
        from gpu_notebook.capture import children
    except ImportError:
        import sys
        sys.path.insert(0, root)
        try:
            from gpu_notebook.capture import children
        finally:
            sys.path.remove(root)
    children.start_in_spawned_child(fd)
    fd = None
except Exception:
    pass
finally:
    if fd is not None:
        try:
            import os
            os.close(fd)
        except Exception:
            pass
"""


class _ChildEntry:
    """Pickles, while multiprocessing spawns a child, into the code that starts our counting
    there; anywhere else into an empty dict."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing import context, reduction

        if context.get_spawning_popen() is None:
            return (dict, ())
        dup = reduction.DupFd(self._fd)
        return (exec, (_CHILD_CODE, {"dup": dup, "root": _ROOT}))


class SpawnChannel:
    """The parent's side: ``install`` wraps ``multiprocessing.spawn.get_preparation_data`` (put
    back at ``uninstall`` if still ours); the table is made at the first spawn."""

    def __init__(self) -> None:
        self._module: Any = None
        self._original: Any = None
        self._wrapper: Any = None
        self._active = False
        self._fd: int | None = None  # the table (a memfd), numbered high, close-on-exec

    def install(self) -> None:
        module = sys.modules.get("multiprocessing.spawn")  # torch imports it
        if module is None or not hasattr(os, "memfd_create"):
            return
        original = module.get_preparation_data
        channel = self

        def get_preparation_data(name: str) -> dict[str, Any]:
            data = original(name)
            if channel._active and isinstance(data, dict):
                entry = channel._entry()
                if entry is not None:
                    data[_KEY] = entry
            return data  # type: ignore[no-any-return]

        get_preparation_data.__wrapped__ = original  # type: ignore[attr-defined]
        self._module, self._original, self._wrapper = module, original, get_preparation_data
        setattr(module, "get_preparation_data", get_preparation_data)  # noqa: B010
        self._active = True

    def _entry(self) -> _ChildEntry | None:
        if self._fd is None:
            try:
                fd = os.memfd_create("gpu_notebook_steps", os.MFD_CLOEXEC)
                try:
                    os.ftruncate(fd, TABLE_BYTES)  # zeros: every slot free
                    self._fd = _high(fd)
                finally:
                    os.close(fd)
            except OSError:
                self._active = False  # no memfd: spawned children stay uncounted
                return None
        return _ChildEntry(self._fd)

    def uninstall(self) -> list[Row]:
        """Put ``get_preparation_data`` back (if still ours), read the table and drop it."""
        self._active = False
        module, self._module = self._module, None
        if module is not None and module.__dict__.get("get_preparation_data") is self._wrapper:
            module.get_preparation_data = self._original
        fd, self._fd = self._fd, None
        if fd is None:
            return []
        try:
            return read_table(fd)
        except OSError:
            return []
        finally:
            os.close(fd)


def _high(fd: int) -> int:
    """A close-on-exec copy numbered high: the user's next ``open`` gets the number it gets
    without us."""
    import fcntl
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    base = max(3, min(soft, 1 << 16) // 2)
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base)
    except OSError:
        return os.dup(fd)


# ---------------------------------------------------------------- spawned children: the child


class _ChildCounter:
    def __init__(self, table: int) -> None:
        self._table = table
        self._held: Held | None = None
        self._tracing: Callable[[], bool] | None = None

    def hook_into(self, _name: str) -> None:
        optim_mod = sys.modules.get("torch.optim.optimizer")
        hooks = getattr(optim_mod, "_global_optimizer_post_hooks", None)
        if isinstance(hooks, dict):  # under a key of ours: the user's hook ids stay theirs
            hooks[("gpu_notebook", id(self))] = self.on_step

    def on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        tracing = self._tracing
        if tracing is None:
            tracing = self._tracing = tracing_probe(sys.modules["torch"])
        if tracing():
            return
        import contextlib
        import time

        # The step is the user's: a write of ours that fails loses only the count.
        with contextlib.suppress(OSError):
            self._held = count_step(self._table, self._held, time.perf_counter_ns())


def start_in_spawned_child(fd: int) -> None:
    """In a spawned child, before the user's function is unpickled: keep the table's descriptor
    numbered high and close-on-exec (the number it came under is given back), and count
    optimizer steps once torch's optimizer module has loaded."""
    table = _high(fd)
    os.close(fd)
    from gpu_notebook.capture.imports import ImportWatch

    ImportWatch(["torch.optim.optimizer"], _ChildCounter(table).hook_into).start()
