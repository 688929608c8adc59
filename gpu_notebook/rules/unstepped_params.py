"""Parameters that get gradients but that no optimizer steps: a backbone never frozen.

The rule, its message record and its fix in one place; its wording is
``words/unstepped_params.py`` and its test ``tests/test_rule_unstepped_params.py``.

Seen (unseen round 20, probe_unfrozen_backbone): a linear probe's optimizer holds only the head
(``SGD(head.parameters())``), the backbone keeps ``requires_grad=True``, so every backward
computes the backbone's gradients for nothing (by hand ``backbone.requires_grad_(False)``
1.64x; the tool said nothing). Read from the live objects after the run
(``cell/unstepped_params``): a model the step loop calls with autograd on whose parameters
have a gradient set and are in no optimizer the namespace reaches. Silent where the cell reads
``.grad`` or hooks gradients (a hand-written update, an optimizer run from a hook), where no
optimizer is found (a framework's trainer holds it), where the cell builds an optimizer under a
name the namespace does not hold (a function's local: its parameters are unknown to us), and
for models only run under no_grad (an EMA copy, a teacher).

The gain: backward work shrinks with the parameters whose gradients go, roughly in proportion
to their share of the called models' trainable parameters (numel); the high end is that share
of the measured backward phase (they sit early: the input gradients through them go too), the
low end nothing measurable (they sit late, or cost little per parameter). The fix, only where
one model or one submodule holds exactly the unstepped parameters: ``<it>.requires_grad_(False)``
after the optimizer (or the model) is made; else a refusal naming the modules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.names import dotted, method_of
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_bound, severity_of, share

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult

# Calls that read or act on gradients outside torch.optim: a hand-written update, a hook.
_GRAD_HOOKS = {"register_hook", "register_post_accumulate_grad_hook", "register_full_backward_hook"}


@dataclass(frozen=True)
class UnsteppedParams(Said):
    """Models the step loop trains whose parameters get gradients no optimizer uses."""

    modules: tuple[str, ...]  # where they are: "backbone", "net.encoder" (the model's name first)
    count: int  # parameter tensors
    numel: int  # their elements
    fraction: float  # of the called models' trainable parameters (numel)
    backward: float | None  # the backward phase's share of the step
    bound: float | None  # that fraction of the backward removed
    target: str | None  # the one module the fix freezes (None: no single one)


def _called_models(tree: CellTree, names: set[str]) -> set[str]:
    """The models called (``m(x)``, ``m.forward(x)``) in a step loop with autograd on."""
    called = set()
    for call in tree.calls():
        name = dotted(call.func)
        if method_of(call) == "forward" and isinstance(call.func, ast.Attribute):
            name = dotted(call.func.value)
        if name in names and tree.step_loop_of(call) is not None and not tree.grad_off_at(call):
            called.add(name)
    return called


def _expression(name: str, path: str) -> str:
    """Python that reaches the submodule ``path`` of ``name`` (``net.encoder``,
    ``net.get_submodule("0")`` for a Sequential's item)."""
    if not path:
        return name
    if all(part.isidentifier() for part in path.split(".")):
        return f"{name}.{path}"
    return f'{name}.get_submodule("{path}")'


def _handles_grads(tree: CellTree) -> bool:
    """The cell (or a function it calls) reads ``.grad`` or hooks gradients itself."""
    for node in ast.walk(tree.tree):
        if isinstance(node, ast.Attribute) and node.attr == "grad":
            return True
        if isinstance(node, ast.Call) and (
            method_of(node) in _GRAD_HOOKS or (dotted(node.func) or "").endswith("autograd.grad")
        ):
            return True
    return False


def unstepped_params(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop's models hold parameters with gradients that no optimizer steps."""
    tree, live = facts.tree, facts.live
    if tree is None or not live.unstepped or _handles_grads(tree):
        return None
    seen = {o.name for o in live.optimizers}
    if any(o.name not in seen for o in facts.optimizers):
        return None  # an optimizer the cell builds that the namespace does not hold (a local)
    called = _called_models(tree, {m.name for m in live.unstepped})
    models = [m for m in live.unstepped if m.name in called]
    loose = [m for m in models if m.unstepped]
    trainable = sum(m.trainable for m in models)
    if not loose or trainable == 0:
        return None
    numel = sum(m.unstepped for m in loose)
    fraction = numel / trainable
    if fraction >= 1.0:
        return None  # no optimizer steps anything the loop calls: a copy's optimizer, not ours
    backward = share(analysis, "backward")
    high = backward * fraction if backward is not None else None
    modules = tuple(
        ".".join(p for p in (m.name, part) if p) for m in loose for part in (m.parts or ("",))
    )
    exact = len(loose) == 1 and loose[0].parts is not None and len(loose[0].parts) == 1
    if exact and not loose[0].name.isidentifier():
        exact = False  # a model reached some other way than a plain name: nothing to write
    target = _expression(loose[0].name, loose[0].parts[0]) if exact and loose[0].parts else None
    bound = gain_bound(high, analysis, host_side=False)
    said = UnsteppedParams(modules, sum(m.tensors for m in loose), numel, fraction, backward,
                           bound, target)  # fmt: skip
    severity = severity_of(high) or "low"
    optimizer = live.optimizers[0].name if len(live.optimizers) == 1 else None
    return found("unstepped_params.unfrozen", severity, said, phase_share=high, bound=bound,
                 fix=FIX, fix_params={"target": target, "optimizer": optimizer,
                                      "modules": ", ".join(modules)})  # fmt: skip


def freeze_unstepped(
    module: cst.Module, *, target: str | None = None, optimizer: str | None = None,
    modules: str = "",
) -> CodemodResult:  # fmt: skip
    """``<target>.requires_grad_(False)`` after the last top-level statement that makes the
    optimizer or the target's model; declined where no single module holds them."""
    from gpu_notebook.fixes.cst_tools import Declined, Edited, assigned_names, statement

    if target is None:
        return Declined(
            f"the parameters no optimizer steps are spread over {modules or 'several modules'}, "
            "beside stepped ones: set requires_grad_(False) on those you do not train"
        )
    root = target.split(".")[0]
    anchor = None
    for stmt in module.body:
        if any(name in (root, optimizer) for name, _ in assigned_names(stmt)):
            anchor = stmt
    if anchor is None:
        return Declined(
            f"neither {target} nor its optimizer is made at the top level of this cell: call "
            f"{target}.requires_grad_(False) where the optimizer is built",
        )
    line = statement(f"{target}.requires_grad_(False)\n")
    body = []
    for stmt in module.body:
        body.append(stmt)
        if stmt is anchor:
            body.append(line)
    return Edited(module.with_changes(body=body), target)


FIX = Fix(
    "freeze_unstepped",
    "Freeze the parameters no optimizer steps",
    (
        "Every backward computes gradients for parameters that no optimizer updates.",
        "requires_grad_(False) skips them: the backward computes only what is stepped.",
    ),
    "https://pytorch.org/tutorials/beginner/finetuning_torchvision_models_tutorial.html",
    freeze_unstepped,
)
RULES = (unstepped_params,)
