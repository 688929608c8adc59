"""Collectives the step loop calls itself: ``dist.all_reduce(loss)`` beside DDP's own.

A ``torch.distributed`` collective the user's loop runs every step (a loss or metric reduced
for a log, a barrier) is a point where every rank waits for the slowest, on top of the gradient
all-reduce DDP already runs under backward (unseen round 14: a logging ``dist.all_reduce`` held
82% of rank 0's samples, and the advice named DDP's bucket overlap). Found by name: the
collective's function reached through a name ``torch.distributed`` is bound to
(``import torch.distributed as dist``, ``from torch import distributed``) or called as
``torch.distributed.all_reduce``, or imported from it by name. A collective of gradients
(``p.grad`` in its arguments, or in a loop over parameters inside the step) is the gradient
exchange itself, not one of the user's extras: left out.
"""

from __future__ import annotations

import ast

from gpu_notebook.cell.facts import SourceLine
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree

COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "broadcast",
        "broadcast_object_list",
        "gather",
        "gather_object",
        "scatter",
        "all_to_all",
        "all_to_all_single",
        "barrier",
    }
)
_MODULE = "torch.distributed"


def own_collectives(tree: CellTree) -> tuple[SourceLine, ...]:
    """Every call of a collective the step loops run (in a step loop, or a step function a step
    loop calls), gated or not (``SourceLine.gated``: some steps only), gradients left out."""
    modules, functions = _distributed_names(tree.tree)
    found: dict[int, SourceLine] = {}
    for call in tree.calls():
        name = dotted(call.func)
        if name is None or not _is_collective(name, modules, functions):
            continue
        step_loop = tree.step_loop_of(call)
        if step_loop is None or _of_gradients(tree, call, step_loop):
            continue
        line = tree.source_line(call, "collective")
        found.setdefault(line.line, line)
    return tuple(found[k] for k in sorted(found))


def _distributed_names(tree: ast.AST) -> tuple[set[str], dict[str, str]]:
    """Names bound to the module (``dist``) and to its collectives (``all_reduce``)."""
    modules, functions = {_MODULE}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == _MODULE and alias.asname:
                    modules.add(alias.asname)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound = alias.asname or alias.name
                if node.module == "torch" and alias.name == "distributed":
                    modules.add(bound)
                elif node.module == _MODULE and alias.name in COLLECTIVES:
                    functions[bound] = alias.name
    return modules, functions


def _is_collective(name: str, modules: set[str], functions: dict[str, str]) -> bool:
    if name in functions:
        return True
    base, _, attr = name.rpartition(".")
    return attr in COLLECTIVES and base in modules


def _of_gradients(tree: CellTree, call: ast.Call, step_loop: ast.AST) -> bool:
    """The gradient exchange by hand: ``.grad`` in the arguments, or a loop inside the step."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(arg)):
            return True
    inner = tree.enclosing_loop(call)
    return inner is not None and inner is not step_loop
