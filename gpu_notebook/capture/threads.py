"""Our background threads, out of the measured program's sight.

A script that ends with ``for t in threading.enumerate(): t.join()`` (or a test that checks no
thread is left) must behave as without us: a ``threading.Thread`` of ours would be listed and
joined, and the join would wait for a capture that only ends after the script. So the capture's
threads are started with the low-level ``_thread`` module (not in ``threading.enumerate()``),
and :class:`HiddenThread` gives them the ``join``/``is_alive`` that ``threading.Thread`` would.
"""

from __future__ import annotations

import _thread
import functools
import os
import sys
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

_Started = TypeVar("_Started", bound="StartsAndStops")

# The hidden threads alive now, for tests and for stop() paths that must know what is ours.
_LIVE: weakref.WeakSet[HiddenThread] = weakref.WeakSet()


def live_hidden_threads() -> list[HiddenThread]:
    """Our hidden threads that have not finished."""
    return [t for t in list(_LIVE) if t.is_alive()]


def forget_dummy() -> None:
    """Drop the dummy ``Thread`` that ``threading.current_thread()`` registers when library code
    (ipykernel, traitlets) calls it on one of our threads: ``threading.enumerate()`` would list
    it, and ``join()`` on it fails. Called after each call into such code."""
    thread = threading._active.get(_thread.get_ident())  # type: ignore[attr-defined]
    if isinstance(thread, threading._DummyThread):
        threading._active.pop(_thread.get_ident(), None)  # type: ignore[attr-defined]


def thread_idents() -> frozenset[int]:
    """The idents of the ``threading`` threads alive now (ours are not among them)."""
    return frozenset(threading._active)  # type: ignore[attr-defined]


def users_thread_left_running(before: frozenset[int]) -> int | None:
    """The one thread started since ``before`` that is still alive and runs the user's own code
    (its target, or its ``run`` override, defined outside the standard library, the installed
    packages and this package): a cell that starts its training on a thread and returns before
    that thread's first step. None when there is no such thread or more than one."""
    found = [
        ident
        for ident, thread in list(threading._active.items())  # type: ignore[attr-defined]
        if ident not in before and thread.is_alive() and _runs_users_code(thread)
    ]
    return found[0] if len(found) == 1 else None


def _runs_users_code(thread: threading.Thread) -> bool:
    target = getattr(thread, "_target", None)
    if target is None and type(thread).run is not threading.Thread.run:
        target = type(thread).run
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    if code is None:
        return False
    filename = code.co_filename
    if not filename.startswith("<") and not os.path.isabs(filename):
        return False
    return not filename.startswith(_library_prefixes())


@functools.lru_cache(maxsize=1)
def _library_prefixes() -> tuple[str, ...]:
    """Where code that is never the user's lives: the standard library, the installed packages
    (and any ``site-packages`` on ``sys.path``), this package."""
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found |= {p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))}
    found.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(
        sorted(
            {os.path.join(p, "") for p in found}
            | {os.path.join(os.path.realpath(p), "") for p in found}
        )
    )


class HiddenThread:
    """Runs ``target()`` on a thread ``threading.enumerate()`` does not list."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self.name = name
        self._target = target
        self._done = _thread.allocate_lock()
        self.ident: int | None = None

    def start(self) -> HiddenThread:
        self._done.acquire()
        _LIVE.add(self)
        self.ident = _thread.start_new_thread(self._run, ())
        return self

    def _run(self) -> None:
        try:
            self._target()
        finally:
            # Library code that called threading.current_thread() here registered a dummy
            # Thread for us; it would outlive us in threading.enumerate() (and cannot be joined).
            forget_dummy()
            self._done.release()

    def join(self, timeout: float | None = None) -> None:
        if self._done.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            self._done.release()

    def is_alive(self) -> bool:
        if self.ident is None:
            return False
        if self._done.acquire(blocking=False):
            self._done.release()
            return False
        return True


class StartsAndStops(ABC):
    """A ``with`` block starts it and stops it, whatever the block did: the samplers' threads
    and the capture's hooks are cleaned up by structure, not by each caller remembering."""

    @abstractmethod
    def start(self) -> object: ...

    @abstractmethod
    def stop(self) -> object: ...

    def __enter__(self: _Started) -> _Started:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
