"""Tensors made on the host, then copied to the GPU, in every step: ``torch.zeros(n).to(device)``.

Level: PyTorch performance tuning guide, "Create tensors directly on the target device":
``torch.rand(size).cuda()`` builds the tensor in host memory and copies it; ``torch.rand(size,
device='cuda')`` makes it on the GPU, with no copy. Flagged on a GPU run when the step loop
makes one; severity by the host's copy share with the copy rules' levels (TraceML H2D warn 10%,
critical 20%); the bound is Amdahl over that share (the copy disappears).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.names import dotted, keyword_of, literal_of, method_of, receiver_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import COPY_METHODS, DTYPE_WORDS, last
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_bound, level_of, share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement


@dataclass(frozen=True)
class HostMade(Said):
    where: SourceLine  # the first call that makes a tensor on the host and copies it
    count: int  # such calls
    copy: float | None  # the host's copy share of the step
    bound: float | None


# torch functions that make a tensor from sizes alone: made on the GPU, nothing is copied.
FACTORIES = frozenset(
    {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
     "linspace", "logspace", "eye"}
)  # fmt: skip


def host_made_calls(tree: CellTree) -> list[ast.Call]:
    """The ``torch.<factory>(...).to(<device>)`` and ``.cuda()`` calls of the step loops, where
    the factory has no device: what the rule reports and the fix edits (the same nodes)."""
    found = []
    for call in tree.calls():
        inner = receiver_of(call)
        method = method_of(call)
        if not isinstance(inner, ast.Call) or method not in COPY_METHODS:
            continue
        factory = dotted(inner.func) or ""
        if not factory.startswith("torch.") or last(factory) not in FACTORIES:
            continue
        if keyword_of(inner, "device") is not None or tree.step_loop_of(call) is None:
            continue
        if (method == "cuda" and not (call.args or call.keywords)) or (
            method == "to" and _moves_to_device(call)
        ):
            found.append(call)
    return found


def _moves_to_device(call: ast.Call) -> bool:
    """``.to(device)`` / ``.to("cuda")`` / ``.to(device=d)``: one argument, not a dtype or the CPU
    (``.to(device, non_blocking=True)`` is left to the copy rules)."""
    arg = keyword_of(call, "device")
    if len(call.args) + len(call.keywords) != 1 or (call.keywords and arg is None):
        return False
    node = arg.value if arg is not None else call.args[0]
    if isinstance(node, ast.Starred):
        return False
    value = literal_of(node)
    text = (value if isinstance(value, str) else ast.unparse(node)).lower()
    return "cpu" not in text and last(text) not in DTYPE_WORDS


def host_made(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop makes a tensor on the host and copies it to the GPU."""
    if analysis.gpu is None or facts.tree is None:
        return None
    tree = facts.tree
    hits = [tree.source_line(c, "host-made") for c in host_made_calls(tree)]
    if not hits:
        return None
    copy = share(analysis, "copy")
    bound = gain_bound(copy, analysis)
    first = hits[0]
    said = HostMade(first, len(hits), copy, bound)
    return found("copies.host_made", level_of(analysis, copy, low=0.0) or "low", said,
                 phase_share=copy, bound=bound, line=first.cell_line, fix=FIX)  # fmt: skip


def make_on_device(module: cst.Module) -> CodemodResult:
    """``torch.zeros(n).to(device)`` -> ``torch.zeros(n, device=device)``: the calls the rule
    found (``host_made_calls`` over the cell's facts), edited where they stand."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import Declined, Edited, facts_of, nodes_of, replace_nodes

    tree = facts_of(module).tree  # the facts the rule read (the same text, scanned once)
    edits: dict[cst.CSTNode, Replacement] = {}
    for node in nodes_of(module, host_made_calls(tree) if tree is not None else []):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            device = node.args[0].value if node.args else cst.SimpleString('"cuda"')
            edits[node] = functools.partial(_moved_into, device=device)
    if not edits:
        return Declined("no torch.zeros(...).to(device) or .cuda() in the training loop")
    return Edited(replace_nodes(module, edits), f"{len(edits)} tensor(s) made on the device")


def _moved_into(updated: cst.Call, device: cst.BaseExpression) -> cst.Call:
    """The factory call, with the device the copy went to, in the copy's place."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    inner = receiver_of(updated)
    assert isinstance(inner, cst.Call)  # host_made_calls checked it
    return set_keyword(inner, "device", device)


FIX = Fix(
    "make_on_device",
    "Make tensors on the GPU",
    (
        "torch.zeros(n).to(device) builds the tensor in host memory and copies it every step.",
        "torch.zeros(n, device=device) makes it on the GPU: no host memory, no copy.",
    ),
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
    "#create-tensors-directly-on-the-target-device",
    make_on_device,
)
TIE = 30  # where its findings tie: the verdict table's order (rules._families)
RULES = (host_made,)
