"""A tensor grown by concatenating itself with the step's rows, every step.

An epoch's predictions kept for an epoch-end metric, a buffer of embeddings for a retrieval
score, a Lightning module's outputs kept between ``training_step`` calls:
``all_logits = torch.cat([all_logits, logits.detach()])``, ``self.preds =
torch.cat((self.preds, preds))``, ``feats = np.concatenate([feats, f])``, or the ``if x is
None: x = new`` / ``else: x = torch.cat([x, new])`` form. Each step copies everything kept so
far into a fresh buffer, so n steps copy about n^2/2 steps' rows (and allocate as much): the
step grows slower as the loop runs. Keeping the rows in a list and concatenating once where the
whole is read copies them once. Unseen round 23 (cat_grow_epoch_preds: 400 steps an epoch of
[256, 100] logits and their labels): the two lines' copies were most of the loop by hand.

Flagged where the assignment's value is the concatenation itself (not a slice of it: ``x =
torch.cat([x, k])[-K:]`` keeps K rows, a queue), the target is one of the concatenated names,
and it runs every step: in a step loop (not under an ``if`` other than one on the grown name
itself, ``if x is None``), the name bound outside that loop and re-bound in it by no other
statement that trims it (``x = x[-K:]``) or makes it anew every step; or in a function the step
loop runs every step or a framework's per-step method (a LightningModule's ``training_step``,
``on_train_batch_end``), the name an attribute (``self.preds``) or a global there.
The gain: a floor and no top. The copy grows with the steps run and the profiled steps read it
at their place in the loop (unseen round 23: a window at an epoch's start read 1.00x-1.05x where
by hand the loop ran 3.2x faster), so the lines' sampled share (Wilson's low end) gives only a
floor: half of it (a window at the loop's end reads at most twice its mean copy), less what the
one concatenation at the end still copies (``KEPT``: 2/n of the n^2/2, under 5% from 40 steps
on). Severity medium at least (high where the lines read high). No patch: where the whole is read
(after the loop, or every step) decides where the one concatenation goes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree, Function, Loop
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import found, gain_bound, severity_of
from gpu_notebook.rules.restacked_bank import _op_share
from gpu_notebook.rules.syncs import lines_share

# Concatenations whose first argument is the sequence of pieces.
_JOINS = frozenset({
    "torch.cat", "torch.concat", "torch.concatenate", "torch.vstack", "torch.row_stack",
    "torch.hstack", "torch.column_stack", "torch.dstack",
    "np.concatenate", "np.vstack", "np.hstack", "np.row_stack", "np.column_stack",
    "numpy.concatenate", "numpy.vstack", "numpy.hstack",
})  # fmt: skip
# ``np.append(x, new, axis=0)``: the grown array is the first argument itself.
_APPENDS = frozenset({"np.append", "numpy.append"})
# The share of the loop's copies the one concatenation at the end still makes: (least, most).
KEPT = (0.0, 0.05)


@dataclass(frozen=True)
class GrownCat:
    """One statement that re-binds ``name`` to itself concatenated with new rows."""

    node: ast.Call  # the concatenation
    name: str  # the grown name as written (``all_logits``, ``self.preds``)
    loop: Loop | None  # the step loop it is in (None: a per-step function or method)


@dataclass(frozen=True)
class GrownByCat(Said):
    """The step re-binds ``names`` to themselves concatenated with the step's rows on
    ``lines`` (the first: ``line``, ``text``) every step."""

    line: int
    text: str
    names: tuple[str, ...]
    lines: tuple[int, ...]
    share: float | None  # the lines' sampled share (None: not sampled enough)
    op: float | None  # the traced window's share in the concatenating operator (all calls)
    low: float | None
    bound: float | None


def _pieces(call: ast.Call) -> list[str]:
    """The names concatenated: the elements of ``torch.cat([a, b])`` (each a plain name or an
    attribute), or ``np.append``'s first argument."""
    name = dotted(call.func) or ""
    if not call.args:
        return []
    if name in _APPENDS:
        seq: list[ast.expr] = [call.args[0]]
    elif name in _JOINS and isinstance(call.args[0], (ast.List, ast.Tuple)):
        seq = list(call.args[0].elts)
    else:
        return []
    out = []
    for elt in seq:
        text = dotted(elt) if isinstance(elt, (ast.Name, ast.Attribute)) else None
        if text is not None:
            out.append(text)
    return out


def _binds(node: ast.AST, name: str) -> bool:
    """``node`` assigns ``name`` (a plain name or a dotted attribute) as a whole."""
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    else:
        return False
    flat: list[ast.expr] = []
    for t in targets:
        flat.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
    return any(dotted(t) == name for t in flat if isinstance(t, (ast.Name, ast.Attribute)))


def _mentions(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == name for n in ast.walk(node)
    )


def _gated(tree: CellTree, node: ast.AST, top: ast.AST, name: str) -> bool:
    """An ``if`` (or a ternary) between ``node`` and ``top`` whose test is not about ``name``
    (``if x is None: ... else: x = torch.cat([x, new])`` runs every step)."""
    child = node
    for ancestor in tree.ancestors(node):
        if ancestor is top:
            return False
        if (
            isinstance(ancestor, (ast.If, ast.IfExp))
            and child is not ancestor.test
            and not _mentions(ancestor.test, name)
        ):
            return True
        child = ancestor
    return False


def _steady(tree: CellTree, stmt: ast.AST, name: str, scope: ast.AST) -> bool:
    """No other statement of ``scope`` keeps ``name`` from growing: none trims it (a value that
    indexes it, ``x = x[-K:]``, or narrows it) or makes it anew on every pass (a binding under
    no ``if`` that does not read it)."""
    for node in ast.walk(scope):
        if node is stmt or not _binds(node, name):
            continue
        value = getattr(node, "value", None)
        if value is None:
            continue
        if _narrows(value, name) or any(
            isinstance(n, ast.Subscript) and _mentions(n.value, name) for n in ast.walk(value)
        ):
            return False
        if not _mentions(value, name) and not _under_if(tree, node, scope):
            return False
    return True


def _under_if(tree: CellTree, node: ast.AST, top: ast.AST) -> bool:
    """An ``if`` (or a ternary) holds ``node`` below ``top``: it runs on some passes."""
    child = node
    for ancestor in tree.ancestors(node):
        if ancestor is top:
            return False
        if isinstance(ancestor, (ast.If, ast.IfExp)) and child is not ancestor.test:
            return True
        child = ancestor
    return False


def _narrows(value: ast.expr, name: str) -> bool:
    """``x.narrow(...)``: a trim spelt as a method."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "narrow"
        and dotted(value.func.value) == name
    )


def _bound_outside(tree: CellTree, name: str, loop: Loop) -> bool:
    """``name`` is bound somewhere outside ``loop`` (before it runs: an epoch loop's reset
    counts), so the loop's binding reads what earlier steps kept."""
    return any(
        _binds(node, name) and loop not in tree.ancestors(node)
        for node in ast.walk(tree.tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
    )


def _globals_of(fn: Function) -> set[str]:
    return {n for node in ast.walk(fn) if isinstance(node, ast.Global) for n in node.names}


def grown_cats(tree: CellTree) -> list[GrownCat]:
    """The step's self-concatenations, in the cell's order."""
    framework = {id(fn) for fn in per_step_methods(tree)}
    out: list[GrownCat] = []
    for stmt in ast.walk(tree.tree):
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or not tree.in_cell(stmt):
            continue
        call = stmt.value
        if not isinstance(call, ast.Call):
            continue
        grown = [p for p in _pieces(call) if _binds(stmt, p)]
        if not grown:
            continue
        name = grown[0]
        loop = tree.step_loop_of(stmt)
        if loop is not None and tree.inside(stmt, loop):
            if _gated(tree, stmt, loop, name) or not _bound_outside(tree, name, loop):
                continue
            if _steady(tree, stmt, name, loop):
                out.append(GrownCat(call, name, loop))
            continue
        holder = tree.nearest(stmt, Function)
        if not isinstance(holder, Function):
            continue
        per_step = (
            id(holder) in framework or tree.run_by_step(stmt) is not None or (loop is not None)
        )
        kept = "." in name or name in _globals_of(holder)
        if (
            per_step
            and kept
            and not _gated(tree, stmt, holder, name)
            and _steady(tree, stmt, name, holder)
        ):
            out.append(GrownCat(call, name, None))
    out.sort(key=lambda h: (tree.line_of(h.node), h.node.col_offset))
    return out


def grown_by_cat(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step concatenates a kept tensor with its new rows: a copy of all of it, each step."""
    tree = facts.tree
    hits = grown_cats(tree) if tree is not None else []
    if tree is None or not hits:
        return None
    first = hits[0]
    line = tree.line_of(first.node)
    lines = tuple(SourceLine(tree.line_of(h.node), "", "grown_cat") for h in hits)
    share = lines_share(analysis, lines)
    samples = analysis.stacks.samples if analysis.stacks is not None else 0
    op = _op_share(analysis, dotted(first.node.func) or "torch.cat")
    # The copy grows with the steps run, and the profiled steps read it at their place in the
    # loop (a window at an epoch's start reads a few steps' rows: unseen round 23 read
    # 1.00x-1.05x where by hand the loop ran 3.2x faster): the share is no top. Its floor: half
    # what the lines read (a window at the loop's end reads at most twice its mean copy).
    low_share = sampled_share_low(share, samples) / 2 if share is not None and samples else None
    low = gain_bound(low_share * (1 - KEPT[1]) if low_share is not None else None, analysis)
    bound = None
    names = tuple(dict.fromkeys(h.name for h in hits))
    said = GrownByCat(
        line, tree.text_of(first.node), names, tuple(sorted({s.line for s in lines})), share,
        op, low, bound,
    )  # fmt: skip
    # Quadratic in the steps: at least medium whatever the window read.
    severity: Severity = "high" if severity_of(share) == "high" else "medium"
    return found("host.grown_by_cat", severity, said, phase_share=share, bound=bound, low=low,
                 line=line)  # fmt: skip


RULES = (grown_by_cat,)
