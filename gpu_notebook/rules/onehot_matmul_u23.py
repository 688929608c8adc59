"""An embedding lookup written as a one-hot matrix times a table: a dense product for a gather.

``F.one_hot(ids, V).float() @ table``, ``torch.matmul(onehot, W)``, a one-hot fed to an
``nn.Linear(V, D)``: the step materialises a [..., V] float tensor for every token and multiplies
it by the [V, D] table (B*L*V*D multiply-adds forward, as many backward for the table's
gradient), where a row gather (``F.embedding(ids, table)``, ``table[ids]``, ``nn.Embedding``)
reads B*L rows of D. Written so where courses show that "an embedding is a one-hot times a
matrix". Unseen round 23 (accel_onehot_embed: V 5000, 32 tokens, batch 64): the two lines held
most of the sampled step and no finding named them.

Flagged where a ``one_hot(...)`` call (cast to a float type or not) is an operand of ``@`` /
``torch.matmul`` / ``mm`` / ``bmm`` / ``einsum``, or of a call of the model's own submodule
(``self.proj(onehot)``), directly or through a name bound to it in the same function, in code
the step runs every step: a step loop (not under its ``if step % N``), a function it runs through
its calls (the model's ``forward``), or a framework's per-step method. The range: the lines'
sampled share (the one-hot and the product: the forward) at its interval's low end, up to twice
its high end (the table's gradient is a product of the same size, run in the backward the
sampler reads on the backward line), less what the gather still costs (``KEPT``); said only
where the lines' share can reach the lowest level (a class label's one-hot of 10 costs
nothing worth a change). No patch: the
table's orientation (a Linear's weight is [D, V]) and the bias decide the lookup's spelling.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.cell.words import last
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.restacked_bank import _share_high
from gpu_notebook.rules.syncs import lines_share

_PRODUCTS = frozenset({"matmul", "mm", "bmm", "einsum", "linear", "addmm", "tensordot"})
_CASTS = frozenset({"float", "double", "half", "bfloat16", "to", "type"})
# The share of the product's time a row gather still takes: (least, most).
KEPT = (0.0, 0.10)


@dataclass(frozen=True)
class OneHotProduct(Said):
    """The step multiplies a one-hot matrix (made on ``onehot_line``) on ``line``."""

    line: int
    text: str
    onehot_line: int
    share: float | None  # the two lines' sampled share (None: not sampled enough)
    low: float | None
    bound: float | None


def _is_onehot(node: ast.expr) -> bool:
    """``F.one_hot(...)``, with any chain of float casts after it (``.float()``, ``.to(...)``)."""
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _CASTS
    ):
        node = node.func.value
    return isinstance(node, ast.Call) and last(dotted(node.func) or "") == "one_hot"


def _onehot_names(fn: ast.AST) -> dict[str, ast.AST]:
    """Names bound in ``fn`` (not in a nested def) to a one-hot: the binding statement."""
    out: dict[str, ast.AST] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and _is_onehot(node.value):
                out[target.id] = node
    return out


def _operands(node: ast.AST) -> list[ast.expr]:
    """The operands of a product: ``a @ b``'s two, ``torch.matmul(a, b)``'s arguments, a
    submodule call's (``self.proj(x)``) arguments."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return [node.left, node.right]
    if isinstance(node, ast.Call):
        name = dotted(node.func) or ""
        if last(name) in _PRODUCTS or (
            name.startswith("self.") and name.count(".") == 1 and not node.keywords
        ):
            return list(node.args)
    return []


def onehot_products(tree: CellTree) -> list[tuple[ast.AST, int]]:
    """The step's products of a one-hot: (the product node, the one-hot's line), in order."""
    framework = {id(fn) for fn in per_step_methods(tree)}
    scopes: list[ast.AST] = [tree.tree]
    scopes += [n for n in ast.walk(tree.tree) if isinstance(n, Function)]
    out: list[tuple[ast.AST, int]] = []
    seen: set[int] = set()
    for scope in scopes:
        named = _onehot_names(scope)
        for node in ast.walk(scope):
            if id(node) in seen or tree.nearest(node, Function) is not (
                scope if isinstance(scope, Function) else None
            ):
                continue
            made: ast.AST | None = None
            for operand in _operands(node):
                if _is_onehot(operand):
                    made = operand
                elif isinstance(operand, ast.Name) and operand.id in named:
                    made = named[operand.id]
            if made is None or not _per_step(tree, node, framework):
                continue
            seen.add(id(node))
            out.append((node, tree.line_of(made)))
    out.sort(key=lambda hit: (tree.line_of(hit[0]), getattr(hit[0], "col_offset", 0)))
    return out


def _per_step(tree: CellTree, node: ast.AST, framework: set[int]) -> bool:
    loop = tree.step_loop_of(node)
    if loop is not None and tree.inside(node, loop):
        return not tree.gated(node, loop)
    holder = tree.nearest(node, Function)
    return isinstance(holder, Function) and (
        id(holder) in framework or tree.run_by_step(node) is not None or loop is not None
    )


def onehot_product(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step multiplies a one-hot matrix by a table: a lookup done as a dense product."""
    tree = facts.tree
    hits = onehot_products(tree) if tree is not None else []
    if tree is None or not hits:
        return None
    node, made = hits[0]
    line = tree.line_of(node)
    lines = tuple(SourceLine(n, "", "onehot") for n in sorted({line, made}))
    share = lines_share(analysis, lines)
    samples = analysis.stacks.samples if analysis.stacks is not None else 0
    # A small one-hot (a class label's, C 10) costs little: said only where the lines can
    # reach the lowest level.
    if share is None or not samples or severity_of(_share_high(share, samples)) is None:
        return None
    low_share = sampled_share_low(share, samples) * (1 - KEPT[1])
    high_share = min(1.0, 2 * _share_high(share, samples)) * (1 - KEPT[0])
    low, bound = gain_range(low_share, high_share, analysis)
    said = OneHotProduct(line, tree.text_of(node), made, share, low, bound)
    severity = severity_of(share, low=0.0) or "low"
    return found("host.onehot_product", severity, said, phase_share=share, bound=bound, low=low,
                 line=line)  # fmt: skip


RULES = (onehot_product,)
