"""Optimizer steps in child processes: counted and timed there, read by the parent.

A table in shared memory (a memfd), one slot per process that steps (:data:`SLOT`): its pid,
its parent's, how it started, its optimizer steps, the clock at its first step's end and at its
last's, and its time in the phases the parent's step clock times on every step (the
DataLoader's ``__next__``, ``torch.autograd.backward`` and ``grad``, the optimizer step) between those two
(``perf_counter_ns`` is CLOCK_MONOTONIC, one clock for every process of the machine). What is
left of the span is forward and the rest. A child claims its slot at its first optimizer step,
under a lock of the table (``lockf``: two children whose pids are equal modulo :data:`SLOTS`
never share one), and rewrites it at each step, one ``pwrite``; the parent reads the table when
its clock uninstalls. Fixed-size numbers only: nothing of the user's is pickled.

- *Forked* children inherit the descriptor (made just before the first fork, see
  ``stepclock._children_before_fork``) and start a :class:`ChildSteps` after the fork.
- *Spawned* children (``mp.spawn``, a spawn or forkserver ``Process``/``Pool``) start a fresh
  interpreter: :class:`ChildTable` adds one entry to the preparation data multiprocessing sends
  them; unpickled in the child (before the user's function), it takes the descriptor, passed
  the way multiprocessing passes descriptors, moves it to a high number (close-on-exec), adds
  the same entry to what the child itself spawns (grandchildren count too), and starts a
  :class:`ChildSteps` once the child has imported torch, told by an audit hook (nothing in
  ``sys.meta_path``; a child that never imports torch keeps the one hook, inert). Whatever
  fails there is swallowed: the child runs as without us, uncounted. No file, no thread,
  nothing printed; the descriptor the parent keeps is close-on-exec, numbered high, and closed
  at ``uninstall``.

Not profiled: a child's torch.profiler would need a trace file per child, a window per child
and a merge, for the one question the phases already answer (where a child's step goes).
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from gpu_notebook.capture import unseen
from gpu_notebook.capture.fds import high_dup

# pid, parent pid, how it started, steps, first_ns, last_ns, data_ns, backward_ns, optimizer_ns
SLOT = struct.Struct("9q")
SLOTS = 1024
TABLE_BYTES = SLOTS * SLOT.size
FORKED, SPAWNED = 0, 1
_STARTED = {FORKED: "forked", SPAWNED: "spawned"}


class ChildRow(NamedTuple):
    """One process that stepped, as the parent reads it (times in ns, from its first optimizer
    step's end to its last's)."""

    pid: int
    parent_pid: int
    started: str  # "forked" | "spawned"
    steps: int
    span_ns: int
    data_ns: int
    backward_ns: int
    optimizer_ns: int


def claim_slot(table: int, pid: int, slots: int = SLOTS) -> int | None:
    """A free slot for ``pid``, probing from ``pid % slots``, under the table's lock (a POSIX
    record lock: per process, so every child, forked or spawned, excludes every other). None:
    the table is full."""
    import fcntl

    fcntl.lockf(table, fcntl.LOCK_EX)
    try:
        for k in range(slots):
            slot = (pid + k) % slots
            if struct.unpack("q", os.pread(table, 8, slot * SLOT.size))[0] == 0:
                os.pwrite(table, struct.pack("q", pid), slot * SLOT.size)
                return slot
        return None
    finally:
        fcntl.lockf(table, fcntl.LOCK_UN)


def read_table(table: int) -> list[ChildRow]:
    data = os.pread(table, TABLE_BYTES, 0)
    rows = []
    for slot in range(SLOTS):
        pid, ppid, how, steps, first, last, data_ns, bwd, opt = SLOT.unpack_from(
            data, slot * SLOT.size
        )
        if pid and steps:
            rows.append(
                ChildRow(
                    pid, ppid, _STARTED.get(how, "forked"), steps, last - first, data_ns, bwd, opt
                )
            )
    return sorted(rows)


def new_table() -> int | None:
    """A zeroed table (a memfd), its descriptor numbered high and close-on-exec; None: no memfd."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create("gpu_notebook_steps", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, TABLE_BYTES)  # zeros: every slot free
            return high_dup(fd)
        finally:
            os.close(fd)
    except OSError:
        return None


# ---------------------------------------------------------------- in a child: its steps


class ChildSteps:
    """A child's optimizer steps and their phases, into its slot of the table.

    Two optimizer hooks in torch's global dicts (under keys of ours: the user's hook ids stay
    theirs) and pass-through wrappers (the DataLoader iterator's ``__next__``,
    ``torch.autograd.backward`` and ``torch.autograd.grad``), put in the child for its lifetime. Phases are timed on the
    thread of the first optimizer step only, from that step's end. A process forked from this
    one (a grandchild) inherits it and starts over in a slot of its own.
    """

    def __init__(self, table: int, started: int) -> None:
        self._table = table
        self._owner = os.getpid()
        self._started = started
        self._pid = 0  # whose slot is held (0: none yet)
        self._slot = -1
        self._steps = 0
        self._first_ns = 0
        self._tid = 0  # the thread whose phases are timed (0: none before the first step)
        self._data_ns = self._bwd_ns = self._opt_ns = 0
        self._opt_start_ns = 0
        self._opt_inner_ns = 0
        # A step's closure calls (``_wrap_closure``): their time less the phases timed inside.
        self._closure_ns = 0
        self._opt_closure_mark = 0
        self._in_closure = False
        self._tracing: Callable[[], bool] | None = None
        self._done: set[str] = set()
        self._inside: set[str] = set()  # the fields of the wrapped calls running now

    def hook(self, torch_modules: dict[str, Any]) -> bool:
        """Hook what of torch has loaded (``sys.modules``); True once all three are hooked."""
        import time

        clock = time.perf_counter_ns
        optim_mod = torch_modules.get("torch.optim.optimizer")
        if "optimizer" not in self._done and _loaded(optim_mod):
            pre = getattr(optim_mod, "_global_optimizer_pre_hooks", None)
            post = getattr(optim_mod, "_global_optimizer_post_hooks", None)
            if isinstance(pre, dict) and isinstance(post, dict):
                pre[("gpu_notebook", id(self))] = self.on_step_start
                post[("gpu_notebook", id(self))] = self.on_step
            self._done.add("optimizer")
        dl_mod = torch_modules.get("torch.utils.data.dataloader")
        if "dataloader" not in self._done and _loaded(dl_mod):
            owner = getattr(dl_mod, "_BaseDataLoaderIter", None)
            if owner is not None:
                _patch(owner, "__next__", self._wrap(owner.__next__, "_data_ns", clock))
            self._done.add("dataloader")
        autograd = torch_modules.get("torch.autograd")
        if "backward" not in self._done and _loaded(autograd):
            # A backward pass that returns the gradients (torch.autograd.grad, which
            # torch.func.grad calls) is backward as loss.backward() is, as in the step clock.
            for name in ("backward", "grad"):
                original = getattr(autograd, name, None)
                if original is not None:
                    _patch(autograd, name, self._wrap(original, "_bwd_ns", clock))
            self._done.add("backward")
        return len(self._done) == 3

    def _wrap(self, original: Any, field: str, clock: Callable[[], int]) -> Any:
        import _thread
        import functools

        get_ident = _thread.get_ident
        steps = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # the child's errors read as without us (stepclock)
            if get_ident() != steps._tid or field in steps._inside:
                return original(*args, **kwargs)
            # Not twice: a backward hook that takes torch.autograd.grad is inside the pass.
            steps._inside.add(field)
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                steps._inside.discard(field)
                setattr(steps, field, getattr(steps, field) + clock() - start)

        functools.update_wrapper(wrapper, original)  # sets __wrapped__ too
        unseen.invisible_to_compilers(wrapper, original, field)
        return wrapper

    def _traced(self) -> bool:
        tracing = self._tracing
        if tracing is None:
            tracing = self._tracing = unseen.tracing_probe(sys.modules["torch"])
        return tracing()

    def on_step_start(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        import _thread
        import time

        if self._tid != _thread.get_ident() or self._traced():
            return None
        self._opt_start_ns = time.perf_counter_ns()
        self._opt_inner_ns = self._data_ns + self._bwd_ns
        self._opt_closure_mark = self._closure_ns
        # A closure (LBFGS, any ``step(closure)``) runs forward and backward inside step(): it
        # is handed on wrapped, as the step clock does, so the update is step() less its calls.
        return closure_wrapped(optimizer, args, kwargs, self._wrap_closure)

    def _wrap_closure(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """The closure, timed: each call's time less the data wait and backward timed inside
        it (those stay theirs; the rest is forward and the rest, as the parent reads a child)."""
        import _thread
        import time

        get_ident = _thread.get_ident
        clock = time.perf_counter_ns
        steps = self

        def closure(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # the child's errors read as without us (stepclock)
            if steps._in_closure or get_ident() != steps._tid:
                return original(*args, **kwargs)
            start = clock()
            inner0 = steps._data_ns + steps._bwd_ns
            steps._in_closure = True
            try:
                return original(*args, **kwargs)
            finally:
                steps._in_closure = False
                inner = steps._data_ns + steps._bwd_ns - inner0
                steps._closure_ns += max(0, clock() - start - inner)

        setattr(closure, CLOSURE_ATTR, True)
        closure.__wrapped__ = original  # type: ignore[attr-defined]
        return closure

    def on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        import contextlib
        import time

        if self._traced():
            return
        now = time.perf_counter_ns()
        # The step is the user's: a write of ours that fails loses only the count.
        with contextlib.suppress(OSError):
            self._count(now)

    def _count(self, now: int) -> None:
        import _thread

        pid = os.getpid()
        if pid != self._pid:  # the first step here (a forked grandchild starts over)
            slot = claim_slot(self._table, pid)
            if slot is None:
                return
            self._pid, self._slot, self._steps, self._first_ns = pid, slot, 0, now
            self._tid = _thread.get_ident()
            self._data_ns = self._bwd_ns = self._opt_ns = self._opt_start_ns = 0
        elif self._opt_start_ns:
            # Less the phases timed inside step() and the rest of its closure's calls.
            inner = self._data_ns + self._bwd_ns - self._opt_inner_ns
            rest = self._closure_ns - self._opt_closure_mark
            self._opt_ns += max(0, now - self._opt_start_ns - inner - rest)
        self._opt_start_ns = 0
        self._steps += 1
        started = self._started if pid == self._owner else FORKED
        os.pwrite(
            self._table,
            SLOT.pack(
                pid,
                os.getppid(),
                started,
                self._steps,
                self._first_ns,
                now,
                self._data_ns,
                self._bwd_ns,
                self._opt_ns,
            ),
            self._slot * SLOT.size,
        )


# Set on our wrappers of a step()'s closure (here and the step clock's): an optimizer whose step
# hands the closure on to an inner optimizer's step (a wrapper optimizer) gets it wrapped once.
CLOSURE_ATTR = "_gpu_notebook_closure"


def closure_wrapped(
    optimizer: Any, args: Any, kwargs: Any, wrap: Callable[[Callable[..., Any]], Any]
) -> tuple[Any, Any] | None:
    """step()'s (args, kwargs) with its closure wrapped (the optimizer's step pre hook's
    answer), or None: no closure, or one wrapped already. torch passes step()'s own args, the
    optimizer first; the closure is ``closure=`` or the first callable after it."""
    if kwargs:
        closure = kwargs.get("closure")
        if callable(closure):
            if getattr(closure, CLOSURE_ATTR, False):
                return None
            return args, {**kwargs, "closure": wrap(closure)}
    for i, arg in enumerate(args):
        if i and arg is not optimizer and callable(arg):
            if getattr(arg, CLOSURE_ATTR, False):
                return None
            return (*args[:i], wrap(arg), *args[i + 1 :]), kwargs
    return None


def _loaded(module: Any) -> bool:
    """A module whose code has run to its end (not one still importing)."""
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _patch(owner: Any, name: str, wrapper: Any) -> None:
    setattr(owner, name, wrapper)


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


def _add_entry(module: Any, entry: Callable[[], _ChildEntry | None]) -> tuple[Any, Any]:
    """Wrap ``module.get_preparation_data`` so it carries ``entry()``; (original, wrapper)."""
    original = module.get_preparation_data

    def get_preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if isinstance(data, dict):
            made = entry()
            if made is not None:
                data[_KEY] = made
        return data  # type: ignore[no-any-return]

    get_preparation_data.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(module, "get_preparation_data", get_preparation_data)  # noqa: B010
    return original, get_preparation_data


class ChildTable:
    """The parent's side: the table (made at the first fork or spawn, :meth:`fd`) and, from
    ``install`` to ``uninstall``, ``multiprocessing.spawn.get_preparation_data`` wrapped (put
    back at ``uninstall`` if still ours)."""

    def __init__(self) -> None:
        self._module: Any = None
        self._original: Any = None
        self._wrapper: Any = None
        self._active = False
        self._fd: int | None = None  # the table (a memfd), numbered high, close-on-exec
        self._failed = False

    def install(self) -> None:
        self._active = True
        module = sys.modules.get("multiprocessing.spawn")  # torch imports it
        if module is None:
            return
        self._module = module
        self._original, self._wrapper = _add_entry(module, self._entry)

    def fd(self) -> int | None:
        """The table's descriptor, made now if not yet (None: no memfd here, or uninstalled)."""
        if self._fd is None and self._active and not self._failed:
            self._fd = new_table()
            self._failed = self._fd is None  # no memfd: children stay uncounted
        return self._fd

    def _entry(self) -> _ChildEntry | None:
        fd = self.fd()
        return _ChildEntry(fd) if fd is not None else None

    def uninstall(self) -> list[ChildRow]:
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


# ---------------------------------------------------------------- spawned children: the child


def start_in_spawned_child(fd: int) -> None:
    """In a spawned child, before the user's function is unpickled: keep the table's descriptor
    numbered high and close-on-exec (the number it came under is given back), hand the table on
    to what this child spawns, and count once torch has loaded."""
    table = high_dup(fd)
    os.close(fd)
    spawn = sys.modules.get("multiprocessing.spawn")
    if spawn is not None:
        _add_entry(spawn, lambda: _ChildEntry(table))
    steps = ChildSteps(table, SPAWNED)
    modules = sys.modules
    if steps.hook(modules):
        return
    pending = [True]

    def on_event(event: str, _args: Any) -> None:
        # An audit hook stays for the process's life: once torch is hooked it only returns.
        # It must never raise (that would fail the user's import, open, ...), and hooking
        # raises events of its own (``object.__setattr__``): not pending while it runs.
        if not pending[0] or "torch" not in modules:
            return
        pending[0] = False
        try:
            pending[0] = not steps.hook(modules)
        except Exception:  # noqa: BLE001 -- the child runs as without us, uncounted
            pending[0] = False

    sys.addaudithook(on_event)
