"""An exception as the one line a report's failure sentence quotes: ``Type: message``.

A message of several lines (a DataLoader worker's failure carries the worker's whole traceback;
shape errors list both shapes) is cut to its first line and, where there are more, its last: for
a worker that last line is the worker's own exception. The traceback itself is shown in full
above the report, as Python shows it. Imports nothing of the package.
"""

from __future__ import annotations


def exception_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = type(exc).__name__
    if lines:
        text += f": {lines[0]}"
    if len(lines) > 1:
        text += f" ... {lines[-1]}"
    return text
