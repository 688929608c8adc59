"""Where a setting the cell passes gets its integer: the literal a fix changes in its place.

``DataLoader(ds, num_workers=n)`` with ``n = 0`` above, ``self.n = n`` from a parameter ``n=0``,
``cfg["num_workers"]`` of a dict literal, ``4 if cuda else 0``: the workers fix edits that
literal, never overrides the variable. Read on the facts' :mod:`ast` tree (the nodes come back,
and ``cell/parse.cst_nodes`` names them in libcst), in source order: the first assignment wins.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gpu_notebook.cell.names import dotted, keyword_value, targets_of, walk
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import ACCUMULATION_KEYS


def _integer(node: ast.AST | None) -> ast.Constant | None:
    """An integer literal as written (``4``; not ``True``, not ``-1``)."""
    return node if isinstance(node, ast.Constant) and type(node.value) is int else None


def keyword_origin(
    tree: CellTree, call: ast.AST | None, keyword: str, running: int | None = None
) -> ast.Constant | None:
    """:func:`int_origin` of what the facts' ``call`` passes as ``keyword=`` (None: absent)."""
    value = keyword_value(call, keyword) if isinstance(call, ast.Call) else None
    return None if value is None else int_origin(tree, value, running)


def int_origin(tree: CellTree, value: ast.AST, running: int | None = None) -> ast.Constant | None:
    """The integer literal ``value`` gets its value from, in this cell (None: not found).

    ``n``: ``n = 0`` or a parameter ``n=0``; ``self.n``: ``self.n = 0``, or ``self.n = p`` with a
    parameter ``p=0`` (a constructor's default); ``cfg["n"]``: :func:`_dict_entry_origin`;
    ``4 if cuda else 0`` (there or in ``n = ...``): the branch whose literal is the value that
    ran (``running``), when exactly one is.
    """
    if isinstance(value, ast.IfExp):
        return branch_that_ran(value, running)
    if isinstance(value, ast.Subscript):
        return _dict_entry_origin(tree, value)
    name = dotted(value)
    attribute = isinstance(value, ast.Attribute) and dotted(value.value) == "self"
    if name is None or not (attribute or isinstance(value, ast.Name)):
        return None
    for node in _assigns(tree):
        if name in {dotted(t) for t in targets_of(node)}:
            if _integer(node.value) is not None:
                return _integer(node.value)
            if isinstance(node.value, ast.IfExp):
                return branch_that_ran(node.value, running)
            if isinstance(node.value, ast.Name) and attribute:
                return _param_default(tree, node.value.id)
    return None if attribute else _param_default(tree, name)


def branch_that_ran(value: ast.IfExp, running: int | None) -> ast.Constant | None:
    """The integer branch of ``a if cond else b`` that equals the value the run read; None
    when it is not known, neither branch is that literal, or both are."""
    if running is None:
        return None
    branches = [b for b in (_integer(value.body), _integer(value.orelse)) if b is not None]
    ran = [b for b in branches if b.value == running]
    return ran[0] if len(ran) == 1 else None


def _assigns(tree: CellTree) -> Iterator[ast.Assign]:
    return (node for node in walk(tree.tree) if isinstance(node, ast.Assign))


def _dict_entry_origin(tree: CellTree, value: ast.Subscript) -> ast.Constant | None:
    """``cfg["num_workers"]``: the integer of that key in the one dict literal ``cfg`` holds
    (``cfg = {"num_workers": 0}``), or, where ``cfg`` is a parameter of a function of the cell
    (``def make_loader(cfg)``), the dict literal its calls pass (``make_loader(CFG)``). None when
    there is not exactly one such entry."""
    key = value.slice
    if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, bytes))):
        return None
    if not isinstance(value.value, ast.Name):
        return None
    names = {value.value.id} | _passed_as(tree, value.value.id)
    found = [
        entry
        for node in _assigns(tree)
        if isinstance(node.value, ast.Dict) and names & {dotted(t) for t in targets_of(node)}
        for k, entry in zip(node.value.keys, node.value.values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(k.value, (str, bytes))
        and k.value == key.value
    ]  # fmt: skip
    return _integer(found[0]) if len(found) == 1 else None


def _passed_as(tree: CellTree, param: str) -> set[str]:
    """The names the cell's calls pass for ``param`` of its functions (``make_loader(CFG)``)."""
    out: set[str] = set()
    for fn in walk(tree.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [p.arg for p in fn.args.args]
        if param not in params:
            continue
        at = params.index(param)
        for call in tree.calls():
            if dotted(call.func) != fn.name:
                continue
            given = next((k.value for k in call.keywords if k.arg == param), None)
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            if given is None and at < len(positional):
                given = positional[at]
            if isinstance(given, ast.Name):
                out.add(given.id)
    return out


def _param_default(tree: CellTree, name: str) -> ast.Constant | None:
    """The integer default of the first parameter called ``name`` (a def's or a lambda's)."""
    for node in walk(tree.tree):
        if not isinstance(node, ast.arguments):
            continue
        positional = [*node.posonlyargs, *node.args]
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(node.defaults))
        pairs = zip(
            [*positional, *node.kwonlyargs],
            [*defaults, *node.defaults, *node.kw_defaults],
            strict=True,
        )
        for param, default in pairs:
            if param.arg == name and _integer(default) is not None:
                return _integer(default)
    return None


def accumulation_steps(tree: CellTree) -> list[ast.expr]:
    """The values of every ``gradient_accumulation_steps=`` (accelerate's ``Accelerator``, HF
    ``TrainingArguments``) and ``accumulate_grad_batches=`` (Lightning's ``Trainer``) the
    cell's calls pass."""
    return [k.value for call in tree.calls() for k in call.keywords if k.arg in ACCUMULATION_KEYS]
