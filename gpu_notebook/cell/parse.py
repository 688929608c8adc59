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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import libcst as cst

PARSES: Counter[str] = Counter()
_CACHED = 8  # texts kept per parser: a report reads one cell, a CLI compare two
_ast: OrderedDict[str, Any] = OrderedDict()  # text -> ast.Module or its SyntaxError
_cst: OrderedDict[str, Any] = OrderedDict()  # text -> cst.Module or its ParserSyntaxError


def _cached(
    kind: str, cache: OrderedDict[str, Any], code: str, parse: Any, error: type[Exception]
) -> Any:
    """``parse(code)`` once per text (its syntax error too, raised again on each call)."""
    found = cache.get(code)
    if found is None:
        PARSES[kind] += 1
        try:
            found = parse(code)
        except error as exc:
            found = exc
        cache[code] = found
        if len(cache) > _CACHED:
            cache.popitem(last=False)
    else:
        cache.move_to_end(code)
    if isinstance(found, error):
        raise found.with_traceback(None)
    return found


def parse_ast(code: str) -> ast.Module:
    """``ast.parse(code)``, once per text; raises SyntaxError (ValueError for a NUL byte)."""
    module: ast.Module = _cached("ast", _ast, code, ast.parse, SyntaxError)
    return module


def parse_cst(code: str) -> cst.Module:
    """``libcst.parse_module(code)``, once per text; raises libcst's ParserSyntaxError."""
    import libcst as cst  # the rules alone never need it: imported by the first fix

    module: cst.Module = _cached("libcst", _cst, code, cst.parse_module, cst.ParserSyntaxError)
    return module


def check_parse(code: str) -> None:
    """Parse our own output (a patched cell) to prove it is Python: not a reading of the user's
    cell, so never cached, and counted apart ("check"). Raises SyntaxError or ValueError."""
    PARSES["check"] += 1
    ast.parse(code)


def forget() -> None:
    """Empty the caches and the counts (tests, benchmarks: measure a cold reading)."""
    _ast.clear()
    _cst.clear()
    PARSES.clear()


__all__ = ["PARSES", "check_parse", "forget", "parse_ast", "parse_cst"]
