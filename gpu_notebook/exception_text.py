"""An exception as the one line a report's failure sentence quotes: ``Type: message``.

A message of several lines (a DataLoader worker's failure carries the worker's whole traceback;
shape errors list both shapes) is cut to its first line and, where there are more, its last: for
a worker that last line is the worker's own exception. The traceback itself is shown in full
above the report, as Python shows it. Imports nothing of the package.

The exception is the user's: its ``__str__`` is the user's code and may raise (a class whose
message reads an attribute its ``__init__`` never set). Python's own traceback then says
``<exception str() failed>``; so do we, and the user's exception stays the cell's outcome (it
was replaced by the AttributeError of its ``__str__``, with a traceback through our code).
"""

from __future__ import annotations

STR_FAILED = "<exception str() failed>"


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or what Python's traceback says where the exception's own ``__str__`` fails."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - the user's __str__, whatever it raises
        return STR_FAILED


def exception_line(exc: BaseException) -> str:
    lines = [line.strip() for line in exception_message(exc).splitlines() if line.strip()]
    text = type(exc).__name__
    if lines:
        text += f": {lines[0]}"
    if len(lines) > 1:
        text += f" ... {lines[-1]}"
    return text
