"""From a fact's node to the libcst node of the same code: how a fix edits what its rule found.

The facts keep the :mod:`ast` node they came from; a codemod edits libcst nodes. Both trees are
parsed from the same text (``cell/parse.py``), so a node's source range names it in both: a fix
asks here for the libcst nodes at its facts' ranges and edits those, without searching the cell
with a finder of its own. Columns: ast counts UTF-8 bytes, libcst characters.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

Span = tuple[int, int, int, int]  # first line, first column, last line, end column (characters)


def _span(node: ast.AST | None, lines: Sequence[str]) -> Span | None:
    start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if start is None or end is None or col is None or end_col is None:
        return None

    def chars(line: int, byte: int) -> int:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return len(text.encode("utf-8")[:byte].decode("utf-8", errors="ignore"))

    return start, chars(start, col), end, chars(end, end_col)


def _index(module: cst.Module) -> tuple[list[str], dict[tuple[Span, str], cst.CSTNode]]:
    """Every node of ``module`` by (source range, kind), the first of each; computed once per
    module (a report's fixes share the one parse, and resolving positions is not free)."""
    for held, lines, index in _INDEXES:
        if held is module:
            return lines, index
    from libcst.metadata import MetadataWrapper, PositionProvider

    index = {}
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node, where in positions.items():
        span = (where.start.line, where.start.column, where.end.line, where.end.column)
        index.setdefault((span, type(node).__name__), node)
    lines = module.code.splitlines()  # generated from the tree: not free either
    _INDEXES.insert(0, (module, lines, index))
    del _INDEXES[4:]  # a report reads one cell (and a compare two)
    return lines, index


def cst_nodes(module: cst.Module, nodes: Sequence[ast.AST | None]) -> list[cst.CSTNode | None]:
    """The libcst node of ``module`` at each ast node's range, of the same kind (a Call for a
    Call); None where there is none (or no ast node). ``module`` and the ast tree must come from the same text."""
    lines, index = _index(module)
    return [
        index.get((span, type(n).__name__)) if (span := _span(n, lines)) is not None else None
        for n in nodes
    ]


_INDEXES: list[tuple[cst.Module, list[str], dict[tuple[Span, str], cst.CSTNode]]] = []

__all__ = ["cst_nodes"]
