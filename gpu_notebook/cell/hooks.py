"""The framework objects a fix edits in the cell (``fixes/codemods_framework``): the user's
callback hooks (a ``TrainerCallback``'s ``on_step_end``, a Lightning ``Callback``'s
``on_train_batch_end``) with the step counter their own arguments name and what a gate at their
top would change besides their work; and the Lightning ``Trainer(...)`` call the cell fits.

The framework hands a hook its step by position: the HF Trainer's ``CallbackHandler.call_event``
calls ``hook(args, state, control, **kwargs)`` (``state.global_step``), Lightning's
``_call_callback_hooks`` calls ``hook(trainer, pl_module, *args)`` (``trainer.global_step``).
A hook that takes them as ``*args``, or a decorated one (a staticmethod shifts them), names no
step the gate could read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from gpu_notebook.cell.names import (
    dotted,
    has_star_kwargs,
    keyword_of,
    keyword_value,
    literal_of,
    method_of,
)
from gpu_notebook.cell.setup import FRAMEWORK_DEFAULTS, is_hf_trainer_call
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.cell.words import MODULE_LOG_METHODS, last

# Where each framework's dispatcher puts the object that holds the step, after ``self``.
_STEP_ARG = {"transformers": 1, "lightning": 0}
# And the object whose settings steer the training (HF's ``control``, Lightning's ``trainer``).
_STEERING_ARG = {"transformers": 2, "lightning": 0}


@dataclass(frozen=True)
class HookDef:
    """One method of a class of the cell, read as a callback hook of ``framework``."""

    qualname: str  # ``WeightNorms.on_step_end``
    line: int  # its ``def`` line, as the cell numbers it
    step: str | None  # the step it is handed, by its own argument's name: ``state.global_step``
    # Why a gate at the top would change what the hook does on the steps it still runs, or
    # the training (None: nothing found).
    changes: str | None
    node: ast.AST | None = field(default=None, compare=False, repr=False)


def hook_defs(tree: CellTree, qualname: str, framework: str) -> list[HookDef]:
    """Every method of the cell's own code (not a function read above it) named ``qualname``
    (``Class.method``; a qualified name's last two parts), read as ``framework``'s hook."""
    cls_name, _, method = qualname.rpartition(".")
    cls_name = cls_name.rpartition(".")[2]
    out = []
    for cls in ast.walk(tree.tree):
        if not (isinstance(cls, ast.ClassDef) and cls.name == cls_name and tree.in_cell(cls)):
            continue
        for fn in cls.body:
            if isinstance(fn, Function) and fn.name == method:
                step = _step_of(fn, framework)
                out.append(
                    HookDef(
                        f"{cls_name}.{method}",
                        tree.line_of(fn),
                        step,
                        _changes(fn, framework) if step is not None else None,
                        fn,
                    )
                )
    return out


def _positional(fn: Function) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]


def _step_of(fn: Function, framework: str) -> str | None:
    """``state.global_step`` / ``trainer.global_step`` by the hook's own argument, or None."""
    at = _STEP_ARG.get(framework)
    names = _positional(fn)[1:]  # after self
    if at is None or fn.decorator_list or len(names) <= at:
        return None
    return f"{names[at]}.global_step"


def _changes(fn: Function, framework: str) -> str | None:
    """What the hook does that a gate would change beyond skipping its work on the other steps:
    it steers the training (sets ``control.should_*`` or ``trainer.should_stop``), returns a
    value the framework reads, carries a value from step to step (``self.n += 1``, an average
    that reads itself), or logs into the epoch's mean (``on_epoch=True``)."""
    names = _positional(fn)[1:]
    at = _STEERING_ARG.get(framework, 0)
    steering = names[at] if len(names) > at else None
    for node in ast.walk(fn):
        line = getattr(node, "lineno", fn.lineno)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                root = _root(target)
                if steering is not None and root == steering:
                    return f"line {line} sets {dotted(target) or root} (it steers the training)"
                kept = _self_attr(target)
                if kept is None:
                    continue
                reads = node.value is not None and kept in _self_attrs(node.value)
                if isinstance(node, ast.AugAssign) or reads:
                    return (
                        f"line {line} carries self.{kept} from step to step: on the steps it "
                        "still runs it would hold another value"
                    )
        elif isinstance(node, ast.Return) and node.value is not None:
            returned = dotted(node.value)
            if not (framework == "transformers" and returned == steering):
                return f"line {line} returns a value the framework reads"
        elif (
            isinstance(node, ast.Call)
            and method_of(node) in MODULE_LOG_METHODS
            and literal_of(keyword_value(node, "on_epoch")) is True
        ):
            return (
                f"line {line} logs with on_epoch=True: the epoch's mean would be over the gated "
                "steps only"
            )
    return None


def _root(node: ast.AST) -> str | None:
    """``control`` of ``control.should_save`` or ``control.flags[0]``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _self_attr(target: ast.AST) -> str | None:
    """``n`` of ``self.n`` or ``self.n[k]`` (a target)."""
    if isinstance(target, ast.Subscript):
        target = target.value
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return target.attr
    return None


def _self_attrs(node: ast.AST) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }


@dataclass(frozen=True)
class FittedTrainer:
    """The Lightning ``Trainer(...)`` call whose ``fit`` the cell runs, where the cell shows it
    is that one; else why not (``why``), with the line to act on."""

    line: int  # the Trainer call's line, else the fit's (0: neither)
    why: str | None  # None: ``node`` is the fitted Trainer's call
    log_every: object = None  # its log_every_n_steps literal (50 where absent; None: not one)
    logger_off: bool = False  # ``logger=False``: no logger writes for the setting to space
    node: ast.AST | None = field(default=None, compare=False, repr=False)


def fitted_trainer(tree: CellTree) -> FittedTrainer:
    """The Trainer call ``trainer.fit(...)`` fits: ``L.Trainer(...).fit(...)``, or the one
    ``trainer = L.Trainer(...)`` at the cell's top level before the fit that binds that name
    (no other binding of it anywhere in the cell)."""
    fits = [c for c in tree.calls() if method_of(c) == "fit" and tree.in_cell(c)]
    if len(fits) != 1:
        return FittedTrainer(
            0,
            "no trainer.fit(...) in this cell"
            if not fits
            else (f"{len(fits)} fit calls (lines {', '.join(str(tree.line_of(f)) for f in fits)})"),
        )
    fit = fits[0]
    line = tree.line_of(fit)
    assert isinstance(fit.func, ast.Attribute)
    receiver = fit.func.value
    call: ast.AST | None = receiver if isinstance(receiver, ast.Call) else None
    if isinstance(receiver, ast.Name):
        call = bound_once_before(tree, receiver.id, line)
        if call is None:
            return FittedTrainer(
                line, f"line {line} fits `{receiver.id}`, which the cell does not bind once, "
                "at its top level, to a Trainer(...) call before it"
            )  # fmt: skip
    if not (
        isinstance(call, ast.Call)
        and last(dotted(call.func)) == "Trainer"
        and not is_hf_trainer_call(call)
    ):
        return FittedTrainer(line, f"line {line}: the Trainer it fits is not made in this cell")
    at = tree.line_of(call)
    if has_star_kwargs(call):
        return FittedTrainer(at, f"line {at}: the Trainer(...) call takes **kwargs")
    given = keyword_of(call, "log_every_n_steps")
    every = (
        literal_of(given.value) if given is not None
        else FRAMEWORK_DEFAULTS[("Trainer", "log_every_n_steps")]
    )  # fmt: skip
    logger = keyword_of(call, "logger")
    off = logger is not None and literal_of(logger.value) is False
    return FittedTrainer(at, None, every if isinstance(every, int) else None, off, call)


# The statements that bind a plain name (``bound_names`` reads their names).
BINDING = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr,
           ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)  # fmt: skip


def bound_once_before(tree: CellTree, name: str, line: int) -> ast.AST | None:
    """The value ``name`` is bound to where the cell binds it once, at its top level, by a
    one-target assignment before ``line`` (``trainer = Trainer(...)`` above ``trainer.fit``);
    None otherwise (bound twice, in a loop or a def, by a with/for/import, or after it)."""
    bindings = [n for n in ast.walk(tree.tree) if isinstance(n, BINDING) and name in bound_names(n)]
    only = bindings[0] if len(bindings) == 1 else None
    if (
        isinstance(only, ast.Assign)
        and only in tree.tree.body
        and tree.line_of(only) < line
        and len(only.targets) == 1
    ):
        return only.value
    return None


def bound_names(node: ast.AST) -> set[str]:
    """The plain names a statement binds (its targets, a def's or import's name)."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.Assign):
        targets: list[ast.AST] = list(node.targets)
    elif isinstance(node, ast.With):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    else:
        targets = [node.target]  # type: ignore[attr-defined]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
