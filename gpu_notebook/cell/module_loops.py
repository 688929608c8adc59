"""A module's forward that calls the same-shaped layers of a ModuleList one by one.

``self.heads = nn.ModuleList([nn.Linear(128, 1) for _ in range(48)])`` and, in ``forward``,
``torch.cat([head(h) for head in self.heads], 1)``: 48 tiny matmuls (and their backward, and
the optimizer's 96 tensors) where one ``nn.Linear(128, 48)`` does the same work as one op.
Read on the facts' :mod:`ast` tree; a ModuleList of different layers (a stack of blocks run in
sequence) is the ordinary deep model and is not one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree

# Layers whose copies side by side are one layer of the same kind with the outputs stacked.
STACKABLE_LAYERS = frozenset({"Linear", "Bilinear", "Conv1d", "Conv2d", "Embedding"})


@dataclass(frozen=True)
class ModuleLoop:
    line: int  # the forward's line that iterates the list
    text: str
    attr: str  # "heads": the ModuleList's attribute
    layer: str  # "Linear"
    count: str  # "48", "TASKS": the comprehension's range as written


def _built_lists(cls: ast.ClassDef) -> dict[str, tuple[str, str]]:
    """``self.X = nn.ModuleList([Layer(...) for _ in range(K)])``: X -> (Layer, K)."""
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        if (dotted(call.func) or "").split(".")[-1] != "ModuleList" or not call.args:
            continue
        comp = call.args[0]
        if not isinstance(comp, (ast.ListComp, ast.GeneratorExp)) or len(comp.generators) != 1:
            continue
        layer = (
            (dotted(comp.elt.func) or "").split(".")[-1] if isinstance(comp.elt, ast.Call) else ""
        )
        it = comp.generators[0].iter
        if layer not in STACKABLE_LAYERS or not (
            isinstance(it, ast.Call) and dotted(it.func) == "range" and len(it.args) == 1
        ):
            continue
        for target in node.targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                out[target.attr] = (layer, ast.unparse(it.args[0]))
    return out


def _iterated_attr(it: ast.expr) -> str | None:
    """``self.X``, ``enumerate(self.X)``, ``zip(self.X, ...)``: X."""
    if isinstance(it, ast.Call) and dotted(it.func) in ("enumerate", "zip") and it.args:
        it = it.args[0]
    if isinstance(it, ast.Attribute) and isinstance(it.value, ast.Name) and it.value.id == "self":
        return it.attr
    return None


def module_list_loops(tree: CellTree) -> list[ModuleLoop]:
    """Each ``forward`` loop (a ``for`` or a comprehension) over a ModuleList of copies of one
    stackable layer built by a comprehension in the same class."""
    out: list[ModuleLoop] = []
    for cls in ast.walk(tree.tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        built = _built_lists(cls)
        if not built:
            continue
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "forward"):
                continue
            for node in ast.walk(fn):
                iters = (
                    [node.iter]
                    if isinstance(node, ast.For)
                    else [g.iter for g in node.generators]
                    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp))
                    else []
                )
                for it in iters:
                    attr = _iterated_attr(it)
                    if attr in built:
                        layer, count = built[attr]
                        out.append(
                            ModuleLoop(tree.line_of(node), tree.text_of(node), attr, layer, count)
                        )
    return out
