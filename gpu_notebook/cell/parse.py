"""The only place the user's cell is parsed: once per text and parser, whoever asks.

A report reads one cell many times: the facts the rules read (:mod:`ast`), the rules that look
at a block again, every codemod (libcst), the loader fix's second look. Each asks here, and a
text already parsed comes back from a small cache, so a report parses the cell once with
:mod:`ast` and once with libcst however many fixes it proposes. Both trees are shared: nobody
may change them (libcst trees are immutable; an ``ast`` tree here is only walked).

The two trees meet in :func:`cst_nodes`: the facts keep the :mod:`ast` node they came from, a
codemod edits libcst nodes, and both trees come from the same text, so a node's source range
names it in both (columns: ast counts UTF-8 bytes, libcst characters). A fix asks here for the
libcst nodes at its facts' ranges and edits those, without a search of its own.

``PARSES`` counts the parses really made (a cache hit is not one), by parser: tests assert the
count, benchmarks print it.
"""

from __future__ import annotations

import ast
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

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
    _HELD.clear()
    PARSES.clear()


# A fact's node, as the facts keep it: the fixes never read it, they hand it to cst_nodes.
FactNode: TypeAlias = ast.AST | None
Span = tuple[int, int, int, int]  # first line, first column, last line, end column (characters)


def _span(node: ast.AST | None, lines: Sequence[str]) -> Span | None:
    start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if start is None or end is None or col is None or end_col is None:
        return None

    def chars(line: int, byte: int) -> int:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return len(text.encode("utf-8")[:byte].decode("utf-8", errors="ignore"))

    last = chars(end, end_col)
    # ast ends a compound statement at its last line's `;` (`loss.backward();` ending a loop),
    # libcst before it (the `;` is the small statement's): the ranges of the same node.
    text = lines[end - 1][:last].rstrip(" \t") if 0 < end <= len(lines) else ""
    if text.endswith(";"):
        last = len(text[:-1].rstrip(" \t"))
    return start, chars(start, col), end, last


def once_per_module(module: Any, what: str, make: Callable[[], T]) -> T:
    """``make()`` once per parsed module, by identity (the last few kept): what a report's fixes
    share of the one libcst parse (its position index here, its facts, its parent map)."""
    for held, kind, value in _HELD:
        if held is module and kind == what:
            return cast(T, value)
    value = make()
    _HELD.insert(0, (module, what, value))
    del _HELD[12:]  # a report reads one cell (and a compare two): a few kinds each
    return value


T = TypeVar("T")
_HELD: list[tuple[Any, str, object]] = []


def _index(module: cst.Module) -> tuple[list[str], dict[tuple[Span, str], cst.CSTNode]]:
    """Every node of ``module`` by (source range, kind), the first of each (resolving positions
    is not free), and the module's lines (generated from the tree: not free either)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    index: dict[tuple[Span, str], cst.CSTNode] = {}
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node, where in positions.items():
        span = (where.start.line, where.start.column, where.end.line, where.end.column)
        index.setdefault((span, type(node).__name__), node)
    return module.code.splitlines(), index


def cst_nodes(module: cst.Module, nodes: Sequence[ast.AST | None]) -> list[cst.CSTNode | None]:
    """The libcst node of ``module`` at each ast node's range, of the same kind (a Call for a
    Call, an Integer for an int Constant); None where there is none (or no ast node). ``module`` and the ast tree must come from the same text."""
    lines, index = once_per_module(module, "index", lambda: _index(module))
    return [
        index.get((span, _kind(n))) if (span := _span(n, lines)) is not None else None
        for n in nodes
    ]


def _kind(node: ast.AST | None) -> str:
    """libcst's name for the node's kind: ast's one ``Constant`` is libcst's ``Integer``,
    ``Float``, ``Imaginary``, ``SimpleString``, ``Ellipsis`` or (``True``, ``None``) ``Name``."""
    if not isinstance(node, ast.Constant):
        return type(node).__name__
    return _CONSTANT_KINDS.get(type(node.value), "Ellipsis")


# The exact types an ast Constant holds (ast makes no subclass of them), by libcst's kind.
_CONSTANT_KINDS = {bool: "Name", type(None): "Name", int: "Integer", float: "Float",
                   complex: "Imaginary", str: "SimpleString", bytes: "SimpleString"}  # fmt: skip
