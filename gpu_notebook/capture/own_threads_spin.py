"""The process's other Python threads: their time on a core at the sampler's ticks, and where each
stood.

A thread of the measured program that computes beside the loop (transformers' memory tracker
polling the RSS with no sleep, a busy-wait heartbeat, a ``while running:`` poll of NVML) holds a
core and the GIL the loop thread waits for; the loop thread's wait for a core reads as the
machine's unless that thread's own time is read. Each tick lists the ``threading`` threads (not
the loop's; ours are hidden from that list, capture/threads.py), reads each one's time on a core
the way the loop thread's wait is read (``/proc/self/task/TID/schedstat``, its first field) and,
on its first reading and where it ran since its last, where its frame stands
(``sys._current_frames()``, ``_spot``): the innermost frame of the user's own code (not the
standard library's, an installed package's or ours), so a user's function run by a library's
thread (a ``ThreadPoolExecutor`` worker, a library's ``Thread`` subclass calling back) is named,
not the library's ``_worker``; with none, the outermost function below ``threading``'s own (the
thread's target: transformers' memory tracker). Bounded: ``MAX_THREADS`` threads,
``MAX_READINGS`` readings each (every other one dropped when full, as the sampler's buffer),
``MAX_SPOTS`` places each; when full, an idle thread makes room for a new one. An idle thread's
frames are not walked after its first reading.
"""

from __future__ import annotations

import os
import sysconfig
import threading
from types import FrameType

from gpu_notebook.capture.frames import current_frames
from gpu_notebook.records import OwnThread, ThreadSpot

__all__ = ["MAX_READINGS", "MAX_THREADS", "ThreadWatch"]

MAX_THREADS = 16
MAX_READINGS = 256
MAX_SPOTS = 16  # distinct places counted per thread (the first ones seen; the rest not counted)
# A thread whose time on a core grew less than this (s) over its readings is idle: the first to
# go when ``MAX_THREADS`` are read and another thread appears.
IDLE_S = 0.001
# A thread that ran less than this (s) since its last reading is not placed again: its frames
# are walked only where it is on a core (a spinner's place is where it runs).
RAN_S = 0.0001
_OURS = "gpu_notebook"  # our threads' name prefix (the warm-up thread of gpu_notebook/__init__)
_THREADING_FILE = threading.__file__
# Where code is not the user's own: the standard library, installed packages, this package.
_NOT_USERS = tuple(
    os.path.join(os.path.realpath(p), "")
    for p in {
        *(sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    }
    if p
)
_PACKAGE_DIRS = ("site-packages", "dist-packages")
_MAX_FILES = 4096  # files judged user's or not, kept (cleared when full)
_users_files: dict[str, bool] = {}


class _Track:
    """One thread's readings, owned by the watch (read and written under its lock)."""

    __slots__ = ("name", "native_id", "readings", "spots")

    def __init__(self, name: str, native_id: int) -> None:
        self.name = name
        self.native_id = native_id
        self.readings: list[tuple[float, float]] = []
        self.spots: dict[tuple[str, str, int], int] = {}

    def add(self, t_s: float, cpu_s: float) -> None:
        if len(self.readings) >= MAX_READINGS:
            # Keep every other reading, the newest included: even spacing, the span kept.
            self.readings = self.readings[(len(self.readings) - 1) % 2 :: 2]
        self.readings.append((t_s, cpu_s))

    def seen(self, spot: tuple[str, str, int] | None) -> None:
        if spot is None:
            return
        if spot in self.spots or len(self.spots) < MAX_SPOTS:
            self.spots[spot] = self.spots.get(spot, 0) + 1

    def record(self) -> OwnThread:
        spots = sorted(self.spots.items(), key=lambda kv: -kv[1])
        return OwnThread(
            name=self.name,
            native_id=self.native_id,
            readings=tuple(self.readings),
            spots=tuple(ThreadSpot(f, file, line, n) for (f, file, line), n in spots),
        )


class ThreadWatch:
    """Reads the process's other Python threads at each sampler tick (``read``); ``records()``
    hands them up. ``loop_tid``: the native id of the thread that runs the measured code, left
    out; None (no thread id known): reads nothing."""

    def __init__(self, loop_tid: int | None) -> None:
        self.loop_tid = loop_tid
        self._tracks: dict[int, _Track] = {}  # by threading ident
        self._lock = threading.Lock()
        self._off = loop_tid is None

    def read(self, t_s: float) -> None:
        """One reading of every other thread (the sampler's thread calls it)."""
        if self._off:
            return
        frames = current_frames()
        for thread in threading.enumerate():
            native, ident = thread.native_id, thread.ident
            if (
                native is None
                or ident is None
                or native == self.loop_tid
                or isinstance(thread, threading._DummyThread)
                or thread.name.startswith(_OURS)
            ):
                continue
            cpu_s = _run_s(native)
            if cpu_s is None:
                continue  # ended since listed, or no schedstat here
            frame = frames.get(ident)
            with self._lock:
                track = self._tracks.get(ident)
                if track is None or track.native_id != native:
                    if len(self._tracks) >= MAX_THREADS and not self._evict_idle():
                        continue
                    track = self._tracks[ident] = _Track(thread.name, native)
                ran = not track.readings or cpu_s - track.readings[-1][1] >= RAN_S
                track.add(t_s, cpu_s)
                if ran and frame is not None:
                    track.seen(_spot(frame))
            del frame
        del frames

    def _evict_idle(self) -> bool:
        """Full: drop the first thread read twice or more that has not run since its first
        reading (a long-lived kernel holds dozens: earlier cells' loaders, progress monitors,
        the shell's own), so a thread the cell starts is read. False: none is idle."""
        for ident, track in self._tracks.items():
            first, last = track.readings[0], track.readings[-1]
            if len(track.readings) >= 2 and last[1] - first[1] < IDLE_S:
                del self._tracks[ident]
                return True
        return False

    def records(self) -> tuple[OwnThread, ...]:
        """The threads read so far, each with at least one reading."""
        with self._lock:
            return tuple(t.record() for t in self._tracks.values() if t.readings)


def _run_s(native_id: int) -> float | None:
    """The thread's time on a core so far (schedstat's first field, ns), in s; None: not read."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _spot(frame: FrameType) -> tuple[str, str, int] | None:
    """Where the thread stands: the innermost frame of the user's own code (``_users``), else the
    outermost frame of the thread's own (below ``threading``'s bootstrap and ``run``: its
    target); its function's qualname, file and current line. None: only ``threading``'s."""
    target: FrameType | None = None
    f: FrameType | None = frame
    while f is not None:
        file = f.f_code.co_filename
        if _users(file):
            target = f
            break  # the innermost of the user's
        if file != _THREADING_FILE:
            target = f  # the outermost non-threading frame seen so far
        f = f.f_back
    if target is None:
        return None
    code = target.f_code
    return getattr(code, "co_qualname", code.co_name), code.co_filename, target.f_lineno or 0


def _users(file: str) -> bool:
    """The file is the user's own code: a notebook cell, a script, a module of theirs; not the
    standard library's (frozen modules among it), an installed package's, or this package's."""
    known = _users_files.get(file)
    if known is not None:
        return known
    if file.startswith("<"):
        own = not file.startswith("<frozen")  # a cell's "<ipython-input-...>", "<string>"
    else:
        path = os.path.realpath(file)
        parts = path.split(os.sep)
        own = not path.startswith(_NOT_USERS) and not any(d in parts for d in _PACKAGE_DIRS)
    if len(_users_files) >= _MAX_FILES:
        _users_files.clear()
    _users_files[file] = own
    return own
