"""Where the CLI's own words go: a private copy of the terminal's stderr, taken at start.

A script may point fd 2 at its own log (``os.dup2``), replace ``sys.stderr``, or close it; our
report, live line and messages must not land in its log nor fail on a closed descriptor. So
``gpucheck`` duplicates fd 2 before the script runs (close-on-exec: the script's subprocesses
do not inherit it) and writes there. Everything written is escaped (``escapes.printable``): a
trace's names or a file name cannot drive the terminal.
"""

from __future__ import annotations

import contextlib
import sys
from typing import IO

from gpu_notebook.capture.fds import high_dup
from gpu_notebook.escapes import printable

_stream: IO[str] | None = None


def take_stderr() -> None:
    """Duplicate fd 2 now (once). Where fd 2 is closed already, our words go to sys.stderr."""
    global _stream
    if _stream is not None:
        return
    try:
        fd = high_dup(2)
    except OSError:
        return
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    _stream = open(  # noqa: SIM115 - lives as long as the process
        fd, "w", encoding=encoding, errors="backslashreplace", buffering=1, closefd=True
    )


def stream() -> IO[str] | None:
    """Our stderr: the private copy when taken, else the process's current one (None when the
    process started without a stderr)."""
    return _stream if _stream is not None else sys.stderr


def say(text: str = "", end: str = "\n") -> None:
    """Write ``text`` (escaped, newlines kept) to our stderr. A closed or broken terminal (the
    reader of a pipe gone) costs nothing: the report is lost, the exit code is not."""
    out = stream()
    if out is None:  # started with fd 2 closed: Python then has no sys.stderr either
        return
    with contextlib.suppress(OSError, ValueError):
        out.write(printable(text, newlines=True) + end)
        out.flush()


def show(text: str = "") -> None:
    """``print`` to stdout, escaped (``gpucheck analyze`` / ``compare`` print their reports there)."""
    print(printable(text, newlines=True))
