"""A compiled model whose forward breaks the graph on every call, read from the cell's source.

The rule and its message record in one place; its wording is ``words/graph_breaks.py`` and its
test ``tests/test_rule_graph_breaks.py`` (rules/__init__ finds the module).

Dynamo cannot trace a read of a tensor's value into Python (``.item()``, ``.tolist()``,
``.numpy()``) or a ``print``: it ends the graph there, runs that code eagerly and starts another
graph after it, on every call (``torch._dynamo.explain`` and ``TORCH_LOGS=graph_breaks`` name each
break). A branch on such a value (``if h.abs().max().item() > 50:``) keeps the model in pieces
with Python between them, which torch.compile was meant to remove. Seen (unseen round 10,
compile_graph_break): host-bound, "torch.compile is already on", no word of the break. Dynamo's
live counters (rules/recompiles.py, read on scripts too since ``gpucheck run`` hands the rules
the script's globals) count graphs, not breaks: its two graphs stay under the recompile limit.

Flagged where the cell compiles an instance of a class it defines (``torch.compile(Net())``, or
``model = Net()`` then ``torch.compile(model)``) and that class's ``forward`` holds such a call
outside nested functions. No bound: nothing here times the pieces apart (the trace of a compiled
step shows its graphs, not what joining them would save); no patch: how to remove the read (a
``torch.where``, a check every N steps, none at all) is the user's call. Low.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted, method_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import HOST_READ_METHODS
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found


@dataclass(frozen=True)
class GraphBreak(Said):
    """A compiled model's forward holds a call Dynamo breaks the graph at."""

    line: int  # the first such call
    text: str
    model: str  # the class whose forward holds it
    count: int  # such calls in that forward


def compiled_classes(tree: CellTree, facts: SourceFacts) -> set[str]:
    """Classes of the cell whose instances it compiles: ``torch.compile(Net(...))``, or
    ``torch.compile(model)`` where the cell makes ``model = Net(...)``."""
    out = set()
    for call in tree.calls():
        if dotted(call.func) != "torch.compile" or not call.args:
            continue
        given = call.args[0]
        if isinstance(given, ast.Call) and isinstance(given.func, ast.Name):
            out.add(given.func.id)
        elif isinstance(given, ast.Name):
            made = facts.constructor_of(given.id)
            if made is not None:
                out.add(made)
    return out


def breaking_calls(tree: CellTree, classes: set[str]) -> list[tuple[ast.Call, str]]:
    """The value reads and prints in the ``forward`` of ``classes`` (not in functions nested in
    it), each with its class, in source order."""
    out: list[tuple[ast.Call, str]] = []
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.ClassDef) or node.name not in classes:
            continue
        for method in node.body:
            if isinstance(method, ast.FunctionDef) and method.name == "forward":
                out += [(call, node.name) for call in _own_calls(method) if _breaks(call)]
    out.sort(key=lambda item: (tree.line_of(item[0]), item[0].col_offset))
    return out


def _own_calls(function: ast.FunctionDef) -> list[ast.Call]:
    found: list[ast.Call] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # a nested function is traced, or not, on its own
        if isinstance(node, ast.Call):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _breaks(call: ast.Call) -> bool:
    if isinstance(call.func, ast.Name):
        return call.func.id == "print"
    # A tensor method that hands a value to Python: Dynamo ends the graph at each (by default).
    return method_of(call) in HOST_READ_METHODS and not call.args and not call.keywords


def graph_break(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A compiled model's forward breaks its graph on every call."""
    if facts.tree is None or not facts.compiled:
        return None
    hits = breaking_calls(facts.tree, compiled_classes(facts.tree, facts))
    if not hits:
        return None
    node, model = hits[0]
    line = facts.tree.line_of(node)
    said = GraphBreak(line, facts.tree.text_of(node), model, len(hits))
    return found("compile.graph_break", "low", said, line=line)


RULES = (graph_break,)
