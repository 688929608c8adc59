"""A loss taken one slice of a tensor dimension at a time in Python, summed: one call over all.

``sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T))``, ``for t in range(T): loss +=
crit(out[:, t], tgt[:, t])``, ``for o, y_t in zip(out.unbind(1), y.unbind(1)): ...``: each
slice is a view whose backward (``SelectBackward0`` / ``UnbindBackward0``) allocates a zero
gradient of the whole tensor and adds the slice into it, T whole-size fills a step, beside T
small losses forward and back. One call over ``out.reshape(-1, V)`` and ``y.reshape(-1)`` does
the same sum (or the same mean, with ``reduction`` matching) once. The cost is in the backward,
so the sampler reads it on ``loss.backward()`` and the loss's own line is not hot. Unseen round
23: seq_loss_per_timestep (T 128, backward 81% of the sampled step, no finding; the one call
2.44x by hand).

Flagged where a loss (a call whose name says loss or criterion, ``F.cross_entropy`` and its
kin, or a name bound to an ``nn.*Loss(...)``) takes as its prediction and its target each a
slice by the loop's variable (``x[:, t]``, ``x[t]``, or an element of ``x.unbind(d)``), in a
comprehension or a ``for`` over ``range(...)`` / ``unbind`` / ``zip`` of unbinds that sums,
accumulates or collects it, in code the step runs every step (element_loop_u23's reach). Not
flagged: a recurrent cell stepped over t (a name carried from one iteration to the next: the
loop is needed), losses over a Python list of heads (not sliced by the variable, or one
target for all), a loop of micro-batches (a ``.backward()`` inside it).

The range: 1x up to the Amdahl bound of the backward phase's share plus the loss line's sampled
share (what one call removes lies there: the fills, the adds, T small losses' backward and
forward). The severity: where the trace has the fills (``aten::fill_`` at least ``MIN_SLICES``
calls a traced step; on a GPU the ``FillFunctor`` kernels), read off the fills' and the adds' (``aten::add_``) time over the traced
steps (a superset of the slices': other fills and adds count too; not a bound, the small losses
are not in it: seq_loss_per_timestep's fills and adds read 53% where one call removed 59%);
without them, off the backward's share, at most medium (the model's own backward is in it). No patch:
the reduction that keeps the same loss depends on the loss and its weights.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted, is_backward
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.cell.words import LOSS_WORDS, last
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of, share
from gpu_notebook.rules.element_loop_u23 import _per_step, _per_step_functions, _python_names
from gpu_notebook.rules.syncs import lines_share

_LOSS_FUNCTIONS = frozenset({
    "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "focal_loss",
})  # fmt: skip
_FUNCTIONAL = frozenset({"F", "torch", "nn"})
# A slice's backward fills a zero gradient of the whole tensor: the trace's fills a step.
FILL_OP, ADD_OP, FILL_KERNEL = "aten::fill_", "aten::add_", "FillFunctor"
MIN_SLICES = 8  # fewer fills a step than this: not the slices' (a loss over a few slices)


@dataclass(frozen=True)
class SlicedLossLoop(Said):
    """The step sums a loss over slices of ``tensor`` taken by ``var`` on ``line``."""

    line: int
    text: str
    loss: str  # the loss called per slice, as written
    tensor: str  # the sliced prediction
    var: str
    fills: float | None  # the trace's fills a traced step (None: not among its top operators)
    op_share: float | None  # the fills' and adds' share of the traced steps (None: not read)
    backward: float | None  # the backward phase's share of the step
    bound: float | None


def _loss_objects(tree: CellTree) -> set[str]:
    """Names (``crit``, ``self.crit``) bound anywhere to an ``nn.*Loss(...)``."""
    out: set[str] = set()
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        if last(dotted(node.value.func) or "").endswith("Loss"):
            out.update(n for t in node.targets if (n := dotted(t)) is not None)
    return out


def _is_loss(call: ast.Call, objects: set[str]) -> bool:
    name = dotted(call.func) or ""
    short = last(name)
    if name in objects or short in _LOSS_FUNCTIONS:
        return True
    return not short.endswith("Loss") and any(w in short.lower() for w in LOSS_WORDS)


def _sliced(arg: ast.expr, index: str | None, elements: set[str], python: set[str]) -> str | None:
    """The tensor ``arg`` slices by the loop (``x[:, t]``, ``x[t]``; an unbind's element): its
    name, or None. Through calls on it: ``o.log_softmax(-1)``, ``F.log_softmax(x[:, t], -1)``."""
    while isinstance(arg, ast.Call):
        name = dotted(arg.func) or ""
        if isinstance(arg.func, ast.Attribute) and name.split(".")[0] not in _FUNCTIONAL:
            arg = arg.func.value
        elif name.split(".")[0] in _FUNCTIONAL and arg.args:
            arg = arg.args[0]
        else:
            return None
    if isinstance(arg, ast.Name) and arg.id in elements:
        return arg.id
    if not isinstance(arg, ast.Subscript) or index is None:
        return None
    name = dotted(arg.value) or ast.unparse(arg.value)
    parts = arg.slice.elts if isinstance(arg.slice, ast.Tuple) else [arg.slice]
    by_var = any(isinstance(p, ast.Name) and p.id == index for p in parts)
    if name in python or not by_var:
        return None
    return name


def _unbound(expr: ast.expr) -> ast.expr | None:
    """``x.unbind(d)`` / ``torch.unbind(x, d)``: ``x``."""
    if isinstance(expr, ast.Call) and last(dotted(expr.func) or "") == "unbind":
        if isinstance(expr.func, ast.Attribute) and dotted(expr.func) != "torch.unbind":
            return expr.func.value
        return expr.args[0] if expr.args else None
    return None


def _loop_vars(target: ast.expr, it: ast.expr) -> tuple[str | None, set[str]] | None:
    """What a loop over ``it`` binds: (the index variable of a ``range``, the names bound to
    slices of an ``unbind``); None: not a loop over a tensor dimension."""
    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args:
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            inner = _loop_vars(target.elts[1], it.args[0])
            if inner is not None and isinstance(target.elts[0], ast.Name):
                return target.elts[0].id, inner[1]
        return None
    if isinstance(it, ast.Call) and dotted(it.func) == "range":
        return (target.id, set()) if isinstance(target, ast.Name) else None
    if _unbound(it) is not None:
        return (None, {target.id}) if isinstance(target, ast.Name) else None
    if isinstance(it, ast.Call) and dotted(it.func) == "zip" and isinstance(target, ast.Tuple):
        pairs = list(zip(target.elts, it.args, strict=False))
        names = {t.id for t, a in pairs if isinstance(t, ast.Name) and _unbound(a) is not None}
        return (None, names) if names else None
    return None


def _sliced_losses(
    node: ast.AST, index: str | None, elements: set[str], python: set[str], objects: set[str]
) -> list[tuple[ast.Call, str]]:
    """The loss calls under ``node`` whose prediction and target are both slices by the loop."""
    out: list[tuple[ast.Call, str]] = []
    for call in ast.walk(node):
        if not isinstance(call, ast.Call) or len(call.args) < 2 or not _is_loss(call, objects):
            continue
        pred = _sliced(call.args[0], index, elements, python)
        if pred is not None and _sliced(call.args[1], index, elements, python) is not None:
            out.append((call, pred))
    return out


def _slice_names(
    loop: ast.For, index: str | None, elements: set[str], python: set[str]
) -> set[str]:
    """Names the body binds to a slice by the loop (``pred = out[:, t]``, ``o = x[t].float()``)."""
    out: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and _sliced(node.value, index, elements, python):
                out.add(target.id)
    return out


def _holds(node: ast.AST, losses: list[ast.Call], named: set[str]) -> bool:
    """``node`` holds a loss call, or reads a name bound to one (``l_t = crit(...)``)."""
    return any(
        any(n is loss for loss in losses) or (isinstance(n, ast.Name) and n.id in named)
        for n in ast.walk(node)
    )


def _loss_values(loop: ast.For, losses: list[ast.Call]) -> set[str]:
    """Names the body binds to a loss call's value (``l_t = crit(o, y_t)``)."""
    return {
        t.id
        for node in ast.walk(loop)
        if isinstance(node, ast.Assign) and _holds(node.value, losses, set())
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def _carried(loop: ast.For, losses: list[ast.Call]) -> bool:
    """A name the body assigns from its own value other than by a loss (``h = cell(x[t], h)``):
    a recurrence the loop is needed for."""
    named = _loss_values(loop, losses)
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and not _holds(node.value, losses, named):
            read = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            written = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if read & written:
                return True
    return False


def _accumulates(loop: ast.For, losses: list[ast.Call]) -> bool:
    """The body sums or collects a loss: ``loss += ...``, ``loss = loss + ...``,
    ``losses.append(...)``, directly or through a name bound to it."""
    named = _loss_values(loop, losses)
    for node in ast.walk(loop):
        if not _holds(node, losses, named):
            continue
        if isinstance(node, ast.AugAssign):
            return True
        if isinstance(node, ast.Assign):
            read = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id in read for t in node.targets):
                return True
        if isinstance(node, ast.Call) and last(dotted(node.func) or "") == "append":
            return True
    return False


def sliced_loss_loops(tree: CellTree) -> list[tuple[ast.AST, ast.Call, str, str]]:
    """The step's losses summed over slices of a tensor dimension: (the loop or comprehension,
    the loss call, the sliced prediction, the loop's variable), in order."""
    framework = {id(fn) for fn in per_step_methods(tree)}
    functions = _per_step_functions(tree, framework)
    objects = _loss_objects(tree)
    out: list[tuple[ast.AST, ast.Call, str, str]] = []
    for node in ast.walk(tree.tree):
        body: ast.AST
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            gen = node.generators[0]
            target, it, body = gen.target, gen.iter, node.elt
        elif isinstance(node, ast.For):
            target, it, body = node.target, node.iter, node
        else:
            continue
        bound = _loop_vars(target, it)
        if bound is None or id(node) in tree.step_loops:
            continue
        index, elements = bound
        scope = tree.nearest(node, Function) or tree.tree
        python = _python_names(scope)
        if isinstance(node, ast.For):
            elements = elements | _slice_names(node, index, elements, python)
        hits = _sliced_losses(body, index, elements, python, objects)
        if not hits or not _per_step(tree, node, functions):
            continue
        if isinstance(node, ast.For):
            calls = [c for c, _ in hits]
            backward = any(isinstance(c, ast.Call) and is_backward(c) for c in ast.walk(node))
            if backward or _carried(node, calls) or not _accumulates(node, calls):
                continue
        var = index or sorted(elements)[0]
        out.append((node, hits[0][0], hits[0][1], var))
    out.sort(key=lambda hit: (tree.line_of(hit[0]), getattr(hit[0], "col_offset", 0)))
    return out


def _fills(analysis: Analysis) -> tuple[float | None, float | None]:
    """(the trace's fills a traced step, the fills' and adds' share of the traced steps);
    (None, None) where the fills are not among the top operators or too few a step. On a CPU
    the host's ``aten::fill_`` and ``aten::add_``; on a GPU the fill kernels (``FillFunctor``,
    every type and width summed; the host's ``aten::fill_`` there is a launch, seldom among the
    top operators by self time)."""
    phases = analysis.window_phases or analysis.phases
    total = (phases.wall_total_us or phases.total_us) if phases is not None else 0.0
    steps = len(phases.steps) if phases is not None else 0
    if not steps or not total or total <= 0:
        return None, None
    ops = {o.name: o for o in analysis.top_ops if o.device == "cpu"}
    kernels = [o for o in analysis.top_ops if o.device == "gpu" and FILL_KERNEL in o.name]
    fill, add = ops.get(FILL_OP), ops.get(ADD_OP)
    if fill is not None and fill.calls / steps >= MIN_SLICES:
        spent = fill.total_us + (add.total_us if add is not None else 0.0)
        return fill.calls / steps, min(1.0, spent / total)
    calls = sum(k.calls for k in kernels)
    if calls / steps >= MIN_SLICES:
        return calls / steps, min(1.0, sum(k.total_us for k in kernels) / total)
    return None, None


def sliced_loss_loop(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step sums a loss over slices of a tensor dimension, one call per slice."""
    tree = facts.tree
    hits = sliced_loss_loops(tree) if tree is not None else []
    if tree is None or not hits:
        return None
    node, call, tensor, var = hits[0]
    line = tree.line_of(node)
    backward = share(analysis, "backward")
    loss_share = lines_share(analysis, (SourceLine(line, "", "sliced_loss"),)) or 0.0
    fills, op_share = _fills(analysis)
    # What one call removes lies in the backward (the fills, the adds, T small losses' backward)
    # and on the loss's line (T small losses forward): their shares bound it.
    high = min(1.0, backward + loss_share) if backward is not None else None
    if op_share is not None:
        severity = severity_of(op_share, low=0.0) or "low"
    else:  # the backward alone, the model's own in it: at most medium
        level = severity_of(high, low=0.0) or "low"
        severity = "low" if level == "low" else "medium"
    low, bound = gain_range(None, high, analysis)
    loss = dotted(call.func) or last(ast.unparse(call.func))
    said = SlicedLossLoop(line, tree.text_of(node), loss, tensor, var, fills, op_share,
                          backward, bound)  # fmt: skip
    return found("backward.sliced_loss", severity, said, phase_share=high, bound=bound,
                 low=low, line=line)  # fmt: skip


RULES = (sliced_loss_loop,)
