"""Every thread's current frame, read without the interpreter's GC deadlock.

On CPython 3.11 before the fix of gh-106883, ``sys._current_frames()`` holds the runtime's
thread-list lock while it makes each thread's frame object; making one can start a collection,
and a collection that frees a ``threading.local`` (IPython, tqdm and torch keep them) takes the
same lock again: the calling thread waits on itself while holding the GIL, and the process
hangs for good, every thread with it (seen: a fresh-clone CI hung in a measured cell, the
sampler thread in ``local_clear`` under ``_PyThread_CurrentFrames``). Our samplers call it
from their own thread many times a second, so a long-lived kernel met it. CPython's own fix is
to keep the collector off for the call; this does the same where the interpreter does not
(3.12 runs collections only at the eval breaker, never inside the call). A collector the
program turned off stays off.
"""

from __future__ import annotations

import gc
import sys
from types import FrameType

__all__ = ["GUARDED", "current_frames"]

# The interpreters whose ``sys._current_frames()`` may collect while holding the lock.
GUARDED = sys.version_info < (3, 12)


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()``, with the collector off for the call where it could deadlock."""
    if not GUARDED or not gc.isenabled():
        return sys._current_frames()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        gc.enable()
