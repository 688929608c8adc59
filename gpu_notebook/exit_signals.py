"""Our private files are removed when a signal ends the process while they exist.

Between the end of the user's script and the end of the report, ``gpucheck run`` holds a private
folder in TMPDIR (the profiler window's trace, hundreds of KB). torchrun stops the other ranks
with SIGTERM when one fails; a terminal that closes sends SIGHUP. Their default action kills the
process at once, leaving the folder behind. While that folder exists (our code runs then, not
the user's), a signal whose disposition is the default removes it first and then ends the process
by the same signal, so the exit status is what it would have been; a handler the user installed
is called as it would be, and decides (an exit it raises unwinds through our cleanup); an ignored
signal stays ignored. SIGINT needs nothing here: Python raises KeyboardInterrupt, which unwinds
through the same cleanup.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

ENDING_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def cleanup_before_signal_death(cleanup: Callable[[], None]) -> Iterator[None]:
    """Within the block, ``cleanup()`` runs before a default-action SIGTERM/SIGHUP ends us."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        before = previous.get(signum, signal.SIG_DFL)
        if callable(before):
            before(signum, frame)  # the user's handler, as without us
            return
        try:
            cleanup()
        finally:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)  # to this thread, at once: the process ends by it
            os._exit(128 + signum)  # only if the signal is blocked in this thread

    for sig in ENDING_SIGNALS:
        before = signal.getsignal(sig)
        if before is None or before == signal.SIG_IGN:
            continue  # set outside Python (we could not restore it), or ignored: left alone
        previous[sig] = before
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is on_signal:
                signal.signal(signum, handler)
