"""A batch made every step by ``torch.tensor([rows[i] for i in idx])`` over a list of numpy arrays.

The rule, its message record and its fix in one place; its wording is ``words/list_tensors.py``
and its test ``tests/test_rule_list_tensors.py`` (rules/__init__ finds the module and its ``FIX``).

``torch.tensor`` (and ``torch.as_tensor``) given a Python list reads it as nested sequences: every
number of every array goes through Python's C API one at a time (torch warns "Creating a tensor
from a list of numpy.ndarrays is extremely slow"). ``np.stack`` copies the arrays into one block
in C, which ``torch.from_numpy`` wraps: seen 6.0 ms against 0.2 ms for 64 rows of 96 floats
(unseen round 10, numpy_list_batch), where the step was about 10 ms. No operator records that
parse, so the trace puts it in the Python between operators; the host-bound verdict then offered
torch.compile and a bigger batch, neither of which shortens it (a bigger batch parses twice the
numbers).

Flagged where a step loop calls ``torch.tensor``/``torch.as_tensor`` on a list comprehension
whose items index a list (or tuple) that holds numpy arrays: read live (its first item) where
the rules have the namespace (a notebook's, or a script's globals under ``gpucheck run``), else
from the cell's own binding of it, a list comprehension whose item numpy makes
(``[rng.standard_normal(96).astype(np.float32) for ...]``: a name in a script's ``main()`` is no
global, read from the source alone). The
range: from the line's own sampled time (where the sampler read a share) to the step's Python
between operators, which holds it (a superset). Severity by the line's share where measured,
else at most medium (the superset's). The fix stacks the items first; dtype and values are the
same (torch.tensor keeps a float32 array's dtype, as from_numpy does).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_range, severity_of
from gpu_notebook.rules.syncs import lines_share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

# The calls that parse a Python list element by element; both take the stacked array as is.
MAKERS = frozenset({"torch.tensor", "torch.as_tensor"})
# Keywords the stacked form passes on unchanged (torch.as_tensor takes these two only).
KEPT_KEYWORDS = frozenset({"dtype", "device"})


@dataclass(frozen=True)
class TensorFromArrays(Said):
    """A step loop makes a tensor from a Python list of numpy arrays, number by number."""

    line: int
    text: str
    source: str  # the list of arrays its items index (``rows``)
    count: int  # such calls in the step loops
    own: float | None  # the line's own sampled share of the step
    between: float | None  # the step's Python between operators (holds the parse)
    low: float | None
    bound: float | None


def array_list_calls(tree: CellTree, arrays: frozenset[str]) -> list[tuple[ast.Call, str]]:
    """The step loops' ``torch.tensor([<a>[i] for ...])`` calls whose ``<a>`` is a name in
    ``arrays`` (lists of numpy arrays), each with that name, in source order: what the rule
    reports and the fix edits (the same nodes)."""
    out: list[tuple[ast.Call, str]] = []
    for call in tree.calls():
        if dotted(call.func) not in MAKERS or len(call.args) != 1:
            continue
        if any(k.arg not in KEPT_KEYWORDS for k in call.keywords):
            continue  # requires_grad=, pin_memory=, **kw: not torch.as_tensor's
        source = _indexed_list(call.args[0])
        if source is None or source not in arrays:
            continue
        loop = tree.step_loop_of(call)
        if loop is None or tree.gated(call, loop):
            continue
        out.append((call, source))
    out.sort(key=lambda item: (tree.line_of(item[0]), item[0].col_offset))
    return out


def bound_array_lists(tree: CellTree) -> frozenset[str]:
    """Names the cell binds to a list comprehension of numpy arrays: ``rows = [<array> for
    ...]``, where numpy makes the item (``np.<f>(...)``, a method of an object a ``np.<f>(...)``
    call made, such as ``np.random.default_rng(0)``, or ``.astype(...)``/``.numpy()``)."""
    numpy = _numpy_name(tree.tree)
    if numpy is None:
        return frozenset()
    bindings = [
        (node.targets[0].id, node.value)
        for node in ast.walk(tree.tree)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ]
    made = {name for name, value in bindings if _numpy_call(value, numpy, set())}
    return frozenset(
        name
        for name, value in bindings
        if isinstance(value, ast.ListComp) and _numpy_call(value.elt, numpy, made)
    )


def _numpy_call(node: ast.expr, numpy: str, made: set[str]) -> bool:
    """A call numpy answers: ``np.<f>(...)``, ``<x>.astype(...)``/``<x>.numpy()``, or a method of
    a name bound to a numpy call (``rng.integers(...)``)."""
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func) or ""
    if name.startswith(f"{numpy}.") or name.split(".")[0] in made:
        return True
    return isinstance(node.func, ast.Attribute) and node.func.attr in ("astype", "numpy")


def _indexed_list(node: ast.expr) -> str | None:
    """``rows`` of ``[rows[i] for i in idx]``: a list comprehension whose item indexes a name."""
    if not isinstance(node, ast.ListComp):
        return None
    item = node.elt
    if isinstance(item, ast.Subscript) and isinstance(item.value, ast.Name):
        return item.value.id
    return None


def tensor_from_arrays(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop builds a tensor from a list of numpy arrays through the element-wise path."""
    if facts.tree is None:
        return None
    hits = array_list_calls(facts.tree, facts.live.array_lists | bound_array_lists(facts.tree))
    if not hits:
        return None
    node, source = hits[0]
    line = facts.tree.line_of(node)
    fact = SourceLine(line, facts.tree.text_of(node), "tensor-from-arrays", node=node)
    own = lines_share(analysis, (fact,))
    between = analysis.host.between_ops_share if analysis.host is not None else None
    if between is not None and own is not None:
        between = max(between, own)  # the superset is never below the part it holds
    low, bound = gain_range(own, between, analysis)
    said = TensorFromArrays(line, fact.text, source, len(hits), own, between, low, bound)
    if own is not None:
        severity = severity_of(own, low=0.0) or "low"
    else:
        severity = "low" if (severity_of(between, low=0.0) or "low") == "low" else "medium"
    params: dict[str, str | int | float | bool | None] = {"items": source}
    return found("host.tensor_from_arrays", severity, said, phase_share=between, bound=bound,
                 low=low, line=line, fix=FIX, fix_params=params)  # fmt: skip


def stack_arrays(module: cst.Module, *, items: str) -> CodemodResult:
    """``torch.tensor([rows[i] for i in idx])`` -> ``torch.from_numpy(np.stack([...]))``
    (``torch.as_tensor(np.stack([...]), dtype=..)`` where the call gives a dtype or device):
    the calls the rule found over the list ``items``, edited where they stand."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        expression,
        facts_of,
        nodes_of,
        replace_nodes,
    )

    tree = facts_of(module).tree  # the facts the rule read (the same text, scanned once)
    numpy = _numpy_name(tree.tree) if tree is not None else None
    if numpy is None:
        return Declined("the cell does not import numpy: np.stack needs it (import numpy as np)")
    hits = array_list_calls(tree, frozenset({items})) if tree is not None else []
    edits: dict[cst.CSTNode, Replacement] = {}
    for node in nodes_of(module, [n for n, _ in hits]):
        if not isinstance(node, cst.Call):
            continue
        stacked = cst.Call(expression(f"{numpy}.stack"), [cst.Arg(node.args[0].value)])
        if node.args[1:]:
            kept = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in node.args[1:]]
            call = cst.Call(expression("torch.as_tensor"), [cst.Arg(stacked), *kept])
        else:
            call = cst.Call(expression("torch.from_numpy"), [cst.Arg(stacked)])
        edits[node] = functools.partial(_replaced, call=call)
    if not edits:
        return Declined(f"no torch.tensor([{items}[i] for ...]) in the training loop")
    return Edited(replace_nodes(module, edits), f"{len(edits)} tensor(s) stacked by numpy")


def _replaced(_updated: cst.Call, call: cst.Call) -> cst.Call:
    return call


def _numpy_name(tree: ast.Module) -> str | None:
    """The name ``import numpy`` binds in the cell (``np`` of ``import numpy as np``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "numpy":
                    return alias.asname or "numpy"
    return None


FIX = Fix(
    "stack_arrays",
    "Stack the arrays before making the tensor",
    (
        "torch.tensor on a list of numpy arrays reads every number through Python, one at a "
        "time, every step.",
        "np.stack copies the arrays into one block in C and torch.from_numpy wraps it: the "
        "same values and dtype, without the per-number parse.",
    ),
    "https://pytorch.org/docs/stable/generated/torch.from_numpy.html",
    stack_arrays,
)
RULES = (tensor_from_arrays,)
