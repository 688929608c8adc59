"""Cut the bytes of a JSON array into pieces of whole elements, each decoded on its own.

A trace's events decoded all at once live all at once: a 1M-event file's records take ~4x its
size in fresh memory, every page of it faulted in, and the column pass after the decode reads
them back from main memory. Decoded a piece (~1 MB) at a time, the records of a piece are read
while they are still in cache and their memory is reused by the next piece.

The cut is found by a cheap search for ``}`` ``,`` ``{`` (JSON whitespace between), which may
also match inside a string or a nested value. Such a cut cannot go unnoticed: a piece always
starts at an element (the first does, and each next one starts where a piece that decoded ended),
so a piece cut inside a string or a nested value leaves it open, and ``[piece]`` is not JSON. The
caller must decode every piece with a strict JSON decoder (msgspec's is) and, on any decode
error, read the whole array another way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["array_pieces"]

# An object's end, a comma, the next object's start: the cut between two events.
_CUT = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")


def array_pieces(array: memoryview, piece_bytes: int) -> Iterator[bytes | memoryview]:
    """``array`` (the bytes of one JSON array, ``[`` to ``]``) as JSON arrays of its elements in
    order, each about ``piece_bytes`` long or up to the end; the whole array when it is short.

    Decoded and concatenated, the pieces are the array's elements, provided every piece decodes
    (see the module's docstring): a piece that does not decode says only that this cut failed.
    """
    end = len(array) - 1  # the closing "]"
    start = 1  # just after the opening "["
    while True:
        cut = _CUT.search(array, start + piece_bytes) if start + piece_bytes < end else None
        if cut is None:
            yield array if start == 1 else b"".join((b"[", array[start:end], b"]"))
            return
        yield b"".join((b"[", array[start : cut.start() + 1], b"]"))
        start = cut.end() - 1  # the next element's "{"
