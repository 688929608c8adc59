"""The only place the user's cell is parsed: once per text and parser, whoever asks.

A report reads one cell many times: the facts the rules read (:mod:`ast`), the rules that look
at a block again, every codemod (libcst), the loader fix's second look. Each asks here, and a
text already parsed comes back from a small cache, so a report parses the cell once with
:mod:`ast` and once with libcst however many fixes it proposes. Both trees are shared: nobody
may change them (libcst trees are immutable; an ``ast`` tree here is only walked).

``PARSES`` counts the parses really made (a cache hit is not one), by parser: tests assert the
count, benchmarks print it.
"""

from __future__ import annotations

import ast
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import libcst as cst

PARSES: Counter[str] = Counter()
_CACHED = 8  # texts kept per parser: a report reads one cell, a CLI compare two
_ast: OrderedDict[str, ast.Module | SyntaxError] = OrderedDict()
_cst: OrderedDict[str, Any] = OrderedDict()  # cst.Module | cst.ParserSyntaxError

T = TypeVar("T")


def _remember(cache: OrderedDict[str, T], code: str, value: T) -> T:
    cache[code] = value
    if len(cache) > _CACHED:
        cache.popitem(last=False)
    return value


def parse_ast(code: str) -> ast.Module:
    """``ast.parse(code)``, once per text; raises SyntaxError (ValueError for a NUL byte)."""
    found = _ast.get(code)
    if found is None:
        PARSES["ast"] += 1
        try:
            found = ast.parse(code)
        except SyntaxError as exc:
            found = exc
        _remember(_ast, code, found)
    else:
        _ast.move_to_end(code)
    if isinstance(found, SyntaxError):
        raise found.with_traceback(None)
    return found


def check_parse(code: str) -> None:
    """Parse our own output (a patched cell) to prove it is Python: not a reading of the user's
    cell, so never cached, and counted apart ("check"). Raises SyntaxError or ValueError."""
    PARSES["check"] += 1
    ast.parse(code)


def parse_cst(code: str) -> cst.Module:
    """``libcst.parse_module(code)``, once per text; raises libcst's ParserSyntaxError."""
    import libcst as cst  # the rules alone never need it: imported by the first fix

    found = _cst.get(code)
    if found is None:
        PARSES["libcst"] += 1
        try:
            found = cst.parse_module(code)
        except cst.ParserSyntaxError as exc:
            found = exc
        _remember(_cst, code, found)
    else:
        _cst.move_to_end(code)
    if isinstance(found, cst.ParserSyntaxError):
        raise found.with_traceback(None)
    module: cst.Module = found
    return module


def forget() -> None:
    """Empty the caches and the counts (tests, benchmarks: measure a cold reading)."""
    _ast.clear()
    _cst.clear()
    PARSES.clear()


__all__ = ["PARSES", "check_parse", "forget", "parse_ast", "parse_cst"]
