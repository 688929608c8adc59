"""File descriptors of ours, numbered high: the user's next ``open`` gets the number it gets
without us (a script may print, compare or pass it: the differential suite's ``fd`` probe).

A descriptor we keep open while the user's code runs (a thread's schedstat, a table shared with
children, the report's copy of stderr) is moved to half the descriptor limit, close-on-exec.
"""

from __future__ import annotations

import os


def high_dup(fd: int) -> int:
    """A close-on-exec copy of ``fd`` numbered high (half the soft limit, at most 32768); where
    the system refuses, a plain ``dup`` (non-inheritable too, PEP 446)."""
    import fcntl
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    base = max(3, min(soft, 1 << 16) // 2)
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base)
    except OSError:
        return os.dup(fd)


def open_high(path: str, flags: int = os.O_RDONLY) -> int:
    """``os.open`` of ``path``, numbered high (OSError as ``os.open`` raises it)."""
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        return high_dup(fd)
    finally:
        os.close(fd)
