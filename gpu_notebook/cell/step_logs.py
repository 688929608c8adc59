"""The ``self.log`` / ``self.log_dict`` calls of the ``training_step`` of the LightningModule the
cell's ``trainer.fit`` fits, read for a gate that runs them every N steps
(``fixes/codemods_framework.gate_training_log``): which calls a gate changes only in how often
they run, and why not for the others, with the line to act on.

Lightning runs each call in full on every step (its checks, the value's detach, the result
collection's update, ``sync_dist``'s reduction) whatever ``log_every_n_steps`` says; the logger
writes the step's metrics where ``_LoggerConnector.should_update_logs`` holds:
``(_batches_that_stepped + 1) % log_every_n_steps == 0``, read after the optimizer step.
Under automatic optimization ``self.global_step`` (optimizer steps taken) equals
``_batches_that_stepped`` while ``training_step`` runs (both count stepped batches, neither
resets per epoch), so ``(self.global_step + 1) % N == 0`` with ``N == log_every_n_steps`` runs
the calls on the very steps the logger writes: those rows are unchanged.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from gpu_notebook.cell.hooks import FittedTrainer, bound_once_before, fitted_trainer
from gpu_notebook.cell.names import dotted, keyword_value, literal_of, method_of
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.cell.words import MODULE_LOG_METHODS

# Calls that compute a value and change nothing (tensor reductions, conversions): a logged
# value made by them can stop being made on the gated steps. Any other call in the log call's
# arguments (``self.acc(out, y)``: a torchmetrics Metric updates its state) is refused.
PURE_METHODS = frozenset(
    [
        "detach",
        "item",
        "mean",
        "sum",
        "float",
        "double",
        "half",
        "cpu",
        "clone",
        "std",
        "var",
        "norm",
        "max",
        "min",
        "values",
        "keys",
        "items",
        "argmax",
        "argmin",
        "softmax",
        "log_softmax",
        "abs",
        "sqrt",
        "exp",
        "log",
        "pow",
        "clamp",
        "clamp_min",
        "clamp_max",
        "square",
        "numel",
        "size",
        "to",
        "tolist",
        "sigmoid",
    ]
)
# Functions of these modules (by the name the cell calls them), but an in-place one (``_``).
PURE_MODULES = frozenset({"torch", "F", "math", "np", "numpy"})
# Which of them change something (a file, the RNG, another process) or wait on the device.
IMPURE_PARTS = frozenset({"save", "load", "manual_seed", "seed", "distributed", "cuda", "random"})
PURE_BUILTINS = frozenset(
    ["float", "int", "len", "round", "abs", "dict", "min", "max", "sum", "bool", "str"]
)


@dataclass(frozen=True)
class StepLog:
    """One ``self.log``/``self.log_dict`` call of ``training_step``."""

    line: int
    why: str | None  # None: a gate changes only how often it runs
    node: ast.Call | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TrainingLogs:
    """The fitted module's ``training_step`` log calls, the period to gate them at, or why none
    can be gated (``why``)."""

    owner: str  # the module's class (empty: not found)
    line: int  # its training_step's def line, else the line to act on
    why: str | None
    every: int = 0  # the gate's period: the Trainer's log_every_n_steps where it is 2 or more
    trainer: FittedTrainer | None = None  # its log_every_n_steps raised to ``every`` where set
    raise_every: bool = False  # the Trainer writes every step: log_every_n_steps=every too
    logs: tuple[StepLog, ...] = ()

    def gate(self) -> str:
        return f"if (self.global_step + 1) % {self.every or 50} == 0:"


def training_logs(tree: CellTree, every: int = 50) -> TrainingLogs:
    """Read the fitted module's training_step log calls (``every``: the period where the
    Trainer's logger writes every step)."""
    fitted = fitted_trainer(tree)
    if fitted.why is not None:
        return TrainingLogs("", fitted.line, fitted.why)
    fit = next(c for c in tree.calls() if method_of(c) == "fit" and tree.in_cell(c))
    owner = _module_class(tree, fit)
    if isinstance(owner, str):
        return TrainingLogs("", tree.line_of(fit), owner)
    name = owner.name
    steps = [f for f in owner.body if isinstance(f, Function) and f.name == "training_step"]
    if len(steps) != 1:
        return TrainingLogs(
            name, tree.line_of(owner), f"{name} (line {tree.line_of(owner)}) defines "
            f"training_step {len(steps)} times: gate its log calls where the one Lightning "
            "calls is defined"
        )  # fmt: skip
    step = steps[0]
    at = tree.line_of(step)
    manual = _manual(owner)
    if manual is not None:
        return TrainingLogs(
            name, at, f"line {tree.line_of(manual)} sets automatic_optimization=False: "
            "self.global_step moves inside training_step, so no gate lines up with the logger's "
            "writes; gate the calls by your own step count"
        )  # fmt: skip
    monitored = _monitored_here(tree, owner, step)
    if monitored is not None:
        return TrainingLogs(name, at, monitored)
    written = fitted.log_every
    if not isinstance(written, int) or isinstance(written, bool):
        return TrainingLogs(
            name, fitted.line, f"line {fitted.line}: log_every_n_steps is not a number here; "
            "gate the log calls under `if (self.global_step + 1) % N == 0:` with N its value"
        )  # fmt: skip
    if written == 0 and not fitted.logger_off:
        return TrainingLogs(
            name, fitted.line, f"log_every_n_steps=0 (line {fitted.line}): the logger writes "
            "no step's metrics; drop the training_step log calls the bar does not need"
        )  # fmt: skip
    period = written if written >= 2 else every
    logs = tuple(_read(tree, step, node, period) for node in _log_calls(step))
    if not logs:
        return TrainingLogs(name, at, f"{name}.training_step (line {at}) calls no self.log")
    return TrainingLogs(name, at, None, period, fitted, written < 2 and not fitted.logger_off, logs)


def _module_class(tree: CellTree, fit: ast.Call) -> ast.ClassDef | str:
    """The class of the module ``fit`` is handed (``Net()``, or a name bound once at the top
    level to ``Net(...)`` before it), defined once in the cell; else why not."""
    line = tree.line_of(fit)
    given = fit.args[0] if fit.args else keyword_value(fit, "model")
    if isinstance(given, ast.Name):
        bound = bound_once_before(tree, given.id, line)
        if bound is not None:
            given = bound
        else:
            return (
                f"line {line} fits `{given.id}`, which the cell does not bind once, at its top "
                "level, to its module class's call"
            )
    if not (isinstance(given, ast.Call) and isinstance(given.func, ast.Name)):
        return f"line {line}: the module it fits is not made in this cell by its class's call"
    cls_name = given.func.id
    classes = [
        c
        for c in ast.walk(tree.tree)
        if isinstance(c, ast.ClassDef) and c.name == cls_name and tree.in_cell(c)
    ]
    if not classes:
        return (
            f"line {line} fits what {cls_name}(...) makes, no class this cell defines: gate the "
            "self.log calls of its training_step where its class is defined"
        )
    if len(classes) != 1:
        return (
            f"line {line} fits a {cls_name}, which this cell defines {len(classes)} times: gate "
            "the self.log calls of its training_step where it is defined"
        )
    return classes[0]


def _manual(owner: ast.ClassDef) -> ast.AST | None:
    for node in ast.walk(owner):
        if isinstance(node, ast.Assign) and any(
            dotted(t) == "self.automatic_optimization" for t in node.targets
        ):
            return node
    return None


def _monitored_here(tree: CellTree, owner: ast.ClassDef, step: Function) -> str | None:
    """Why a gate would change what a callback or scheduler reads (``monitor=`` of a key that
    ``training_step`` may log: between the gated steps it would read an older value)."""
    elsewhere = {
        literal_of(c.args[0])
        for fn in owner.body
        if isinstance(fn, Function) and fn is not step
        for c in _log_calls(fn)
        if c.args
    }
    for node in ast.walk(tree.tree):
        values: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Call):
            values = [(node, k.value) for k in node.keywords if k.arg == "monitor"]
        elif isinstance(node, ast.Dict):
            values = [
                (node, v)
                for k, v in zip(node.keys, node.values, strict=True)
                if k is not None and literal_of(k) == "monitor"
            ]
        for where, value in values:
            key = literal_of(value)
            if not isinstance(key, str) or key not in elsewhere:
                return (
                    f"line {tree.line_of(where)} monitors {key!r} (monitor=): a callback or "
                    "scheduler reads the last logged value, which a gate would leave older "
                    "between the gated steps; gate only the training_step calls it does not read"
                )
    return None


def _log_calls(fn: Function) -> list[ast.Call]:
    return [
        c
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
        and method_of(c) in MODULE_LOG_METHODS
        and isinstance(c.func, ast.Attribute)
        and isinstance(c.func.value, ast.Name)
        and c.func.value.id == "self"
    ]


def _read(tree: CellTree, step: Function, call: ast.Call, every: int) -> StepLog:
    line = tree.line_of(call)
    gate = f"`if (self.global_step + 1) % {every} == 0:`"
    placed = _placement(tree, step, call, gate)
    if placed is not None:
        return StepLog(line, f"line {line}: self.log {placed}", call)
    if any(k.arg is None for k in call.keywords):
        return StepLog(line, f"line {line}: the log call takes **kwargs; put it under {gate}")
    on_epoch = keyword_value(call, "on_epoch")
    if on_epoch is not None and literal_of(on_epoch) is not False:
        return StepLog(
            line, f"line {line} logs with on_epoch=True: the epoch's aggregate needs every "
            f"step's value; keep it every step, or log the step value alone under {gate}", call
        )  # fmt: skip
    on_step = keyword_value(call, "on_step")
    if on_step is not None and literal_of(on_step) is not True:
        return StepLog(
            line, f"line {line} logs with on_step other than True: an epoch aggregate needs "
            "every step's value; keep it every step", call
        )  # fmt: skip
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        impure = _impure(arg)
        if impure is not None:
            return StepLog(
                line, f"line {line}: its arguments {impure}, which a gate would skip on the "
                f"other steps; compute the value on its own line above (`value = ...`), then "
                f"put the log call alone under {gate}", call
            )  # fmt: skip
    return StepLog(line, None, call)


def _placement(tree: CellTree, step: Function, call: ast.Call, gate: str) -> str | None:
    """Why the call is not a statement of training_step's own body (None: it is)."""
    for stmt in step.body:
        if isinstance(stmt, ast.Expr) and stmt.value is call:
            return None
    for node in ast.walk(step):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and any(
            n is call for n in ast.walk(node)
        ):
            return (
                f"runs inside a loop (line {tree.line_of(node)}): each pass logs its own key or "
                f"value; put the loop itself under {gate} where it only logs"
            )
    return (
        "is not a statement of training_step's own body (in a block or an expression): put "
        f"that statement under {gate} yourself"
    )


def _impure(node: ast.AST) -> str | None:
    """What in a logged expression does more than compute the value (None: nothing)."""
    for n in ast.walk(node):
        if isinstance(n, ast.NamedExpr):
            return f"bind {dotted(n.target) or 'a name'} (:=)"
        if isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom)):
            return "await or yield"
        if isinstance(n, ast.Call):
            func = n.func
            if isinstance(func, ast.Attribute) and func.attr in PURE_METHODS:
                continue
            if isinstance(func, ast.Name) and func.id in PURE_BUILTINS:
                continue
            name = dotted(func) or ""
            parts = name.split(".")
            if (
                parts[0] in PURE_MODULES
                and not name.endswith("_")
                and not IMPURE_PARTS.intersection(parts)
            ):
                continue  # torch.stack(...), F.cross_entropy(...): not torch.save(...)
            return f"call {dotted(func) or 'a function'}(...)"
    return None
