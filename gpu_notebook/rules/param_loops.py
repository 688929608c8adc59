"""A Python loop over the parameters every step: ``for e, p in zip(ema.parameters(),
model.parameters()): e.mul_(d).add_(p.detach(), alpha=1 - d)``.

The rule, its message record and its fix in one place; its wording is ``words/param_loops.py``
and its test ``tests/test_rule_param_loops.py`` (rules/__init__ finds the module and its ``FIX``).

An EMA (mean-teacher) copy of the weights, a hand-written weight decay or a manual update run
one in-place op per parameter tensor from Python: a model of 74 tensors and two ops each is 148
dispatches a step, as many as the whole unfused Adam update (unseen round 10, ema_param_loop:
no finding; the host-bound verdict offered torch.compile and fused Adam, neither of which
reaches the loop). ``torch._foreach_<op>_`` does one op for every tensor of a list in one call,
as ``torch.optim`` does with ``foreach=True`` and ``torch.optim.swa_utils`` with
``get_ema_multi_avg_fn``.

Flagged where a ``for`` loop inside a step loop (no ``if`` between them) iterates
``<m>.parameters()`` or a ``zip`` of such, and its body is nothing but chains of in-place tensor
methods that torch has a foreach form of. Its ops are no forward, backward or optimizer step
(under no_grad autograd numbers none): the trace puts them and the Python between them in the
step's time outside those phases. The range: from half the loop's own sampled time (the foreach
calls keep the arithmetic; dispatch is what goes) to that outside time whole (a superset: other
host work is in it too). Severity by that time with TraceML's residual levels (warn 10%,
critical 20%). On a run without a GPU it is said at info with no patch: there a foreach call
still runs its op tensor by tensor, and only the Python between the ops goes (measured below the
run-to-run margin). The fix rewrites the loop as foreach calls over lists of the same tensors, where
every argument that reads a loop variable is the variable itself (``p``, ``p.data``,
``p.detach()``); a ``.grad`` (None for a parameter the loss did not reach) or any other
expression of them is left to the user (the finding stays, without a patch).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.analysis.level_range import Level
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted, method_of, names_in, receiver_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    found,
    gain_range,
    has_gpu,
    level_in,
    shares_sum,
)
from gpu_notebook.rules.syncs import lines_share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

# In-place tensor methods with a ``torch._foreach_<name>`` of the same arguments.
FOREACH = frozenset(
    {"add_", "sub_", "mul_", "div_", "lerp_", "copy_", "addcmul_", "addcdiv_", "zero_",
     "clamp_min_", "clamp_max_", "sqrt_", "neg_", "abs_", "exp_", "pow_", "maximum_", "minimum_"}
)  # fmt: skip
# What the foreach calls keep of the loop's own time at least (the arithmetic, one pass over the
# tensors): the low end counts half of that time as removed.
KEPT_AT_MOST = 0.5


@dataclass(frozen=True)
class ParameterLoop(Said):
    """A step loop runs a Python loop of in-place ops over a model's parameters."""

    line: int
    text: str
    ops: int  # in-place ops a parameter tensor, each its own call
    count: int  # such loops in the step loops
    own: float | None  # the loop's own sampled share of the step
    residual: float | None  # the step's time outside data, forward, backward and optimizer
    low: float | None
    bound: float | None
    patched: bool  # the loop can be written as foreach calls (``foreach_form``)
    cpu: bool = False  # no GPU: a foreach call still runs one op per tensor (no patch offered)


def parameter_loops(tree: CellTree) -> list[ast.For]:
    """The ``for`` loops over parameters whose body is only foreach-able in-place ops, inside a
    step loop with no ``if`` between: what the rule reports and the fix edits (the same nodes)."""
    out = []
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.For) or node.orelse or not _over_parameters(node.iter):
            continue
        step = tree.step_loop_of(node)
        if step is None or step is node or tree.gated(node, step):
            continue
        if _chains(node) is not None:
            out.append(node)
    out.sort(key=tree.line_of)
    return out


def _over_parameters(node: ast.expr) -> bool:
    """``m.parameters()``, or ``zip(a.parameters(), b.parameters(), ...)`` (``strict=`` too)."""
    if isinstance(node, ast.Call) and dotted(node.func) == "zip":
        plain = all(k.arg == "strict" for k in node.keywords)
        return bool(node.args) and plain and all(map(_parameters, node.args))
    return _parameters(node)


def _parameters(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and method_of(node) == "parameters" and not node.args


def _chains(loop: ast.For) -> list[list[ast.Call]] | None:
    """Each statement of the loop's body as its chain of in-place calls, innermost first
    (``e.mul_(d).add_(p)``: mul_, add_); None where a statement is anything else."""
    targets = names_in(loop.target)
    chains = []
    for statement in loop.body:
        if not isinstance(statement, ast.Expr):
            return None
        chain: list[ast.Call] = []
        node: ast.expr = statement.value
        while isinstance(node, ast.Call) and method_of(node) in FOREACH:
            chain.append(node)
            node = receiver_of(node)
        if not chain or not (names_in(node) & targets):
            return None  # not a chain of in-place ops on a loop variable
        chains.append(chain[::-1])
    return chains or None


def parameter_loop(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A Python loop of in-place ops over the parameters runs every step."""
    if facts.tree is None:
        return None
    loops = parameter_loops(facts.tree)
    if not loops:
        return None
    tree, loop = facts.tree, loops[0]
    chains = _chains(loop) or []
    lines = tuple(
        SourceLine(tree.line_of(node), tree.text_of(node), "parameter-loop", node=node)
        for node in (loop, *loop.body)
    )
    own = lines_share(analysis, lines)
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    if residual is not None and own is not None:
        residual = max(residual, own)  # the superset is never below the part it holds
    least = own * (1.0 - KEPT_AT_MOST) if own is not None else None
    low, bound = gain_range(least, residual, analysis)
    patched = foreach_form(loop) is not None
    said = ParameterLoop(
        lines[0].line, lines[0].text, sum(map(len, chains)), len(loops), own, residual, low,
        bound, patched,
    )  # fmt: skip
    severity: Level | Severity = level_in(analysis, RESIDUAL_PHASES, residual, low=0.0) or "low"
    if bound is None or not has_gpu(run):
        # On the CPU torch._foreach_* runs its op tensor by tensor: only the Python between the
        # ops goes (74 tensors: 1.2-2.0 ms looped, 0.8-1.5 ms foreach; --try-fixes read 0.86x,
        # 0.79x-0.93x, at load 8-12): said, no patch. On a GPU they are a few fused kernels.
        said = dataclasses.replace(said, cpu=not has_gpu(run))
        return found("host.parameter_loop", "info", said, line=said.line)
    return found("host.parameter_loop", severity, said, phase_share=residual, bound=bound,
                 low=low, line=said.line, fix=FIX if patched else None)  # fmt: skip


def foreach_form(
    loop: ast.For, items: str = "items", *, grad_off: bool = False
) -> list[str] | None:
    """The loop as foreach calls over the list ``items`` of its iterable's tuples, as source
    lines (the list first); None where an argument reads a loop variable other than as itself,
    ``.data`` or ``.detach()``, or a keyword reads one. Built as ``ast`` nodes, then unparsed.
    ``grad_off``: the loop runs with autograd off, where ``p.detach()`` and ``p.data`` are ``p``
    to the foreach call, so the list holds the tensors themselves (a detach per tensor is a call
    per tensor again: the loop's cost half kept, measured 1.2 ms -> 0.9 ms for 74 tensors)."""
    targets = names_in(loop.target)
    chains = _chains(loop)
    if chains is None:
        return None
    listing = ast.Name(items, ast.Load())

    def listed(node: ast.expr) -> ast.expr | None:
        if not (names_in(node) & targets):
            return node  # the same value for every tensor
        if not _plain(node, targets):
            return None
        if grad_off:
            node = _bare(node)
        if isinstance(node, ast.Name) and isinstance(loop.target, ast.Name):
            return listing  # the loop's own items: the list itself
        loop_target = ast.Tuple(_tuple_or_one(loop.target), ast.Store())
        over = ast.comprehension(loop_target, listing, [], 0)
        return ast.ListComp(node, [over])

    made = ast.Call(ast.Name("list", ast.Load()), [loop.iter], [])
    statements: list[ast.stmt] = [ast.Assign([ast.Name(items, ast.Store())], made, lineno=0)]
    for chain in chains:
        base = listed(receiver_of(chain[0]))
        if base is None:
            return None
        for call in chain:
            args = [listed(a) for a in call.args]
            if any(a is None or isinstance(a, ast.Starred) for a in args):
                return None
            if any(k.arg is None or names_in(k.value) & targets for k in call.keywords):
                return None
            function = ast.Attribute(ast.Name("torch", ast.Load()), f"_foreach_{method_of(call)}")
            given = [a for a in args if a is not None]
            statements.append(ast.Expr(ast.Call(function, [base, *given], call.keywords)))
    return [ast.unparse(s) for s in statements]


def _tuple_or_one(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _bare(node: ast.expr) -> ast.expr:
    """``p`` of ``p.detach()`` or ``p.data``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func
    return node.value if isinstance(node, ast.Attribute) else node


def _plain(node: ast.expr, targets: set[str]) -> bool:
    """A loop variable itself, its ``.data`` or its ``.detach()``."""
    if isinstance(node, ast.Call) and method_of(node) == "detach" and not node.args:
        node = receiver_of(node)
    elif isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    return isinstance(node, ast.Name) and node.id in targets


def foreach_loops(module: cst.Module) -> CodemodResult:
    """Each loop the rule found, written as ``torch._foreach_*`` calls where it stands."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        fresh_name,
        paired,
        statement,
        with_leading_lines,
        with_torch_import,
    )

    facts = facts_of(module)
    tree = facts.tree
    found_loops = parameter_loops(tree) if tree is not None else []
    used = set(facts.names_read) | {b[0] for b in facts.bindings}
    edits: dict[cst.CSTNode, Replacement] = {}
    for node, loop in paired(module, found_loops).items():
        items = fresh_name(used, ("params", "param_pairs"))
        used.add(items)
        lines = foreach_form(loop, items, grad_off=tree is not None and tree.grad_off_at(loop))
        if lines is None or not isinstance(node, cst.For):
            continue
        new = [statement(f"{line}\n") for line in lines]
        new[0] = with_leading_lines(new[0], node.leading_lines)
        edits[node] = functools.partial(_flattened, new=new)
    if not edits:
        return Declined("no loop of in-place ops over .parameters() the foreach calls can take")
    return Edited(with_torch_import(module, edits), f"{len(edits)} loop(s) as foreach calls")


def _flattened(
    _updated: cst.For, new: list[cst.SimpleStatementLine]
) -> cst.FlattenSentinel[cst.SimpleStatementLine]:
    import libcst as cst

    return cst.FlattenSentinel(new)


FIX = Fix(
    "foreach_parameter_loop",
    "One foreach call per op instead of a loop over the parameters",
    (
        "The loop runs each in-place op once per parameter tensor, each call dispatched from "
        "Python, every step.",
        "torch._foreach_<op>_ does the op for every tensor of the list in one call: the same "
        "arithmetic, without the per-tensor dispatch.",
    ),
    "https://pytorch.org/docs/stable/optim.html#weight-averaging-swa-and-ema",
    foreach_loops,
)
RULES = (parameter_loop,)
