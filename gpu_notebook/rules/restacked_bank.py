"""A memory bank kept as a Python container of tensors and stacked whole every step.

A contrastive loop's negative queue (MoCo), a replay of past features, a bank of prototypes:
``queue = collections.deque(maxlen=K)`` (or a list trimmed to K) that the step loop grows with
``queue.extend(k.unbind(0))`` and turns back into a matrix with ``torch.stack(list(queue))``.
Each step copies all K rows through K Python tensor handles (``list()``, the stack's argument
parsing, one copy call per row); the rows that changed are the batch's few. Unseen round 21
(moco_list_queue, K 8192 rows of 128): the stack line held 27% of the sampled step, named by no
finding; by hand a preallocated ``(K, D)`` tensor written at a moving pointer
(``bank[ptr:ptr + B] = k``) was 1.49x of the loop (medians of 3, load 10-17).

Flagged where a step loop calls ``torch.stack``/``torch.cat``/``torch.vstack`` on the whole of
a name (``q``, ``list(q)``, ``tuple(q)``, ``[*q]``) that the cell binds before the loop to a
deque or a list, and that the same step loop grows (``append``/``extend``/``appendleft``/
``extendleft``/``insert``, ``+=``, or re-binds from itself: ``q = q[-K:]``). A list made inside
the step (``outs = []`` ... ``torch.stack(outs)``) is the step's own work, and a sample of the
bank (``torch.stack(random.sample(buf, B))``) copies B rows, not the bank: neither is flagged.
The range: the stack line's and the growing lines' sampled share, its Wilson interval (95%);
its high end at least the traced window's time in the stacker's operator (every call of it:
a superset), which a busy machine's few line samples cannot read (19 samples, 11%, against
the trace's 18% of the window in ``aten::stack`` for one call a step).
No patch: the ring buffer's pointer and its first fill depend on the loop's code.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted, names_in, targets_of
from gpu_notebook.cell.tree import CellTree, Loop
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.syncs import lines_share

STACKERS = frozenset({"torch.stack", "torch.cat", "torch.concat", "torch.concatenate",
                      "torch.vstack", "torch.row_stack"})  # fmt: skip
_CONTAINERS = frozenset({"deque", "collections.deque", "list"})
_GROWERS = frozenset({"append", "extend", "appendleft", "extendleft", "insert"})


@dataclass(frozen=True)
class RestackedBank(Said):
    """A step loop stacks the whole of ``bank`` (a deque or list of tensors the loop grows) on
    ``line`` every step; ``grown``: the lines that grow it; ``kind``: "deque" or "list";
    ``share``: the sampled share of the stack and growing lines (None: not sampled enough)."""

    line: int
    text: str
    bank: str
    kind: str
    grown: tuple[int, ...]
    share: float | None
    # The traced window's time in the stacker's operator (every call of it, the bank's among
    # them): the range's high end where over the lines' (None: not among the top operators).
    op: float | None
    low: float | None
    bound: float | None


def _whole(arg: ast.expr) -> str | None:
    """``q`` of ``q``, ``list(q)``, ``tuple(q)``, ``[*q]``: the whole of a name."""
    if isinstance(arg, ast.Name):
        return arg.id
    if (
        isinstance(arg, ast.Call)
        and dotted(arg.func) in ("list", "tuple")
        and len(arg.args) == 1
        and isinstance(arg.args[0], ast.Name)
    ):
        return arg.args[0].id
    if (
        isinstance(arg, (ast.List, ast.Tuple))
        and len(arg.elts) == 1
        and isinstance(arg.elts[0], ast.Starred)
        and isinstance(arg.elts[0].value, ast.Name)
    ):
        return arg.elts[0].value.id
    return None


def _container_kind(value: ast.expr | None) -> str | None:
    """ "deque" or "list" where ``value`` makes one, else None."""
    if isinstance(value, ast.Call):
        name = dotted(value.func)
        if name in _CONTAINERS:
            return "list" if name == "list" else "deque"
    if isinstance(value, (ast.List, ast.ListComp)):
        return "list"
    return None


def _bound_before(tree: CellTree, name: str, loop: Loop) -> str | None:
    """The container kind ``name`` is bound to outside ``loop`` (before it runs), else None."""
    kinds = [
        _container_kind(node.value)
        for node in ast.walk(tree.tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and name in {n for t in targets_of(node) for n in names_in(t)}
        and loop not in tree.ancestors(node)
    ]
    known = [k for k in kinds if k is not None]
    return known[0] if known and len(known) == len(kinds) else None


def _grows_by_call(node: ast.AST, name: str) -> bool:
    """``name.append(...)`` and the other growing methods."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _GROWERS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
    )


def _grows_by_binding(node: ast.AST, name: str) -> bool:
    """``name += ...``, or ``name = <an expression of name>`` (``name = name[-K:] + new``)."""
    if not isinstance(node, (ast.Assign, ast.AugAssign)):
        return False
    if name not in {n for t in targets_of(node) for n in names_in(t)}:
        return False
    return isinstance(node, ast.AugAssign) or name in names_in(node.value)


def _grows(tree: CellTree, name: str, loop: Loop) -> tuple[int, ...]:
    """The lines of ``loop`` that grow ``name``: its growing methods, ``name += ...``, or a
    re-binding from itself (``name = name[-K:]``, ``name = name + [k]``)."""
    lines: set[int] = set()
    for node in ast.walk(loop):
        if _grows_by_call(node, name) or _grows_by_binding(node, name):
            lines.add(tree.line_of(node))
    return tuple(sorted(lines))


def restacked_banks(tree: CellTree) -> list[tuple[ast.Call, str, str, tuple[int, ...]]]:
    """The step loops' stacks of a whole bank: (call, bank, kind, growing lines), in order."""
    out = []
    for call in tree.calls():
        if dotted(call.func) not in STACKERS or not call.args:
            continue
        name = _whole(call.args[0])
        loop = tree.step_loop_of(call) if name is not None else None
        if name is None or loop is None or tree.gated(call, loop):
            continue
        kind = _bound_before(tree, name, loop)
        grown = _grows(tree, name, loop) if kind is not None else ()
        if kind is not None and grown:
            out.append((call, name, kind, grown))
    out.sort(key=lambda hit: (tree.line_of(hit[0]), hit[0].col_offset))
    return out


def _share_high(share: float, samples: int, z: float = 1.96) -> float:
    """The high end of Wilson's interval (95%) of a share read off ``samples`` samples."""
    n, p = float(samples), min(max(share, 0.0), 1.0)
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def _op_share(analysis: Analysis, stacker: str) -> float | None:
    """The traced window's time in the stacker's operator (``aten::stack`` of ``torch.stack``,
    its children in), over the steps' time as the operators' clock read it (the wait for a
    core left in): every call of that operator in the window, the bank's among them, so a
    figure the bank's copy is at most; None: the operator is not among the top operators."""
    phases = analysis.window_phases or analysis.phases
    total = (phases.wall_total_us or phases.total_us) if phases is not None else 0.0
    name = "aten::" + stacker.rsplit(".", 1)[-1]
    ops = [o for o in analysis.top_ops if o.name == name and o.device == "cpu"]
    if not ops or not total or total <= 0:
        return None
    return min(1.0, sum(o.total_us for o in ops) / total)


def restacked_bank(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop stacks a whole bank of tensors kept in a Python container, every step."""
    if facts.tree is None:
        return None
    hits = restacked_banks(facts.tree)
    if not hits:
        return None
    node, bank, kind, grown = hits[0]
    tree = facts.tree
    line = tree.line_of(node)
    grows = [SourceLine(g, "", "grow") for g in grown if g != line]
    lines = (SourceLine(line, tree.text_of(node), "restack", node=node), *grows)
    share = lines_share(analysis, lines)
    samples = analysis.stacks.samples if analysis.stacks is not None else 0
    op = _op_share(analysis, dotted(node.func) or "")
    low_share = sampled_share_low(share, samples) if share is not None and samples else None
    high = _share_high(share, samples) if share is not None and samples else None
    if op is not None:
        high = max(high or 0.0, op)
    low, bound = gain_range(low_share, high, analysis)
    said = RestackedBank(line, tree.text_of(node), bank, kind, grown, share, op, low, bound)
    severity = severity_of(share, low=0.0) or "low"
    if share is None and op is not None:  # a superset alone: at most medium
        severity = "low" if (severity_of(op, low=0.0) or "low") == "low" else "medium"
    return found("host.restacked_bank", severity, said, phase_share=share, bound=bound,
                 low=low, line=line)  # fmt: skip


TIE = 95  # where its findings tie: the verdict table's order (rules._families)
RULES = (restacked_bank,)
