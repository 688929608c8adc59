"""A whole sort of which the step keeps only the first (or last) k: ``topk`` does that.

Hard-negative mining, nearest neighbours, beam pruning, top-k routing, a retrieval metric:
``sim.argsort(dim=1, descending=True)[:, :k]``, ``torch.sort(scores)[1][..., :k]``,
``x.sort(dim=-1).values[..., -k:]``. The sort orders all n entries of each row (n log n) for k
of them; ``topk(k, dim)`` selects them in one pass and returns them in the same order (the same
entries up to ties). Unseen round 22 (generator_argsort_hardneg, 8192 bank rows, k 8): the sort
line held 93% of the sampled step and no finding named it; by hand ``topk`` was 4.0x of the
loop (medians of 3 pairs).

Flagged where a step loop (or a function it runs every step) slices a sort's result on the
sorted dimension (``dim`` as a literal, -1 where absent), every other index a whole ``:``. The
range: the line's sampled share (Wilson's interval, 95%), the traced window's ``aten::sort``
time (every call of it: a superset: it read 100% of a window whose line read 94%) as its high
end only where the line was not sampled enough, each less what ``topk`` still
costs: 2-10% of the sort's time (measured on this project's CPU, one thread: 2.3-6.5% over
rows x n of 128x1k to 32x64k and 1x100k, k 8-100; ``KEPT``). Patch where the slice keeps
the first k (``[..., :k]``): ``X.topk(k, dim=d, largest=...)`` with ``.indices`` or ``.values``;
the last k (``[..., -k:]``, ascending) is named without a patch (``topk`` then ``flip``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.framework_step_methods import per_step_methods
from gpu_notebook.cell.names import dotted, keyword_of, literal_of
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.restacked_bank import _op_share, _share_high
from gpu_notebook.rules.syncs import lines_share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement


# The share of a sort's time a topk of the same rows still takes: (least, most), the most
# read from 6 shapes (2.3-6.5%) with a margin; the range removes the rest of the line's share.
KEPT = (0.02, 0.10)


@dataclass(frozen=True)
class FullSort:
    """One slice of a sort: what the patch writes it as, read from the cell's text."""

    node: ast.Subscript  # the slice ``<sort>[..., :k]``
    receiver: ast.expr  # the sorted tensor
    method: bool  # ``X.argsort(...)`` (True) or ``torch.argsort(X, ...)``
    dim: int
    descending: bool
    k: ast.expr
    first: bool  # the first k (True) or the last k
    field: str  # "indices" or "values"


@dataclass(frozen=True)
class SortedForTopk(Said):
    """A step loop sorts whole rows on ``line`` and keeps ``k`` entries of each."""

    line: int
    text: str
    k: str
    first: bool
    share: float | None  # the line's sampled share (None: not sampled enough)
    op: float | None  # the traced window's share in ``aten::sort`` (all its calls)
    low: float | None
    bound: float | None
    patched: bool  # a patch is offered (the first k)


def _called(node: ast.expr) -> str:
    """The called name's last part: ``argsort`` of ``(a @ b).argsort(...)``."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _sort_call(node: ast.expr) -> tuple[ast.Call, str] | None:
    """The sort call under ``node`` and the field kept: ``X.argsort(...)`` / ``torch.argsort``
    (indices); ``X.sort(...)`` / ``torch.sort`` with ``.values``/``.indices``/``[0]``/``[1]``."""
    if isinstance(node, ast.Call) and _called(node) == "argsort":
        return node, "indices"
    field: str | None = None
    inner: ast.expr | None = None
    if isinstance(node, ast.Attribute) and node.attr in ("values", "indices"):
        field, inner = node.attr, node.value
    elif isinstance(node, ast.Subscript) and literal_of(node.slice) in (0, 1):
        field, inner = ("values", "indices")[literal_of(node.slice) == 1], node.value
    if field is not None and isinstance(inner, ast.Call) and _called(inner) == "sort":
        return inner, field
    return None


def _whole(index: ast.expr) -> bool:
    """``:`` (every entry of a dimension)."""
    return (
        isinstance(index, ast.Slice)
        and index.lower is None
        and index.upper is None
        and index.step is None
    )


def _kept(index: ast.expr) -> tuple[ast.expr, bool] | None:
    """``:k`` / ``0:k`` (k, True) or ``-k:`` (k, False); None for any other index."""
    if not isinstance(index, ast.Slice) or index.step is not None:
        return None
    if index.upper is not None and (index.lower is None or literal_of(index.lower) == 0):
        return index.upper, True
    if (
        index.upper is None
        and isinstance(index.lower, ast.UnaryOp)
        and isinstance(index.lower.op, ast.USub)
    ):
        return index.lower.operand, False
    return None


def _full_sort(node: ast.Subscript) -> FullSort | None:
    sort = _sort_call(node.value)
    if sort is None:
        return None
    call, field = sort
    method = isinstance(call.func, ast.Attribute) and dotted(call.func.value) != "torch"
    if method:
        assert isinstance(call.func, ast.Attribute)
        receiver: ast.expr = call.func.value
        positional = call.args
    elif call.args:
        receiver, positional = call.args[0], call.args[1:]
    else:
        return None
    given_dim = keyword_of(call, "dim")
    dim_node = given_dim.value if given_dim is not None else (positional[0] if positional else None)
    dim = -1 if dim_node is None else literal_of(dim_node)
    given_desc = keyword_of(call, "descending")
    desc_node = (
        given_desc.value
        if given_desc is not None
        else positional[1]
        if len(positional) > 1
        else None
    )
    descending = False if desc_node is None else literal_of(desc_node)
    if not isinstance(dim, int) or isinstance(dim, bool) or not isinstance(descending, bool):
        return None
    index = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if dim != -1 and any(isinstance(i, ast.Constant) and i.value is Ellipsis for i in index):
        return None
    at = len(index) - 1 if dim == -1 else dim
    if at < 0 or at >= len(index) or (dim != -1 and dim != at):
        return None
    if not all(_whole(i) or (isinstance(i, ast.Constant) and i.value is Ellipsis and j == 0)
               for j, i in enumerate(index) if j != at):  # fmt: skip
        return None
    kept = _kept(index[at])
    if kept is None:
        return None
    return FullSort(node, receiver, method, dim, descending, kept[0], kept[1], field)


def full_sorts(tree: CellTree) -> list[FullSort]:
    """The step's slices of a whole sort, in the cell's order: in a step loop (not under its
    ``if step % N``), a function it runs every step, or a framework's per-step method
    (Lightning's ``training_step``, a Trainer subclass's ``compute_loss``)."""
    framework = {id(fn) for fn in per_step_methods(tree)}
    out = []
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.Subscript) or not tree.in_cell(node):
            continue
        hit = _full_sort(node)
        loop = tree.step_loop_of(node) if hit is not None else None
        by_step = tree.run_by_step(node) if hit is not None and loop is None else None
        holder = tree.nearest(node, Function) if hit is not None else None
        in_method = holder is not None and id(holder) in framework
        if hit is None or (loop is None and by_step is None and not in_method):
            continue
        if loop is not None and tree.gated(node, loop):
            continue
        out.append(hit)
    out.sort(key=lambda h: (tree.line_of(h.node), h.node.col_offset))
    return out


def sorted_for_topk(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step sorts whole rows and keeps k entries of each."""
    tree = facts.tree
    hits = full_sorts(tree) if tree is not None else []
    if tree is None or not hits:
        return None
    hit = hits[0]
    line = tree.line_of(hit.node)
    share = lines_share(analysis, (tree.source_line(hit.node, "full_sort"),))
    samples = analysis.stacks.samples if analysis.stacks is not None else 0
    op = _op_share(analysis, "torch.sort")
    low_share = sampled_share_low(share, samples) if share is not None and samples else None
    high = _share_high(share, samples) if share is not None and samples else None
    if op is not None and high is None:  # the superset only where the line was not read
        high = op
    low, bound = gain_range(
        low_share * (1 - KEPT[1]) if low_share is not None else None,
        high * (1 - KEPT[0]) if high is not None else None,
        analysis,
    )
    said = SortedForTopk(
        line, tree.text_of(hit.node), ast.unparse(hit.k), hit.first, share, op, low, bound,
        hit.first,
    )  # fmt: skip
    severity = severity_of(share, low=0.0) or "low"
    return found("host.full_sort_topk", severity, said, phase_share=share, bound=bound, low=low,
                 line=line, fix=FIX if hit.first else None)  # fmt: skip


def topk_for_sort(module: cst.Module) -> CodemodResult:
    """``<sort>[..., :k]`` -> ``X.topk(k, dim=d[, largest=False]).indices`` (or ``.values``):
    the slices the rule found, edited where they stand."""
    from gpu_notebook.fixes.cst_tools import Declined, Edited, facts_of, paired, replace_nodes

    tree = facts_of(module).tree
    hits = {id(h.node): h for h in (full_sorts(tree) if tree is not None else []) if h.first}
    edits: dict[cst.CSTNode, Replacement] = {}
    for node, fact in paired(module, [h.node for h in hits.values()]).items():
        edits[node] = _as_topk(module, hits[id(fact)])
    if not edits:
        return Declined("no slice of a sort's first k entries to write as topk")
    return Edited(replace_nodes(module, edits), f"{len(edits)} sort(s) as topk")


def _as_topk(module: cst.Module, hit: FullSort) -> Replacement:
    def edit(updated: cst.Subscript) -> cst.BaseExpression:
        import libcst as cst

        receiver = ast.unparse(hit.receiver)
        plain = isinstance(hit.receiver, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        args = [ast.unparse(hit.k), f"dim={hit.dim}"] + (
            [] if hit.descending else ["largest=False"]
        )
        if not hit.method:  # torch.topk(X, k, ...)
            head, args = "torch.topk", [receiver, *args]
        else:
            head = f"{receiver}.topk" if plain else f"({receiver}).topk"
        return cst.parse_expression(f"{head}({', '.join(args)}).{hit.field}")

    del module
    return edit


FIX = Fix(
    "sort_to_topk",
    "Select the k entries with topk instead of sorting whole rows",
    (
        "topk(k, dim) returns the same first k entries in the same order (up to ties)",
        "without ordering the rest of each row.",
    ),
    "https://pytorch.org/docs/stable/generated/torch.topk.html",
    topk_for_sort,
)
RULES = (sorted_for_topk,)
