"""Loops written as expressions: a comprehension, ``map``/``starmap``/``reduce`` over a loader.

``losses = [train_step(b) for b in loader]``, ``sum(step(b) for b in loader)``,
``list(map(train_step, loader))``, ``deque(map(step, loader), maxlen=0)``,
``for _ in starmap(step, batches)``, ``reduce(lambda acc, b: acc + step(b), loader, 0.0)``: each
runs its element (or the function it maps) once per item, as a ``for`` loop's body runs. Each
is read as an :class:`ExpressionLoop`, a ``for`` the cell does not spell: its ``iter`` is the
iterable, its body the element (under the comprehension's ``if`` clauses) or a call of the
mapped function, so the readers of loops (which loop trains, which is the step loop, what a step
runs through its calls) read it as they read a ``for``. Only the ones that train are kept
(``CellTree``): ``[x * 2 for x in range(10)]`` stays an expression.

A fix cannot patch one (there is no body to put an ``if`` in, no counter to test): the
libcst tree has no ``for`` at its range (``cell.parse.cst_nodes`` gives None), and the loop
fixes decline it, naming its line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.words import last

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# Calls that run their first argument on each item of the iterable at ``ITERABLE_AT``.
_MAPPERS = {"map": 1, "starmap": 1, "reduce": 1, "imap": 1, "imap_unordered": 1}


class ExpressionLoop(ast.For):
    """A comprehension's ``for`` clause or a mapping call, read as a ``for`` loop. ``source``:
    the expression it stands for (the comprehension, the ``map`` call), the one its line,
    text and range are of."""

    source: ast.expr


def mapped(call: ast.Call) -> tuple[ast.expr, ast.expr] | None:
    """(the function, the iterable) of ``map(f, it)``, ``itertools.starmap(f, it)``,
    ``functools.reduce(f, it, init)``, ``pool.imap(f, it)``; None for any other call."""
    name = last(dotted(call.func))
    at = _MAPPERS.get(name or "")
    if at is None or len(call.args) <= at or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return call.args[0], call.args[at]


def candidates(tree: ast.AST) -> Iterator[ast.expr]:
    """Every comprehension and mapping call of ``tree``, outer first."""
    for node in ast.walk(tree):
        if isinstance(node, COMPREHENSIONS) or (isinstance(node, ast.Call) and mapped(node)):
            yield node


def build(source: ast.expr) -> tuple[list[ExpressionLoop], dict[ast.AST, ast.AST]]:
    """The loops ``source`` runs, outer first (a comprehension's clauses, one each), and the
    parents that place them: each loop under the one before (the first under ``source``), the
    element (or the mapped call) in the last one's body. Nothing of the cell's tree is changed:
    the caller adds the parents when it keeps the loops."""
    parents: dict[ast.AST, ast.AST] = {}
    loops: list[ExpressionLoop] = []
    holder: ast.AST = source
    if isinstance(source, ast.Call):
        pair = mapped(source)
        assert pair is not None  # candidates() gives a mapping call only
        fn, iterable = pair
        item: ast.expr = ast.Name(id="_", ctx=ast.Store())
        if isinstance(fn, ast.Lambda):
            elements: list[ast.expr] = [fn.body]
            if fn.args.args:
                item = ast.Name(id=fn.args.args[-1].arg, ctx=ast.Store())
        else:
            elements = [ast.Call(func=fn, args=[ast.Name(id="_", ctx=ast.Load())], keywords=[])]
        clauses: list[tuple[ast.expr, ast.expr, list[ast.expr]]] = [(item, iterable, [])]
    else:
        assert isinstance(source, COMPREHENSIONS)
        clauses = [(g.target, g.iter, list(g.ifs)) for g in source.generators]
        elements = [source.key, source.value] if isinstance(source, ast.DictComp) else [source.elt]
    for target, iterable, _ in clauses:
        loop = ExpressionLoop(target=target, iter=iterable, body=[], orelse=[])
        ast.copy_location(loop, source)
        loop.source = source
        parents[loop] = holder
        if loops:
            loops[-1].body = [loop]
            parents[iterable] = loop  # a later clause's iterable is read on each outer item
        loops.append(loop)
        holder = loop
    # The element runs on each item the ``if`` clauses let through (``if i % 10 == 0``: gated).
    body: list[ast.stmt] = [_statement(e, parents) for e in elements]
    innermost = loops[-1]
    for test in (t for _, _, ifs in reversed(clauses) for t in reversed(ifs)):
        gate = ast.If(test=test, body=body, orelse=[])
        ast.copy_location(gate, test)
        for stmt in body:
            parents[stmt] = gate
        parents[test] = gate
        body = [gate]
    innermost.body = body
    for stmt in body:
        parents[stmt] = innermost
    return loops, parents


def _statement(element: ast.expr, parents: dict[ast.AST, ast.AST]) -> ast.stmt:
    """The element as the statement of a loop's body, its parent."""
    if not hasattr(element, "lineno") and isinstance(element, ast.Call):
        ast.copy_location(element, element.func)  # the mapped call made here: at the function
        for arg in element.args:
            parents[arg] = element
    stmt = ast.Expr(value=element)
    ast.copy_location(stmt, element)
    parents[element] = stmt
    return stmt
