"""What the cell sets up, for the source scanner: loaders, optimizers, host-to-device copies, flags.

Arguments are read as literals only: ``num_workers=n`` with ``n`` a variable is unknown (None),
and a call with ``**kwargs`` is opaque (its absent arguments may be set after all).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from gpu_notebook.cell.facts import FlagSet, LightningLog, LoaderCall, OptimizerCall, SourceLine
from gpu_notebook.cell.names import (
    NOT_LITERAL,
    bool_or_none,
    dotted,
    has_star_kwargs,
    int_or_none,
    keyword_of,
    keyword_value,
    literal_of,
    method_of,
    position,
    receiver_of,
    targets_of,
)
from gpu_notebook.cell.tree import CellTree, Function
from gpu_notebook.cell.words import (
    COPY_METHODS,
    DTYPE_WORDS,
    MATMUL_PRECISION,
    MODULE_LOG_METHODS,
    OTHER_HOOKS,
    TF32_FLAGS,
    is_optimizer_class,
    last,
)


def loaders(tree: CellTree) -> Iterator[LoaderCall]:
    for call in tree.calls():
        if last(dotted(call.func)) != "DataLoader":
            continue
        positional = [a for a in call.args if not isinstance(a, ast.Starred)]
        opaque = has_star_kwargs(call) or len(positional) > 5 or len(positional) != len(call.args)
        batch_node = keyword_value(call, "batch_size") or (
            positional[1] if len(positional) > 1 else None
        )
        dataset_node = keyword_value(call, "dataset") or (positional[0] if positional else None)
        absent = None if opaque else False  # what an absent bool setting reads as
        sampler = keyword_value(call, "sampler") or (positional[3] if len(positional) > 3 else None)
        batches = keyword_value(call, "batch_sampler") or (
            positional[4] if len(positional) > 4 else None
        )
        yield LoaderCall(
            line=tree.line_of(call),
            name=_bound_to(tree, call),
            num_workers=int_or_none(keyword_value(call, "num_workers"), None if opaque else 0),
            pin_memory=bool_or_none(keyword_value(call, "pin_memory"), absent),
            persistent_workers=bool_or_none(keyword_value(call, "persistent_workers"), absent),
            batch_size=int_or_none(batch_node, None if opaque else 1),
            dataset=ast.unparse(dataset_node) if dataset_node is not None else None,
            node=call,
            worker_init_fn=keyword_value(call, "worker_init_fn") is not None,
            shuffle=None  # a sampler of its own decides the order
            if sampler is not None or batches is not None
            else bool_or_none(
                keyword_value(call, "shuffle") or (positional[2] if len(positional) > 2 else None),
                absent,
            ),
            drop_last=bool_or_none(keyword_value(call, "drop_last"), absent),
            sampler=_given(sampler),
            batch_sampler=_given(batches),
            unbatched=isinstance(batch_node, ast.Constant) and batch_node.value is None,
        )


def _given(node: ast.expr | None) -> str | None:
    """Source text of an argument the call passes (None: absent or a literal ``None``)."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return None
    return ast.unparse(node)


def optimizers(tree: CellTree) -> Iterator[OptimizerCall]:
    for call in tree.calls():
        name = dotted(call.func) or ""
        parts = name.split(".")
        if not is_optimizer_class(name):
            continue
        yield OptimizerCall(
            line=tree.line_of(call),
            name=_bound_to(tree, call),
            cls=parts[-1],
            fused=bool_or_none(keyword_value(call, "fused"), None),
            foreach=bool_or_none(keyword_value(call, "foreach"), None),
            node=call,
            one_pass=parts[-1] == "SGD" and _one_pass_sgd(call),
            params_of=_params_of(call),
        )


def _params_of(call: ast.Call) -> str | None:
    """``model`` of ``AdamW(model.parameters())`` (or ``params=[...model.named_parameters()]``)."""
    first = call.args[0] if call.args else next((k.value for k in call.keywords), None)
    for inner in ast.walk(first) if first is not None else ():
        name = dotted(receiver_of(inner)) if isinstance(inner, ast.Call) else None
        if name is not None and method_of(inner) in ("parameters", "named_parameters"):
            return name
    return None


def _bound_to(tree: CellTree, call: ast.Call) -> str | None:
    """``loader`` of ``loader = DataLoader(...)``: the one target the call is assigned to."""
    stmt = tree.statement_of(call)
    one = isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1
    return dotted(stmt.targets[0]) if one else None


def _one_pass_sgd(call: ast.Call) -> bool:
    """SGD(params, lr) with momentum and weight decay absent or a literal 0 (torch's defaults):
    positional arguments past lr or ``**kwargs`` may set them, so they read as not known."""
    if len(call.args) > 2 or has_star_kwargs(call):
        return False
    for name in ("momentum", "weight_decay"):
        given = keyword_of(call, name)
        if given is not None and literal_of(given.value) not in (0, 0.0):
            return False
    return True


def copies(tree: CellTree, *, blocking: bool) -> list[SourceLine]:
    out: list[SourceLine] = []
    for call in tree.calls():
        method = method_of(call)
        if method not in COPY_METHODS or tree.enclosing_loop(call) is None:
            continue
        target = dotted(receiver_of(call))
        if target is not None and target in tree.models:
            continue
        if method == "to":
            arg = keyword_value(call, "device") or (call.args[0] if call.args else None)
            if arg is None:
                continue
            text = ast.unparse(arg).lower()
            if "cpu" in text or last(dotted(arg)) in DTYPE_WORDS:
                continue
        is_blocking = literal_of(keyword_value(call, "non_blocking")) is not True
        if is_blocking == blocking:
            out.append(tree.source_line(call, "copy"))
    return out


def created(tree: CellTree) -> list[tuple[str, ast.AST]]:
    """``name = <call>`` (or ``name: T = <call>``) outside functions, classes and loops; and each
    name of ``a, b = <call>, <call>`` paired with its call (``gen, disc = mlp(...), mlp(...)``:
    unseen gan_two_adam, whose compile fix said gen "is not created in this cell")."""
    out: list[tuple[str, ast.AST]] = []
    assigns = (n for n in ast.walk(tree.tree) if isinstance(n, (ast.Assign, ast.AnnAssign)))
    for node in sorted(assigns, key=position):
        if node.value is None or any(isinstance(a, _SCOPES) for a in tree.ancestors(node)):
            continue
        if isinstance(node.value, ast.Call):
            out += [(name, node) for t in targets_of(node) if (name := dotted(t)) is not None]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and len(target.elts) == len(node.value.elts):
                    out += [
                        (name, node)
                        for t, v in zip(target.elts, node.value.elts, strict=True)
                        if isinstance(v, ast.Call) and (name := dotted(t)) is not None
                    ]
    return out


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While)


def compiled(tree: CellTree) -> bool:
    """The cell compiles: ``torch.compile(...)`` (as a decorator too), ``compile(model)``, a
    model's ``.compile()`` (nn.Module.compile(): the module compiles itself in place), or HF's
    ``TrainingArguments(torch_compile=True)``."""
    for node in ast.walk(tree.tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name == "torch.compile" or (
                name == "compile" and node.args and dotted(node.args[0]) in tree.models
            ):
                return True  # ``@torch.compile(mode=...)`` is such a call too
            if method_of(node) == "compile" and dotted(receiver_of(node)) in tree.models:
                return True
            if last(dotted(node.func)) == "TrainingArguments" and (
                literal_of(keyword_value(node, "torch_compile")) is True
            ):
                return True  # the HF Trainer compiles the model it trains
        elif isinstance(node, Function) and any(
            dotted(decorator) == "torch.compile" for decorator in node.decorator_list
        ):
            return True
    return False


def flags(tree: CellTree) -> list[FlagSet]:
    """Every ``torch.backends.* = value`` and ``torch.set_float32_matmul_precision(...)``."""
    out = []
    for node in ast.walk(tree.tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                name = dotted(target)
                if name is not None and name.startswith("torch.backends."):
                    literal = literal_of(node.value)
                    value = literal if isinstance(literal, bool) else None
                    out.append(FlagSet(name, value, len(node.targets) == 1, node))
        elif isinstance(node, ast.Call) and dotted(node.func) == MATMUL_PRECISION:
            literal = literal_of(node.args[0]) if node.args else None
            value = literal in ("high", "medium") if isinstance(literal, str) else None
            out.append(FlagSet(MATMUL_PRECISION, value, False, node))
    return out


def flag(found: Iterable[FlagSet], names: tuple[str, ...]) -> bool | None:
    """The value the cell leaves the flag ``names`` at (None: not set to a literal here)."""
    value: bool | None = None
    for one in found:
        if one.name in names and one.value is not None:
            value = one.value
    return value


def tf32(found: tuple[FlagSet, ...]) -> bool | None:
    """The TF32 flags' value; a precision call with a literal wins over them."""
    precision = flag(found, (MATMUL_PRECISION,))
    if precision is not None:
        return precision
    return flag(found, TF32_FLAGS)


# Framework settings the overhead and batch rules read: (class, keyword) -> the framework's
# default.
# The default is what holds when the call leaves the keyword out (transformers 4.x/5.x
# TrainingArguments, Lightning 2.x Trainer).
FRAMEWORK_DEFAULTS: dict[tuple[str, str], object] = {
    ("TrainingArguments", "logging_steps"): 500,
    ("TrainingArguments", "disable_tqdm"): False,
    ("Trainer", "log_every_n_steps"): 50,
    ("Trainer", "enable_progress_bar"): True,
    # Lightning's bar as a callback in ``Trainer(callbacks=[...])``: batches between redraws.
    ("TQDMProgressBar", "refresh_rate"): 1,
    ("tqdm", "mininterval"): 0.1,  # seconds between redraws
    # Micro-batches per optimizer step (the bigger-batch fix folds them into one).
    ("Accelerator", "gradient_accumulation_steps"): 1,
    ("TrainingArguments", "gradient_accumulation_steps"): 1,
    ("Trainer", "accumulate_grad_batches"): 1,
}


def framework_settings(tree: CellTree) -> Iterator[tuple[str, str, object]]:
    """(class, keyword, value) for the logging and accumulation settings of
    ``TrainingArguments(...)``, Lightning ``Trainer(...)``, ``Accelerator(...)`` and ``tqdm(...)`` calls: the literal given, the default when the keyword is absent,
    None when it is not a literal (or the call has ``**kwargs``)."""
    for call in tree.calls():
        cls = last(dotted(call.func))
        keys = [k for c, k in FRAMEWORK_DEFAULTS if c == cls]
        if not keys or (cls == "Trainer" and is_hf_trainer_call(call)):
            continue
        # TQDMProgressBar(20): its rate given by position, not read (None), never the default.
        opaque = has_star_kwargs(call) or (cls == "TQDMProgressBar" and bool(call.args))
        for key in keys:
            kw = keyword_of(call, key)
            if kw is not None:
                value = literal_of(kw.value)
                yield cls, key, None if value is NOT_LITERAL else value
            else:
                yield cls, key, None if opaque else FRAMEWORK_DEFAULTS[(cls, key)]


def is_hf_trainer_call(call: ast.Call) -> bool:
    """HF's ``Trainer(model=..., args=...)`` shares Lightning's class name; Lightning's takes
    neither keyword (``fit`` gets the model)."""
    return any(k.arg in ("model", "args", "train_dataset") for k in call.keywords)


def step_logs(tree: CellTree) -> list[LightningLog]:
    """Lightning's log calls: ``self.log(...)`` / ``self.log_dict(...)`` (a LightningModule's),
    and ``pl_module.log(...)`` on the module a Callback's hook is handed (its second argument
    after ``self``, whatever its name; or ``trainer.lightning_module``). Kind "on_step" unless
    the call says ``on_step=False``, "epoch" in a hook that runs off the training step
    (``OTHER_HOOKS``): a call in a step hook, or in a helper, runs on every step."""
    out = []
    for call in tree.calls():
        if method_of(call) not in MODULE_LOG_METHODS:
            continue
        receiver = dotted(receiver_of(call))
        hook = tree.nearest(call, (ast.FunctionDef, ast.AsyncFunctionDef))
        owner = tree.parent.get(hook) if hook is not None else None
        method = hook if isinstance(owner, ast.ClassDef) else None
        module_arg = (
            method.args.args[2].arg
            if method is not None and len(method.args.args) >= 3 and method.name.startswith("on_")
            else None
        )
        # ``self.trainer.lightning_module.log`` is a module's own log.
        callback = receiver is not None and (
            receiver == module_arg
            or (receiver.endswith("trainer.lightning_module") and not receiver.startswith("self."))
        )
        if receiver not in ("self", "self.trainer.lightning_module") and not callback:
            continue
        name = method.name if method is not None else None
        if name in OTHER_HOOKS:
            kind = "epoch"
        else:
            kind = "off_step" if literal_of(keyword_value(call, "on_step")) is False else "on_step"
        out.append(
            LightningLog(
                tree.source_line(call, kind),
                name,
                owner.name if isinstance(owner, ast.ClassDef) else None,
                callback,
            )
        )
    return out
