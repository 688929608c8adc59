"""Tensors made on the host, then copied to the GPU, in every step: ``torch.zeros(n).to(device)``.

The rule, its levels, its words and its fix, in one place: a new rule is this module,
its test, and one line in ``rules/__init__.FAMILIES``.

Level: PyTorch performance tuning guide, "Create tensors directly on the target device":
``torch.rand(size).cuda()`` builds the tensor in host memory and copies it; ``torch.rand(size,
device='cuda')`` makes it on the GPU, with no copy. Flagged on a GPU run when the step loop
makes one; severity by the host's copy share with the copy rules' levels (TraceML H2D warn 10%,
critical 20%); the bound is Amdahl over that share (the copy disappears).
"""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted, keyword_of, literal_of, method_of, receiver_of
from gpu_notebook.cell.words import DTYPE_WORDS, last
from gpu_notebook.fixes.records import Fix
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import finding, gain_bound, severity_of, share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

_GUIDE = (
    "PyTorch performance tuning guide: create tensors directly on the target device; TraceML "
    "step_time policy (H2D warn 10%, critical 20%)"
)
# torch functions that make a tensor from sizes alone: made on the GPU, nothing is copied.
FACTORIES = frozenset(
    {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
     "linspace", "logspace", "eye"}
)  # fmt: skip


def made_on_host(factory: str | None, method: str | None, device: object, has_device: bool) -> bool:
    """``torch.<factory>(...)`` without a device, then ``.cuda()`` or ``.to(<device>)``.

    ``device``: the ``.to`` argument's literal (a str) or dotted name; a dtype or "cpu" is no
    move to the GPU. The rule (over ast) and the fix (over libcst) both ask this."""
    if factory is None or not factory.startswith("torch.") or last(factory) not in FACTORIES:
        return False
    if has_device or method not in ("to", "cuda"):
        return False
    if method == "cuda":
        return True
    text = str(device).lower()
    return device is not None and "cpu" not in text and last(text) not in DTYPE_WORDS


def _ast_device(call: ast.Call) -> tuple[object, bool]:
    """The ``.to`` call's one device argument and whether it is the only argument."""
    keywords = [k for k in call.keywords if k.arg != "device"]
    arg = keyword_of(call, "device")
    node = arg.value if arg is not None else (call.args[0] if len(call.args) == 1 else None)
    if keywords or node is None or len(call.args) + (arg is not None) != 1:
        return None, False
    value = literal_of(node)
    return (value if isinstance(value, str) else ast.unparse(node)), True


def host_made(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop makes a tensor on the host and copies it to the GPU."""
    tree = facts.tree
    if analysis.gpu is None or tree is None:
        return None
    found = []
    for call in tree.calls():
        inner = receiver_of(call)
        if not isinstance(inner, ast.Call) or tree.step_loop_of(call) is None:
            continue
        device, single = (
            _ast_device(call)
            if method_of(call) == "to"
            else (None, not call.args and not call.keywords)
        )
        factory = dotted(inner.func)
        if single and made_on_host(
            factory, method_of(call), device, keyword_of(inner, "device") is not None
        ):
            found.append(tree.source_line(call, "host-made"))
    if not found:
        return None
    copy = share(analysis, "copy")
    bound = gain_bound(copy, analysis)
    first = found[0]
    return finding(
        "copies.host_made",
        "Tensors are made on the host and copied to the GPU every step",
        severity_of(copy, low=0.0) or "low",
        [
            f"line {first.line}: `{first.text}` builds the tensor in host memory, then copies it"
            + (f" ({len(found)} such calls)" if len(found) > 1 else ""),
            f"the host spends {fmt_share(copy)} of the step in copies"
            if copy is not None
            else "host copy time: not measured",
            f"gain if the copies go: {fmt_gain(bound)}",
        ],
        "Make the tensor on the GPU: torch.zeros(n, device=device) instead of .to(device).",
        _GUIDE,
        phase_share=copy,
        bound=bound,
        line=first.line,
        fix_id=FIX.fix_id,
    )


def make_on_device(module: cst.Module) -> CodemodResult:
    """``torch.zeros(n).to(device)`` -> ``torch.zeros(n, device=device)`` in the step loops."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        call_name,
        keyword,
        method_name,
        receiver,
        replace_nodes,
        training_loops,
        walk,
    )

    edits: dict[cst.CSTNode, Replacement] = {}
    for loop in training_loops(module):
        for node in walk(loop.body):
            inner = receiver(node) if isinstance(node, cst.Call) else None
            if not isinstance(node, cst.Call) or not isinstance(inner, cst.Call):
                continue
            method = method_name(node)
            args = [a for a in node.args if a.keyword is None or a.keyword.value == "device"]
            if method == "to" and (len(node.args) != 1 or len(args) != 1 or args[0].star):
                continue
            if method == "cuda" and node.args:
                continue  # .cuda(1): the fix would need the index; left as it is
            value = args[0].value if method == "to" else cst.SimpleString('"cuda"')
            device: object = (
                value.evaluated_value
                if isinstance(value, cst.SimpleString)
                else module.code_for_node(value)
            )
            if made_on_host(call_name(inner), method, device, keyword(inner, "device") is not None):
                # The factory call, with the device the copy went to, takes the copy's place.
                edits[node] = functools.partial(_moved_into, device=value)
    if not edits:
        return Declined("no torch.zeros(...).to(device) or .cuda() in the training loop")
    return Edited(replace_nodes(module, edits), f"{len(edits)} tensor(s) made on the device")


def _moved_into(updated: cst.Call, device: cst.BaseExpression) -> cst.Call:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import receiver, set_keyword

    inner = receiver(updated)
    assert isinstance(inner, cst.Call)  # checked before the edit was made
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
RULES = (host_made,)
