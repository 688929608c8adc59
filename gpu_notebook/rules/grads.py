"""Gradients filled with zeros every step instead of freed: ``zero_grad(set_to_none=False)``.

Level: PyTorch performance tuning guide, "Use parameter.grad = None instead of
model.zero_grad() or optimizer.zero_grad()": zeroing runs one fill per parameter every step
(``Optimizer.zero_grad`` calls ``p.grad.zero_()`` per tensor unless the optimizer is foreach or
fused: on a GPU one kernel launch each), and the next backward then adds into the zeros instead
of writing its gradient. ``set_to_none=True`` (torch's default since 2.0) frees them instead.
Flagged where a line of a step loop (or of the step function it calls) keeps them: a
``zero_grad(set_to_none=False)`` / ``zero_grad(False)`` call, or a ``<x>.grad.zero_()``
statement (a hand-written update). Low: the fill is small next to a step's own work. No bound:
no figure of the trace sets the fill apart from the rest of the optimizer phase (its share is
said as the most it could be part of), so ``--try-fixes`` measures it.

The fix sets ``set_to_none=True`` on those calls and turns ``x.grad.zero_()`` into
``x.grad = None``, where they stand. Its side effect: code that reads ``.grad`` before the
next backward finds None, and torch.optim skips a parameter whose gradient is None (with zeros
its momentum and weight decay still update it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import keyword_of, literal_of, method_of, receiver_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

Form = Literal["zero_grad", "grad_zero"]


@dataclass(frozen=True)
class ZeroFilledGrads(Said):
    """A step loop fills its gradients with zeros each step instead of freeing them."""

    where: SourceLine  # the first such line (in a function the cell calls too: cell.calls)
    form: Form  # zero_grad(set_to_none=False), or x.grad.zero_()
    count: int  # such lines
    optimizer: float | None  # the optimizer phase's share of the step (step and zero_grad)


def zero_filled(tree: CellTree) -> list[tuple[ast.AST, Form]]:
    """The step loops' ``zero_grad(set_to_none=False)`` calls and ``x.grad.zero_()``
    statements, in source order: what the rule reports and the fix edits (the same nodes)."""
    out: list[tuple[ast.AST, Form]] = []
    for call in tree.calls():
        if tree.step_loop_of(call) is None:
            continue
        method = method_of(call)
        if method == "zero_grad" and _keeps_grads(call):
            out.append((call, "zero_grad"))
        elif method == "zero_" and not (call.args or call.keywords) and _is_grad(call):
            statement = tree.parent.get(call)
            if isinstance(statement, ast.Expr):
                out.append((statement, "grad_zero"))
    out.sort(key=lambda item: (tree.line_of(item[0]), getattr(item[0], "col_offset", 0)))
    return out


def _keeps_grads(call: ast.Call) -> bool:
    """``zero_grad(set_to_none=False)`` or ``zero_grad(False)``: a literal False, nothing else."""
    given = keyword_of(call, "set_to_none")
    node = given.value if given is not None else (call.args[0] if call.args else None)
    return node is not None and literal_of(node) is False


def _is_grad(call: ast.Call) -> bool:
    """``x.grad.zero_()`` or ``x.grad.data.zero_()``."""
    target = receiver_of(call)
    if isinstance(target, ast.Attribute) and target.attr == "data":
        target = target.value
    return isinstance(target, ast.Attribute) and target.attr == "grad"


def grads_zero_filled(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop fills gradients with zeros where it could free them."""
    if facts.tree is None:
        return None
    hits = zero_filled(facts.tree)
    if not hits:
        return None
    node, form = hits[0]
    where = facts.tree.source_line(node, form)
    said = ZeroFilledGrads(where, form, len(hits), share(analysis, "optimizer"))
    return found("grads.zero_filled", "low", said, line=where.cell_line, fix=FIX)


def grads_to_none(module: cst.Module) -> CodemodResult:
    """Each line the rule found, freed where it stands: ``zero_grad(set_to_none=True)``,
    ``x.grad = None``."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import Declined, Edited, facts_of, nodes_of, replace_nodes

    tree = facts_of(module).tree  # the facts the rule read (the same text, scanned once)
    hits = [n for n, _ in zero_filled(tree)] if tree is not None else []
    outside = _grad_read_outside(tree, hits) if tree is not None else None
    if outside is not None:
        return Declined(
            f"line {outside} reads .grad outside the training step: with the gradients freed "
            "it would find None there"
        )
    edits: dict[cst.CSTNode, Replacement] = {}
    for node in nodes_of(module, hits):
        if isinstance(node, cst.Call):
            edits[node] = _set_to_none
        elif isinstance(node, cst.Expr):
            edits[node] = _grad_none
    if not edits:
        return Declined("no zero_grad(set_to_none=False) or .grad.zero_() in the training loop")
    return Edited(replace_nodes(module, edits), f"{len(edits)} line(s)")


def _grad_read_outside(tree: CellTree, hits: list[ast.AST]) -> int | None:
    """The first line reading ``.grad`` outside the step loops and step functions that hold the
    found lines (a print of gradient norms after the loop): freed, it would read None."""
    regions: list[ast.AST] = []
    for hit in hits:
        loop = tree.step_loop_of(hit)
        function = tree.nearest(hit, (ast.FunctionDef, ast.AsyncFunctionDef))
        regions += [r for r in (loop, function) if r is not None]
    for node in ast.walk(tree.tree):
        reads = isinstance(node, ast.Attribute) and node.attr == "grad"
        if reads and not any(tree.inside(node, region) for region in regions):
            return tree.line_of(node)
    return None


def _set_to_none(updated: cst.Call) -> cst.Call:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    # zero_grad(False): the positional flag goes, the keyword says what it is.
    kept = [a for a in updated.args if a.keyword is not None]
    return set_keyword(updated.with_changes(args=kept), "set_to_none", cst.Name("True"))


def _grad_none(updated: cst.Expr) -> cst.Assign:
    import libcst as cst

    assert isinstance(updated.value, cst.Call) and isinstance(updated.value.func, cst.Attribute)
    grad = updated.value.func.value  # x.grad, or x.grad.data
    if isinstance(grad, cst.Attribute) and grad.attr.value == "data":
        grad = grad.value
    assert isinstance(grad, cst.Attribute)  # zero_filled matched x.grad
    return cst.Assign(targets=[cst.AssignTarget(grad)], value=cst.Name("None"))


FIX = Fix(
    "grads_to_none",
    "Free gradients instead of zeroing them",
    (
        "Each step fills every gradient with zeros, one fill per parameter, and the backward "
        "then adds into them.",
        "set_to_none=True (x.grad = None) skips the fill and the backward writes its gradient.",
    ),
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
    "#use-parameter-grad-none-instead-of-model-zero-grad-or-optimizer-zero-grad",
    grads_to_none,
)
RULES = (grads_zero_filled,)
