"""Find the bytes of a JSON array in a document and cut them into pieces of whole elements,
each decoded on its own.

A trace's events decoded all at once live all at once: a 1M-event file's records take ~4x its
size in fresh memory, every page of it faulted in, and the column pass after the decode reads
them back from main memory. Decoded a piece (~256 KB) at a time, the records of a piece are read
while they are still in cache and their memory is reused by the next piece.

The cut is found by a cheap search for ``}`` ``,`` ``{`` (JSON whitespace between), which may
also match inside a string or a nested value. Such a cut cannot go unnoticed: a piece always
starts at an element (the first does, and each next one starts where a piece that decoded ended),
so a piece cut inside a string or a nested value leaves it open, and ``[piece]`` is not JSON. The
caller must decode every piece with a strict JSON decoder (msgspec's is) and, on any decode
error, read the whole array another way.

The array itself is found by a search too (``key_array_candidates``): a decode of the whole
document only to learn where its events lie would read them all once more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["STAND_IN", "array_pieces", "key_array_candidates"]

# An object's end, a comma, the next object's start: the cut between two events.
_CUT = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")
# A value that stands in for the array in the document around it.
STAND_IN = b'"gpu_notebook: the array stood here"'


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


def key_array_candidates(
    doc: bytes, key: str, tries: int = 16
) -> Iterator[tuple[bytes, memoryview]]:
    """Where the array that is ``key``'s value may lie in the JSON object ``doc``, found by
    searching it rather than decoding it: pairs of (``doc`` with that array replaced by
    ``STAND_IN``, the array's bytes), from its first ``"key": [`` to each of the last ``tries``
    ``]`` in turn.

    A pair is the array when the document around it decodes with ``STAND_IN`` as the top-level
    ``key``'s value and the array's pieces all decode: ``"key"`` then opens a key of the top
    object (in JSON text a quote inside a string is escaped), any value may stand there, and
    the pieces make the array's bytes one such value.
    """
    found = re.search(rb'"%s"[ \t\n\r]*:[ \t\n\r]*\[' % re.escape(key.encode()), doc)
    if found is None:
        return
    start = found.end() - 1  # the array's "["
    view = memoryview(doc)
    end = len(doc)
    for _ in range(tries):
        end = doc.rfind(b"]", start, end)
        if end < 0:
            return
        yield b"".join((view[:start], STAND_IN, view[end + 1 :])), view[start : end + 1]
