"""Activation checkpointing on a run that is not short of memory: forward passes paid for nothing.

The measurement is ``analysis/recompute.py``.

Checkpointing (``torch.utils.checkpoint.checkpoint``, ``checkpoint_sequential``, HF's
``model.gradient_checkpointing_enable()`` / ``TrainingArguments(gradient_checkpointing=True)``,
transformers 5's ``activation_checkpointing_enable()`` / ``activation_checkpointing=True`` (the old
names its deprecated aliases),
and Lightning or accelerate code calling those) trades compute for memory: the blocks' forward
runs again inside the backward instead of keeping their activations. Worth it only where memory
is short. Flagged when the profiled steps' backward holds a recomputed forward
(``Analysis.recompute``) and the run's memory peak is below ``TIGHT`` of what it had: the GPU's
memory (NVML) on a GPU run, the machine's RAM against the process's peak RSS (psutil) on a CPU
one. At ``TIGHT`` or above, checkpointing is doing its job: no finding. Memory not read: found,
no fix offered (only the user knows whether it would fit).

Gain: turning checkpointing off removes the recompute's time and the checkpoint's own cost the
trace shows (its wrapper around each block's forward, its backward node's work beside the
recompute, and, non-reentrant, its pack hook per saved tensor inside the forward's operators:
``Recompute.overhead_us``), so at most ``1 / (1 - share)`` of both (Amdahl, "up to"), their
share of the run's unprofiled step where the run had such steps (``Recompute.base_us``: the
profiler lifts the many small operators around the checkpoint more than the checkpoint's own
Python; over the traced steps' time the bound read 1.29x-1.35x for 1.67x-1.75x measured, issue
26), in the terms of the trace's least pieces where the whole step was floored as the
checkpoint's pieces are (their least leaves out what sharing the cores slows, the steps' own
time keeps it: at load 16-21 1.41x for 1.65x measured without it). Low end, on a host run: the recompute alone over the traced steps' own time, the least of
what the trace read (the blocks' forward run a second time is removed whatever else is; on a
device, kept activations' memory traffic may take some of it back, so no low end). The fix
(``checkpointing_off``) calls the checkpointed function directly, turns HF's switch off, or sets
``gradient_checkpointing=False``; offered only where a line of the cell does the checkpointing,
and never with memory tight. Its side effect: peak memory grows by about the activations the
checkpointed blocks kept. Threshold: ``memory.HIGH`` (80% of the device: "high" memory use).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted, keyword_of, literal_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Recompute, Run, Said
from gpu_notebook.rules.common import found
from gpu_notebook.rules.memory import HIGH

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

TIGHT = HIGH  # peak memory at or above this share of what the run had: checkpointing pays
# Keywords of torch.utils.checkpoint.checkpoint itself; every other keyword goes to the function.
_OWN_KEYWORDS = frozenset(
    {"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug"}
)
_MODULE = "torch.utils.checkpoint"
# HF's switches: transformers 5 renamed them, the old names stay as deprecated aliases.
_HF_ENABLE = ("gradient_checkpointing_enable", "activation_checkpointing_enable")
_HF_SWITCHES = ("gradient_checkpointing", "activation_checkpointing")
Form = Literal["checkpoint", "checkpoint_sequential", "hf_enable", "hf_argument"]


@dataclass(frozen=True)
class CheckpointingUnneeded(Said):
    """Recomputed forward in the backward while memory had room."""

    share: float  # of the traced steps' time: what turning it off removes, in all
    ops: int  # recomputed operators found in the traced steps
    steps: int  # traced steps
    recompute_us: float
    recompute_share: float  # the recompute's part of ``share``
    forward_overhead_us: float | None  # the checkpoint's wrapper around the blocks' forward
    backward_overhead_us: float | None  # its backward nodes' time beside the recompute
    overhead_share: float  # the checkpoint's own part of ``share`` (0: not read)
    pack_us: float | None  # non-reentrant: its pack hooks inside the forward's operators
    # The step the shares are of (``Recompute.base_us``, a step) where it is the unprofiled
    # step (in the floors' terms where the whole step was floored); None: the traced steps'.
    unprofiled_step_us: float | None
    on_device: bool
    memory: Literal["gpu", "host"] | None  # what was read (None: neither)
    peak_bytes: int | None
    total_bytes: int | None
    line: int | None  # the cell's first checkpointing line (None: none in the cell)
    text: str | None
    form: Form | None
    # What the line switches on, for the advice to name: the HF keyword
    # (``gradient_checkpointing``) or the enabling call (``model.gradient_checkpointing_enable``).
    switch: str | None = None
    # The shares' step was floored as the pieces are (each at its least over the steps:
    # ``Recompute.floor_ratio``), the least gain's traced step too.
    floored_base: bool = False


_GUIDE_URL = "https://pytorch.org/docs/stable/checkpoint.html"


def checkpointing_calls(tree: CellTree) -> list[tuple[ast.Call, Form]]:
    """The cell's calls that turn checkpointing on, in source order: what the rule points at and
    what the fix edits (the same nodes)."""
    modules, functions = _imported(tree.tree)
    out: list[tuple[ast.Call, Form]] = []
    for call in tree.calls():
        form = _form(call, modules, functions)
        if form is not None and tree.in_cell(call):  # not yet said through calls
            out.append((call, form))
    out.sort(key=lambda item: (tree.line_of(item[0]), item[0].col_offset))
    return out


def _imported(module: ast.Module) -> tuple[set[str], dict[str, str]]:
    """Names bound to torch.utils.checkpoint (``cp``) and to its two functions (by alias)."""
    modules = {_MODULE}
    functions: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module == _MODULE:
            for alias in node.names:
                if alias.name in ("checkpoint", "checkpoint_sequential"):
                    functions[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.utils":
            modules.update(a.asname or a.name for a in node.names if a.name == "checkpoint")
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == _MODULE and a.asname)
    return modules, functions


def _form(call: ast.Call, modules: set[str], functions: dict[str, str]) -> Form | None:
    name = dotted(call.func) or ""
    head, _, tail = name.rpartition(".")
    if (head in modules and tail in ("checkpoint", "checkpoint_sequential")) or (
        not head and name in functions
    ):
        kind = tail if head else functions[name]
        return "checkpoint" if kind == "checkpoint" else "checkpoint_sequential"
    if isinstance(call.func, ast.Attribute) and call.func.attr in _HF_ENABLE:
        return "hf_enable"
    if _switched_on(call) is not None:
        return "hf_argument"
    return None


def _switch(call: ast.Call, form: Form) -> str | None:
    """The keyword or the enabling call's dotted name that an HF form turns checkpointing on by."""
    if form == "hf_argument":
        return _switched_on(call)
    return dotted(call.func) if form == "hf_enable" else None


def _switched_on(call: ast.Call) -> str | None:
    """The HF keyword of ``call`` that turns checkpointing on (``...=True``), or None."""
    for name in _HF_SWITCHES:
        switch = keyword_of(call, name)
        if switch is not None and literal_of(switch.value) is True:
            return name
    return None


def _memory(
    run: Run, analysis: Analysis
) -> tuple[Literal["gpu", "host"] | None, int | None, int | None]:
    """What memory the run had and its peak: the GPU's where one was read, else the host's."""
    util = analysis.utilization
    if util.gpu_memory_total_bytes:
        return "gpu", util.gpu_memory_peak_bytes, util.gpu_memory_total_bytes
    if run.env.gpus or analysis.gpu is not None:
        return None, None, None  # a GPU run whose memory was not read: the host's says nothing
    if util.rss_peak_bytes and run.env.memory_total_bytes:
        return "host", util.rss_peak_bytes, run.env.memory_total_bytes
    return None, None, None


def checkpointing_unneeded(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The backward recomputes checkpointed forwards while memory has room."""
    rec = analysis.recompute
    if rec is None or rec.ops == 0 or rec.recompute_us <= 0 or rec.share >= 1.0:
        return None
    kind, peak, total = _memory(run, analysis)
    if kind is not None and peak is not None and total and peak / total >= TIGHT:
        return None  # memory is tight: checkpointing is doing its job
    calls = checkpointing_calls(facts.tree) if facts.tree is not None else []
    first = calls[0] if calls else None
    said = CheckpointingUnneeded(
        share=rec.share,
        ops=rec.ops,
        steps=rec.steps,
        recompute_us=rec.recompute_us,
        recompute_share=rec.recompute_share,
        forward_overhead_us=rec.forward_overhead_us,
        backward_overhead_us=rec.backward_overhead_us,
        overhead_share=rec.overhead_share,
        pack_us=rec.pack_us,
        unprofiled_step_us=rec.base_us / max(1, rec.steps) if rec.unprofiled_base else None,
        floored_base=rec.floor_ratio < 1.0,
        on_device=rec.on_device,
        memory=kind,
        peak_bytes=peak,
        total_bytes=total,
        line=facts.tree.line_of(first[0]) if first and facts.tree is not None else None,
        text=facts.tree.text_of(first[0]) if first and facts.tree is not None else None,
        form=first[1] if first else None,
        switch=_switch(*first) if first else None,
    )
    fixable = first is not None and kind is not None
    return found(
        "compute.checkpointing_unneeded",
        "medium",
        said,
        phase_share=rec.share,
        bound=1.0 / (1.0 - rec.share),
        low=_least_gain(rec),
        line=said.line,
        fix=FIX if fixable else None,
    )


def _least_gain(rec: Recompute) -> float | None:
    """The least the fix gives on a host run: the recompute alone, over the traced steps' own
    time (the profiled one: the longer, so the smaller share), in the terms the recompute was
    read in (floored where its pieces and the shares' base are: ``traced_base_us``). None on a
    device run."""
    base = rec.traced_base_us
    if rec.on_device or base <= 0 or rec.recompute_us >= base:
        return None
    return 1.0 / (1.0 - rec.recompute_us / base)


def checkpointing_off(module: cst.Module) -> CodemodResult:
    """Each checkpointing call the rule found, undone where it stands: ``checkpoint(fn, *a,
    use_reentrant=..., **kw)`` -> ``fn(*a, **kw)``; ``checkpoint_sequential(fs, n, x)`` ->
    ``torch.nn.Sequential(*fs)(x)``; ``m.gradient_checkpointing_enable(...)`` ->
    ``m.gradient_checkpointing_disable()`` (``activation_...`` likewise);
    ``gradient_checkpointing=True`` / ``activation_checkpointing=True`` -> ``False``."""
    import libcst as cst  # the rules alone never need libcst; a fix imports it

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        nodes_of,
        with_torch_import,
    )

    tree = facts_of(module).tree
    found_calls = checkpointing_calls(tree) if tree is not None else []
    forms = {id(call): form for call, form in found_calls}
    edits: dict[cst.CSTNode, Replacement] = {}
    sequential = False
    for call, node in zip(found_calls, nodes_of(module, [c for c, _ in found_calls]), strict=False):
        form = forms[id(call[0])]
        if not isinstance(node, cst.Call):
            continue
        if form == "checkpoint" and _direct(node) is not None:
            edits[node] = _direct_call
        elif form == "checkpoint_sequential" and _sequential(node) is not None:
            edits[node] = _sequential_call
            sequential = True
        elif form == "hf_enable" and isinstance(node.func, cst.Attribute):
            edits[node] = _hf_disabled
        elif form == "hf_argument":
            edits[node] = _argument_off
    if not edits:
        return Declined("no checkpointing call of this cell that can be undone where it stands")
    patched = with_torch_import(module, edits) if sequential else _replace(module, edits)
    return Edited(patched, f"{len(edits)} checkpointing call(s) undone")


def _replace(module: cst.Module, edits: dict[cst.CSTNode, Replacement]) -> cst.Module:
    from gpu_notebook.fixes.cst_tools import replace_nodes

    return replace_nodes(module, edits)


def _direct(call: cst.Call) -> tuple[cst.Arg, list[cst.Arg]] | None:
    """The function and what is passed to it, or None (the function not given positionally)."""
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    rest = [a for a in call.args[1:] if a.keyword is None or a.keyword.value not in _OWN_KEYWORDS]
    return call.args[0], rest


def _direct_call(updated: cst.Call) -> cst.Call:
    import libcst as cst

    parts = _direct(updated)
    assert parts is not None
    fn, rest = parts
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest]
    return cst.Call(func=fn.value, args=args)


def _sequential(call: cst.Call) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``checkpoint_sequential(functions, segments, input, ...)``'s functions and input."""
    named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    functions = positional[0] if positional else named.get("functions")
    given = positional[2] if len(positional) > 2 else named.get("input")
    if functions is None or given is None:
        return None
    return functions, given


def _sequential_call(updated: cst.Call) -> cst.Call:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import expression

    parts = _sequential(updated)
    assert parts is not None
    functions, given = parts
    return cst.Call(
        func=cst.Call(func=expression("torch.nn.Sequential"), args=[cst.Arg(functions, star="*")]),
        args=[cst.Arg(given)],
    )


def _hf_disabled(updated: cst.Call) -> cst.Call:
    import libcst as cst

    assert isinstance(updated.func, cst.Attribute)
    disable = updated.func.attr.value.replace("_enable", "_disable")
    func = updated.func.with_changes(attr=cst.Name(disable))
    return updated.with_changes(func=func, args=[])


def _argument_off(updated: cst.Call) -> cst.Call:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    on = [
        a.keyword.value
        for a in updated.args
        if a.keyword is not None
        and a.keyword.value in _HF_SWITCHES
        and isinstance(a.value, cst.Name)
        and a.value.value == "True"
    ]
    for name in on:
        updated = set_keyword(updated, name, cst.Name("False"))
    return updated


FIX = Fix(
    "checkpointing_off",
    "Turn activation checkpointing off",
    (
        "Checkpointing runs the checkpointed blocks' forward again inside the backward, to keep "
        "their activations out of memory; this run had memory to spare.",
        "Without it the backward reuses the kept activations; peak memory grows by about those "
        "activations.",
    ),
    _GUIDE_URL,
    checkpointing_off,
)
TIE = 120  # where its findings tie: the verdict table's order (rules._families)
RULES = (checkpointing_unneeded,)
