"""The user's own statements in the methods a framework calls on every training step.

Lightning calls a LightningModule's ``training_step`` and its ``on_train_batch_start|end``,
``on_before_backward``... and each Callback's hooks of the same names on every batch; the HF
Trainer calls a subclass's ``compute_loss`` / ``training_step`` and each TrainerCallback's
``on_step_begin|end``... on every step. The cell's loop is the framework's (``trainer.fit``):
the work the user wrote per step lives in those methods, not in a loop body. Read on the cell's
:mod:`ast` tree: a class whose bases (or a cell base's, transitively) include a framework
class, and its per-step methods by name.

In a method that runs the model (``training_step``, ``compute_loss``) the statements before the
first one that calls it (``self.net(x)``, ``model(**inputs)``, ``super().compute_loss(...)``)
work on the batch ("input"); in a hook, every statement that is not logging (named by the
logging rules) nor under an ``if`` (some steps only) is the hook's own work: "ema" where it
updates an averaged copy of the parameters in place, else "host".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.cell.words import LOG_PREFIXES, MODULE_LOG_METHODS, last

Framework = Literal["lightning", "transformers"]

# The framework classes a user's class derives from, by the last part of its name.
BASES: dict[str, Framework] = {
    "LightningModule": "lightning",
    "Callback": "lightning",
    "Trainer": "transformers",
    "Seq2SeqTrainer": "transformers",
    "SFTTrainer": "transformers",
    "TrainerCallback": "transformers",
}
# The methods each framework calls once a step (or a batch), and whether they run the model.
_MODEL_METHODS = frozenset({"training_step", "compute_loss"})
PER_STEP: dict[Framework, frozenset[str]] = {
    "lightning": frozenset({
        "training_step", "on_train_batch_start", "on_train_batch_end", "on_before_backward",
        "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad",
    }),
    "transformers": frozenset({
        "compute_loss", "training_step", "on_step_begin", "on_step_end", "on_substep_end",
        "on_pre_optimizer_step", "on_optimizer_step",
    }),
}  # fmt: skip
# In-place updates of an averaged copy (``ema_p.mul_(d).add_(p, alpha=1 - d)``, ``lerp_``).
_AVERAGING = frozenset({"mul_", "lerp_", "add_", "copy_", "_foreach_lerp_", "_foreach_mul_"})
_BACKWARD = frozenset({"backward", "manual_backward", "forward"})
_PRINTS = frozenset({"print", "pprint"})

Kind = Literal["input", "ema", "host"]


@dataclass(frozen=True)
class StepMethodWork:
    """Statements of one per-step method (``qualname``: ``Lit.training_step``) of ``framework``
    that run outside the model, and their kind."""

    qualname: str
    framework: Framework
    kind: Kind
    statements: tuple[ast.stmt, ...]


def _framework_of(
    cls: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: frozenset[str]
) -> Framework | None:
    for base in cls.bases:
        name = last(dotted(base) or "")
        if name in BASES:
            return BASES[name]
        if name in classes and name not in seen:
            found = _framework_of(classes[name], classes, seen | {name})
            if found is not None:
                return found
    return None


def _calls(node: ast.AST) -> list[ast.Call]:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call)]


def _runs_model(stmt: ast.stmt, fn: Function, own_methods: frozenset[str]) -> bool:
    """``stmt`` calls the model: ``self(x)``, ``self.net(x)`` (an attribute, not a method of the
    class), an argument called (``model(**inputs)``), ``super().compute_loss(...)``, a
    backward."""
    args = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]} - {"self"}
    for call in _calls(stmt):
        func = call.func
        if isinstance(func, ast.Name) and (func.id == "self" or func.id in args):
            return True
        if isinstance(func, ast.Attribute):
            if func.attr in _BACKWARD or func.attr in _MODEL_METHODS:
                return True
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id == "self" and func.attr not in own_methods:
                return True
    return False


def _logging(stmt: ast.stmt) -> bool:
    for call in _calls(stmt):
        name = dotted(call.func) or ""
        if last(name) in MODULE_LOG_METHODS or name in _PRINTS or name.startswith(LOG_PREFIXES):
            return True
    return False


def _works(stmt: ast.stmt) -> bool:
    """A statement that does work: a call or a comprehension in it, not under an ``if``."""
    if isinstance(stmt, ast.If | ast.Return | ast.Try | ast.With):
        return False
    return any(
        isinstance(n, ast.Call | ast.ListComp | ast.DictComp | ast.SetComp | ast.GeneratorExp)
        for n in ast.walk(stmt)
    )


def _averages(stmt: ast.stmt) -> bool:
    """A loop over parameters (or a state dict) whose body updates in place: an EMA by hand."""
    if not isinstance(stmt, ast.For):
        return any(
            (dotted(c.func) or "").endswith(("update_parameters", "_foreach_lerp_"))
            for c in _calls(stmt)
        )
    text = ast.unparse(stmt.iter)
    over_params = "parameters" in text or "state_dict" in text or "ema" in text.lower()
    return over_params and any(
        isinstance(c.func, ast.Attribute) and c.func.attr in _AVERAGING
        for s in stmt.body
        for c in _calls(s)
    )


def _flat(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with each ``with`` block's statements in its place (``with torch.no_grad():``
    runs its body every time)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.extend(_flat(stmt.body) if isinstance(stmt, ast.With) else [stmt])
    return out


def step_method_work(tree: CellTree) -> list[StepMethodWork]:
    """Each per-step method of the cell's framework classes with statements outside the model,
    in the order the cell defines them."""
    classes = {c.name: c for c in ast.walk(tree.tree) if isinstance(c, ast.ClassDef)}
    out: list[StepMethodWork] = []
    for cls in classes.values():
        framework = _framework_of(cls, classes, frozenset({cls.name}))
        if framework is None:
            continue
        own = frozenset(n.name for n in cls.body if isinstance(n, Function))
        for fn in cls.body:
            if not (isinstance(fn, Function) and fn.name in PER_STEP[framework]):
                continue
            body = _flat(fn.body)
            if fn.name in _MODEL_METHODS:
                model = [i for i, s in enumerate(body) if _runs_model(s, fn, own)]
                if not model:
                    continue
                picked = [s for s in body[: model[0]] if _works(s) and not _logging(s)]
                kind: Kind = "input"
            else:
                picked = [s for s in body if _works(s) and not _logging(s)]
                kind = "ema" if any(_averages(s) for s in picked) else "host"
            if picked:
                out.append(StepMethodWork(f"{cls.name}.{fn.name}", framework, kind, tuple(picked)))
    return sorted(out, key=lambda w: tree.line_of(w.statements[0]))


def per_step_methods(tree: CellTree) -> list[Function]:
    """The cell's framework classes' methods the framework calls once a step (a
    LightningModule's ``training_step``, a Trainer subclass's ``compute_loss``)."""
    classes = {c.name: c for c in ast.walk(tree.tree) if isinstance(c, ast.ClassDef)}
    out: list[Function] = []
    for cls in classes.values():
        framework = _framework_of(cls, classes, frozenset({cls.name}))
        if framework is not None:
            out.extend(
                fn for fn in cls.body if isinstance(fn, Function) and fn.name in PER_STEP[framework]
            )
    return out
