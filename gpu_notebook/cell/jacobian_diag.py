"""A Jacobian of the whole batch of which the step keeps only its batch diagonal.

``torch.func.jacrev(f)(x)``, ``jacfwd(f)(x)`` or ``torch.autograd.functional.jacobian(f, x)``
on a batch ``x`` of B samples differentiate every one of f's B outputs against every one of its
B inputs: a [B, ..., B, ...] Jacobian, B backward (or forward) passes. Read on its batch diagonal
(``J.diagonal(dim1=0, dim2=k)``, ``torch.einsum("bibj->bij", J)``, ``J[idx, :, idx]``) it keeps
each sample's own block and drops the rest, which for samples f treats apart is all zeros:
``vmap(jacrev(f_one))(x)`` computes the blocks alone, and where f gives one number a sample,
``torch.autograd.grad(f(x).sum(), x, create_graph=True)[0]`` does in one backward.

Found on the cell's :mod:`ast` tree: a step loop's body (not under an ``if``), a function it runs
every step, or a framework's per-step method (Lightning's ``training_step``); the input a name
the step binds anew (a loop target, a parameter of the step's function, a name assigned there:
the batch and what is computed from it), not a tensor kept from before the loop; the read on the call itself or on the one name it is assigned to, in the same body.
A Jacobian already under ``vmap`` is per sample: never one of these.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted, keyword_of, literal_of, names_in
from gpu_notebook.cell.tree import CellTree, Function, Loop
from gpu_notebook.cell.words import last

Read = Literal["diagonal", "einsum", "index"]

# The transforms that return a function computing the Jacobian: ``jacrev(f)(x)``.
_TRANSFORMS = frozenset({"jacrev", "jacfwd"})


@dataclass(frozen=True)
class BatchJacobian:
    """One Jacobian of the batch read on its batch diagonal, as the cell writes it."""

    node: ast.Call  # the call that computes it: ``jacrev(f)(x)`` / ``jacobian(f, x)``
    read: ast.expr  # the diagonal read: ``J.diagonal(...)``, ``einsum(..., J)``, ``J[i, :, i]``
    transform: str  # "jacrev", "jacfwd" or "jacobian"
    function: str  # f, as written
    inputs: str  # x, as written
    how: Read


def _jacobian_call(node: ast.Call) -> tuple[str, ast.expr, ast.expr] | None:
    """(transform, f, x) of ``jacrev(f)(x)`` (``argnums`` a literal int picks x) or
    ``torch.autograd.functional.jacobian(f, x)``; None for any other call."""
    inner = node.func
    if isinstance(inner, ast.Call) and last(dotted(inner.func)) in _TRANSFORMS and inner.args:
        given = keyword_of(inner, "argnums")
        argnums = literal_of(given.value) if given is not None else 0
        if not isinstance(argnums, int) or isinstance(argnums, bool):
            return None
        if not 0 <= argnums < len(node.args) or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        return last(dotted(inner.func)), inner.args[0], node.args[argnums]
    name = dotted(node.func) or ""
    if (
        last(name) == "jacobian"
        and len(node.args) >= 2
        and ("functional" in name or "." not in name)
    ):
        return "jacobian", node.args[0], node.args[1]
    return None


def _batch_diagonal_dims(first: object, second: object) -> bool:
    """Dims that pair the output's batch dim (0) with a later one: the batch diagonal."""
    dims = [d for d in (first, second) if isinstance(d, int) and not isinstance(d, bool)]
    return len(dims) == 2 and 0 in dims and max(dims) >= 1


def _diagonal(read: ast.Call, method: bool) -> bool:
    """``of.diagonal(offset=0, dim1=0, dim2=1)`` (torch's defaults) or ``torch.diagonal(of,
    ...)`` on a batch diagonal, offset 0."""
    positional = list(read.args if method else read.args[1:])
    values: list[object] = [0, 0, 1]  # offset, dim1, dim2
    for i, arg in enumerate(positional[:3]):
        values[i] = literal_of(arg)
    for i, name in enumerate(("offset", "dim1", "dim2")):
        given = keyword_of(read, name)
        if given is not None:
            values[i] = literal_of(given.value)
    return values[0] == 0 and _batch_diagonal_dims(values[1], values[2])


def _einsum(spec: object) -> bool:
    """An einsum of one operand whose first index letter (the output's batch dim) comes again
    in the same operand: ``"bibj->bij"``, ``"iid->id"``, ``"bobi->boi"``."""
    if not isinstance(spec, str):
        return False
    term = spec.replace(" ", "").split("->")[0]
    if "," in term or not term or not term.isalpha():
        return False
    return term.count(term[0]) == 2


def _whole(index: ast.expr) -> bool:
    return (
        isinstance(index, ast.Slice)
        and index.lower is None
        and index.upper is None
        and index.step is None
    ) or (isinstance(index, ast.Constant) and index.value is Ellipsis)


def _indexed(read: ast.Subscript) -> bool:
    """``J[i, i]``, ``J[i, :, i]``, ``J[i, ..., i]``: the same index array (``arange(B)``, a name)
    on the output's batch dim and a later one, whole slices between."""
    if not isinstance(read.slice, ast.Tuple) or len(read.slice.elts) < 2:
        return False
    first, *rest = read.slice.elts
    if isinstance(first, (ast.Slice, ast.Constant)):
        return False
    text = ast.unparse(first)
    for k, index in enumerate(rest):
        if ast.unparse(index) == text:
            return all(_whole(i) for i in rest[:k])
        if not _whole(index):
            return False
    return False


def diagonal_read(of: ast.expr, parents: CellTree) -> tuple[ast.expr, Read] | None:
    """The read of ``of`` (a Jacobian, or a name holding one) on its batch diagonal, or None."""
    parent = parents.parent.get(of)
    if isinstance(parent, ast.Attribute) and parent.value is of and parent.attr == "diagonal":
        call = parents.parent.get(parent)
        if isinstance(call, ast.Call) and call.func is parent and _diagonal(call, True):
            return call, "diagonal"
    if isinstance(parent, ast.Subscript) and parent.value is of and _indexed(parent):
        return parent, "index"
    if isinstance(parent, ast.Call) and parent.args and of is not parent.func:
        name = last(dotted(parent.func))
        if name == "diagonal" and parent.args[0] is of and _diagonal(parent, False):
            return parent, "diagonal"
        if (
            name == "einsum"
            and len(parent.args) == 2
            and parent.args[1] is of
            and _einsum(literal_of(parent.args[0]))
        ):
            return parent, "einsum"
    return None


def _scope(tree: CellTree, node: ast.AST) -> tuple[ast.AST, set[str]] | None:
    """Where the Jacobian runs every step and the names that hold the step's batch there: the
    step loop (its targets), or the function the step runs (its parameters); None elsewhere."""
    loop = tree.step_loop_of(node)
    holder = tree.nearest(node, Function)
    framework = {id(fn) for fn in per_step_methods(tree)}
    if loop is not None and (holder is None or tree.inside(holder, loop)):
        if tree.gated(node, loop):
            return None
        return loop, set()
    if holder is None:
        return None
    if loop is None and tree.run_by_step(node) is None and id(holder) not in framework:
        return None
    if tree.gated(node, holder):
        return None
    params = [a.arg for a in (*holder.args.posonlyargs, *holder.args.args, *holder.args.kwonlyargs)]
    return holder, {p for p in params if p not in ("self", "cls", "batch_idx")}


def _bound(scope: ast.AST, seeds: set[str]) -> set[str]:
    """The names the step binds anew: ``seeds`` and every name assigned in ``scope`` (the
    batch, what the step computes from it, a fresh ``torch.randn``); a tensor bound before the
    loop (a latent, a parameter) is none of them."""
    held = set(seeds)
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                held |= names_in(t)
    return held


def _reads_of(tree: CellTree, call: ast.Call, scope: ast.AST) -> list[tuple[ast.expr, Read]]:
    """The batch-diagonal reads of the Jacobian ``call`` computes: on the call itself, or on the
    one name it is assigned to, read in ``scope``."""
    found = diagonal_read(call, tree)
    if found is not None:
        return [found]
    statement = tree.parent.get(call)
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return []
    name = statement.targets[0].id
    out = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            hit = diagonal_read(node, tree)
            if hit is not None:
                out.append(hit)
    return out


def batch_jacobians(tree: CellTree) -> list[BatchJacobian]:
    """The step's Jacobians of its batch read on their batch diagonal, in the cell's order."""
    out = []
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.Call):
            continue
        parts = _jacobian_call(node)
        if parts is None:
            continue
        transform, function, inputs = parts
        scope = _scope(tree, node)
        if scope is None:
            continue
        where, seeds = scope
        if not names_in(inputs) & _bound(where, seeds):
            continue
        reads = _reads_of(tree, node, where)
        if reads:
            read, how = reads[0]
            out.append(BatchJacobian(node, read, transform, ast.unparse(function),
                                     ast.unparse(inputs), how))  # fmt: skip
    out.sort(key=lambda j: (tree.line_of(j.node), j.node.col_offset))
    return out


def step_backwards(tree: CellTree, jacobian: BatchJacobian) -> list[ast.Call]:
    """The ``.backward()`` calls of the step loop the Jacobian runs in (its gradient flows
    through them): none where the framework runs the backward."""
    loop: Loop | None = tree.step_loop_of(jacobian.node)
    if loop is None:
        by_step = tree.run_by_step(jacobian.node)
        loop = by_step[0] if by_step is not None else None
    if loop is None:
        return []
    return [
        c
        for c in ast.walk(loop)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and c.func.attr == "backward"
        and not tree.gated(c, loop)
    ]
