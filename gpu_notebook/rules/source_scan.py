"""Static facts about a cell's source for the rules: loaders, loops, per-step syncs and logs, flags.

Read with :mod:`ast` (line numbers and a read-only walk are all the rules need; the fixes package
does the libcst rewriting). IPython lines (``%time``, ``!ls``, ``x = !cmd``, ``obj?``) are hidden
behind placeholders by :func:`gpu_notebook.fixes.ipython_syntax.protect`, the same door the fixes
use, and every line number is mapped back to the cell as written.

Line numbers: 1-based lines of the cell as the notebook shows it. ``Run.cell_source`` is the body
*below* the ``%%gpucheck`` line, so ``scan_source(run.cell_source, line_offset=1)`` numbers the
lines like the traceback and the stack profile do (the magic line is line 1).

Everything here is a heuristic over names, never a type check: a name is a "model" because the
cell calls module methods on it or builds it from ``nn.*``; a value is "a tensor made in the loop"
because the loop assigns it. The rules say "likely" where that matters, and live objects
(:mod:`gpu_notebook.rules.live_objects`) confirm what exists in the namespace.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.fixes.ipython_syntax import NotPythonCell, protect
from gpu_notebook.rules.live_objects import LiveFacts

SyncKind = Literal[
    "item", "cpu", "numpy", "tolist", "float", "synchronize", "print-tensor", "log-tensor",
    "fstring-tensor",
]
LogKind = Literal["print", "logger", "tracker", "progress"]
ValidationKind = Literal["eval", "no_grad", "val-loop", "val-call"]

# Same placeholder text as gpu_notebook.fixes.ipython_syntax writes (one line per IPython
# construct); tests/test_rules.py checks the line mapping on a multi-line magic.
_PLACEHOLDER = re.compile(r"^[ \t]*__gpucheck_ipy_(\d+)__\(\)[ \t]*$")

_GRAD_MODES = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})
_OPTIMIZERS = frozenset(
    {"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop",
     "Rprop", "ASGD", "LBFGS", "SparseAdam", "Adafactor"}
)  # fmt: skip
_MODULE_METHODS = frozenset(
    {"parameters", "named_parameters", "train", "eval", "state_dict", "load_state_dict",
     "modules", "children", "named_modules", "register_forward_hook"}
)  # fmt: skip
_NN_NOT_MODULES = frozenset({"functional", "utils", "init", "Parameter", "parameter", "parallel"})
_LOG_PREFIXES = ("logging.", "logger.", "log.", "wandb.", "mlflow.", "neptune.", "comet")
_TRACKER_METHODS = frozenset(
    {"log", "log_metric", "log_metrics", "add_scalar", "add_scalars", "add_histogram",
     "add_image", "log_dict"}
)  # fmt: skip
_PROGRESS_METHODS = frozenset({"set_postfix", "set_postfix_str", "set_description", "write"})
_VAL_NAME = re.compile(r"(^|_)(val|valid|validation|eval|test|dev|holdout)(_|$|loader|set|data|dl)", re.I)
_VAL_CALL = re.compile(r"^(validate|evaluate|eval_|run_val|run_eval|validation|test_epoch|val_)", re.I)
# Values that are plain Python numbers once assigned: reading them later costs no sync.
_HOST_VALUE_CALLS = frozenset({"len", "range", "int", "float", "str", "round", "time", "perf_counter", "monotonic"})
_DTYPE_WORDS = frozenset(
    {"float", "float16", "half", "bfloat16", "float32", "float64", "double", "int", "int8",
     "int16", "int32", "int64", "long", "uint8", "bool"}
)  # fmt: skip


@dataclass(frozen=True)
class SourceLine:
    """One line of the cell a rule can point at."""

    line: int  # 1-based line of the notebook cell
    text: str  # the line, stripped
    kind: str  # what was found there: "item", "print", "eval", ...
    gated: bool = False  # behind an ``if`` within its step loop (or innermost loop): some steps only
    loop_line: int | None = None  # the innermost loop holding it
    step_loop_line: int | None = None  # the training step loop holding it (nested loops included)
    # The value read decides what the loop does (an if/while test, directly or through a name
    # assigned from it): ``if loss.item() < 0.1: break``, an early stop. It cannot be skipped.
    needed: bool = False


@dataclass(frozen=True)
class LoaderCall:
    """A ``DataLoader(...)`` call of the cell and the arguments it sets (literals only)."""

    line: int
    name: str | None  # the variable it is assigned to
    num_workers: int | None  # 0 when absent (torch's default); None when not a literal
    pin_memory: bool | None  # False when absent; None when not a literal
    persistent_workers: bool | None
    batch_size: int | None  # 1 when absent; None when not a literal
    dataset: str | None  # source text of the dataset argument
    opaque: bool  # **kwargs or more than 5 positional arguments: the literals may lie


@dataclass(frozen=True)
class OptimizerCall:
    line: int
    name: str | None
    cls: str  # "AdamW"
    fused: bool | None  # literal value of fused=..., None when absent or not a literal
    foreach: bool | None


@dataclass(frozen=True)
class LoopFacts:
    line: int
    iterates: tuple[str, ...]  # names the loop iterates (``loader`` in enumerate(loader))
    trains: bool  # calls .backward() in its body
    innermost_training: bool  # trains and holds no other loop that trains
    calls_model: bool
    under_grad_mode: bool  # inside/holding torch.no_grad(), inference_mode(), or a decorated function
    is_while: bool = False
    # Module calls made once per iteration with autograd on (nested loops, comprehensions and
    # no_grad blocks left out): the training forwards of one step, loss modules included.
    grad_module_calls: int = 0


@dataclass(frozen=True)
class SourceFacts:
    """What the cell's source says, for the rules. Empty when the cell does not parse."""

    parsed: bool
    parse_error: str | None = None
    line_offset: int = 0
    ipython_lines: int = 0
    loaders: tuple[LoaderCall, ...] = ()
    optimizers: tuple[OptimizerCall, ...] = ()
    loops: tuple[LoopFacts, ...] = ()
    model_names: frozenset[str] = frozenset()
    names_read: frozenset[str] = frozenset()
    syncs: tuple[SourceLine, ...] = ()  # per-loop reads of device values
    logging: tuple[SourceLine, ...] = ()  # logging calls in loops that read no tensor
    validation: tuple[SourceLine, ...] = ()  # validation work inside a training loop
    blocking_copies: tuple[SourceLine, ...] = ()  # .to(device)/.cuda() in loops, non_blocking off
    non_blocking_copies: int = 0
    inference_loops: tuple[SourceLine, ...] = ()  # loops calling a model without grad mode off
    eval_called: frozenset[str] = frozenset()  # names .eval() is called on
    autocast: bool = False
    grad_scaler: bool = False
    compiled: bool = False
    cudnn_benchmark: bool | None = None  # literal assigned in the cell; None: not set here
    tf32: bool | None = None  # allow_tf32 / set_float32_matmul_precision in the cell
    data_parallel: tuple[SourceLine, ...] = ()
    ddp: bool = False
    convolutions: bool = False  # nn.Conv*/F.conv* named in the cell
    # ``name = Something(...)`` in the cell: name -> the called class or function's last name.
    constructed: tuple[tuple[str, str], ...] = ()
    # Objects behind the names the cell reads (filled by run_rules when it has the namespace).
    live: LiveFacts = dataclasses.field(default_factory=LiveFacts)

    def constructor_of(self, name: str) -> str | None:
        return next((c for n, c in reversed(self.constructed) if n == name), None)

    def training_loops(self) -> tuple[LoopFacts, ...]:
        return tuple(loop for loop in self.loops if loop.innermost_training)

    def per_step(self, lines: Iterable[SourceLine]) -> tuple[SourceLine, ...]:
        """The lines that run on every step (not behind an ``if``)."""
        return tuple(line for line in lines if not line.gated)


def scan_source(source: str, *, line_offset: int = 0, model_names: Iterable[str] = ()) -> SourceFacts:
    """Scan a cell. ``line_offset`` is added to every line (1 for ``Run.cell_source``).

    ``model_names`` adds names known to hold modules (from the live namespace). Never raises on
    user code: a cell that is not Python comes back with ``parsed=False`` and the reason.
    """
    try:
        cell = protect(source)
    except NotPythonCell as exc:
        return SourceFacts(parsed=False, parse_error=str(exc), line_offset=line_offset)
    lines = cell.code.splitlines()
    mapping: list[int] = []
    original = 1 + (1 if cell.magic_line else 0)
    for text in lines:
        mapping.append(original + line_offset)
        match = _PLACEHOLDER.match(text)
        original += len(cell.originals[int(match.group(1))]) if match else 1
    try:
        tree = ast.parse(cell.code)
    except SyntaxError as exc:
        where = mapping[exc.lineno - 1] if exc.lineno and 0 < exc.lineno <= len(mapping) else None
        return SourceFacts(
            parsed=False,
            parse_error=f"not valid Python (line {where}): {exc.msg}",
            line_offset=line_offset,
        )
    return _Scanner(tree, lines, mapping, frozenset(model_names)).facts(
        line_offset, len(cell.originals)
    )


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def dotted(node: ast.AST | None) -> str | None:
    """``torch.utils.data.DataLoader`` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _last(name: str | None) -> str:
    return "" if name is None else name.rsplit(".", 1)[-1]


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _receiver(call: ast.Call) -> ast.expr | None:
    return call.func.value if isinstance(call.func, ast.Attribute) else None


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _literal(node: ast.AST | None) -> object:
    """The value of a literal constant, else the ``_NOT_LITERAL`` marker."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return -value if isinstance(value, (int, float)) else _NOT_LITERAL
    return _NOT_LITERAL


_NOT_LITERAL = object()


def _int_or_none(node: ast.AST | None, default: int | None) -> int | None:
    if node is None:
        return default
    value = _literal(node)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool_or_none(node: ast.AST | None, default: bool | None) -> bool | None:
    if node is None:
        return default
    value = _literal(node)
    return value if isinstance(value, bool) else None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_MODEL_WORDS = frozenset({"model", "net", "network", "encoder", "decoder", "backbone", "classifier"})


def _model_like(name: str) -> bool:
    """``model``, ``net``, ``self.encoder``, ``teacher_model``: names people give modules."""
    part = _last(name).lower()
    return part in _MODEL_WORDS or part.endswith(("model", "_net"))


def _is_grad_mode_call(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        name = _last(dotted(node.func))
        if name == "set_grad_enabled":
            return _literal(node.args[0]) is False if node.args else False
        return name in _GRAD_MODES
    return _last(dotted(node)) in _GRAD_MODES


def _loop_target_names(loop: ast.For | ast.AsyncFor) -> tuple[set[str], set[str]]:
    """(names bound to batch values, names bound to counters) by a ``for`` target."""
    counters: set[str] = set()
    target = loop.target
    it = loop.iter
    if isinstance(it, ast.Call) and dotted(it.func) == "range":
        return set(), _names_in(target)
    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
        counters = _names_in(target.elts[0])
        values: set[str] = set()
        for elt in target.elts[1:]:
            values |= _names_in(elt)
        return values, counters
    return _names_in(target), counters


_IN_PLACE_UPDATES = frozenset({"add_", "sub_", "mul_", "addcmul_", "addcdiv_", "copy_", "zero_", "lerp_", "clamp_"})


def _updates_in_place(block: ast.AST) -> bool:
    """The block updates tensors in place: ``p -= ...``, ``p.data = ...``, ``p.add_(...)``."""
    for node in ast.walk(block):
        if isinstance(node, ast.AugAssign):
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr in ("data", "grad") for t in node.targets
        ):
            return True
        if isinstance(node, ast.Call) and _method(node) in _IN_PLACE_UPDATES:
            return True
    return False


def _iterated_names(expr: ast.expr) -> tuple[str, ...]:
    """``loader`` for ``loader``, ``enumerate(loader)``, ``tqdm(loader, ...)``, ``zip(a, b)``."""
    out: list[str] = []
    stack: list[ast.expr] = [expr]
    while stack:
        node = stack.pop()
        name = dotted(node)
        if name is not None:
            out.append(name)
        elif isinstance(node, ast.Call):
            stack.extend(reversed(node.args))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# The scanner
# --------------------------------------------------------------------------------------------

_Loop = ast.For | ast.AsyncFor | ast.While


class _Scanner:
    def __init__(
        self, tree: ast.Module, lines: list[str], mapping: list[int], live_models: frozenset[str]
    ) -> None:
        self.tree = tree
        self.lines = lines
        self.mapping = mapping
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.models = self._model_names() | live_models
        self.loops: list[_Loop] = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]
        self.loops.sort(key=lambda n: n.lineno)
        self.trains = {id(loop): self._has_backward(loop) for loop in self.loops}
        # The step loops: loops that call .backward() and hold no other loop that does (an
        # epoch loop around them trains too, but runs once per epoch).
        self.step_loops = {
            id(loop)
            for loop in self.loops
            if self.trains[id(loop)]
            and not any(o is not loop and self.trains[id(o)] and self._inside(o, loop) for o in self.loops)
        }
        self.global_no_grad = any(
            isinstance(n, ast.Expr) and _is_grad_mode_call(n.value) and isinstance(n.value, ast.Call)
            and _last(dotted(n.value.func)) == "set_grad_enabled"
            for n in ast.walk(tree)
        )  # fmt: skip

    # ---------------------------------------------------------------- positions

    def line_of(self, node: ast.AST) -> int:
        lineno = getattr(node, "lineno", 1)
        return self.mapping[lineno - 1] if 0 < lineno <= len(self.mapping) else lineno

    def text_of(self, node: ast.AST) -> str:
        lineno = getattr(node, "lineno", 1)
        return self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        current = self.parent.get(node)
        while current is not None:
            yield current
            current = self.parent.get(current)

    def enclosing_loop(self, node: ast.AST) -> _Loop | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)) and node not in (
                getattr(ancestor, "iter", None), getattr(ancestor, "test", None)
            ):
                return ancestor
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                return None
        return None

    def gated(self, node: ast.AST, loop: _Loop) -> bool:
        """True when an ``if`` (or a ternary) sits between ``node`` and its loop."""
        child = node
        for ancestor in self.ancestors(node):
            if ancestor is loop:
                return False
            # The test itself runs every time: `if loss.item() < x: break` reads every step.
            if isinstance(ancestor, (ast.If, ast.IfExp)) and child is not ancestor.test:
                return True
            child = ancestor
        return False

    def statement_of(self, node: ast.AST) -> ast.AST:
        current = node
        for ancestor in self.ancestors(node):
            if isinstance(current, ast.stmt):
                return current
            current = ancestor
        return current

    def _inside(self, node: ast.AST, container: ast.AST) -> bool:
        return any(a is container for a in self.ancestors(node))

    def step_loop_of(self, node: ast.AST) -> _Loop | None:
        """The training step loop around ``node`` (through nested loops, not through defs)."""
        for ancestor in self.ancestors(node):
            if id(ancestor) in self.step_loops and isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
                return ancestor
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                return None
        return None

    def source_line(self, node: ast.AST, kind: str) -> SourceLine:
        loop = self.enclosing_loop(node)
        step_loop = self.step_loop_of(node)
        # Gated relative to the step: `if step % 10 == 0: for p in params: print(p)` is gated.
        reference = step_loop if step_loop is not None else loop
        return SourceLine(
            line=self.line_of(node),
            text=self.text_of(node),
            kind=kind,
            gated=reference is not None and self.gated(node, reference),
            loop_line=self.line_of(loop) if loop is not None else None,
            step_loop_line=self.line_of(step_loop) if step_loop is not None else None,
        )

    # ---------------------------------------------------------------- what names hold

    def _module_classes(self) -> set[str]:
        classes: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = dotted(base) or ""
                    if "Module" in name or _last(name) in classes:
                        classes.add(node.name)
        return classes

    def _is_module_constructor(self, value: ast.AST, classes: set[str]) -> bool:
        # model = Net().to(device) / nn.Sequential(...) / torchvision.models.resnet18()
        while isinstance(value, ast.Call) and _method(value) in ("to", "cuda", "train", "eval", "half"):
            value = _receiver(value) or value
            if not isinstance(value, ast.Call):
                return False
        if not isinstance(value, ast.Call):
            return False
        name = dotted(value.func) or ""
        parts = name.split(".")
        if parts[-1] in classes:
            return True
        if len(parts) >= 2 and parts[-2] == "nn" and parts[-1] not in _NN_NOT_MODULES and parts[-1][:1].isupper():
            return True
        return parts[-1] in ("from_pretrained", "create_model") or ".models." in name

    def _model_names(self) -> set[str]:
        classes = self._module_classes()
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                called = dotted(node.func)
                if called is not None and _model_like(called):
                    names.add(called)  # model(x), self.net(x): named like a module, called like one
                if _method(node) in _MODULE_METHODS:
                    name = dotted(_receiver(node))
                    if name is not None:
                        names.add(name)
            elif isinstance(node, ast.Assign) and self._is_module_constructor(node.value, classes):
                for target in node.targets:
                    name = dotted(target)
                    if name is not None:
                        names.add(name)
        return names

    def _has_backward(self, node: ast.AST) -> bool:
        for child in ast.walk(node):
            if isinstance(child, ast.Call) and (
                _method(child) == "backward" or dotted(child.func) == "torch.autograd.backward"
            ):
                return True
        return False

    def _grad_off_at(self, node: ast.AST) -> bool:
        """True when ``node`` runs with autograd off: a grad-mode ``with``, decorator, or global."""
        if self.global_no_grad:
            return True
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.With, ast.AsyncWith)) and any(
                _is_grad_mode_call(item.context_expr) for item in ancestor.items
            ):
                return True
            if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _is_grad_mode_call(d) for d in ancestor.decorator_list
            ):
                return True
        return False

    def _under_grad_mode(self, loop: _Loop) -> bool:
        """Every model call of the loop runs with autograd off (or the loop calls no model)."""
        calls = [c for c in ast.walk(loop) if isinstance(c, ast.Call) and dotted(c.func) in self.models]
        if not calls:
            return self._grad_off_at(loop)
        return all(self._grad_off_at(c) for c in calls)

    def _calls_model(self, node: ast.AST) -> bool:
        return any(
            isinstance(c, ast.Call) and dotted(c.func) in self.models for c in ast.walk(node)
        )

    def _batch_values(self, loop: _Loop) -> set[str]:
        """Names that likely hold tensors made in this step: loop targets and assigned values."""
        values: set[str] = set()
        counters: set[str] = set()
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            values, counters = _loop_target_names(loop)
        for node in ast.walk(loop):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                host = self._host_value(node.value)
                for target in targets:
                    names = _names_in(target)
                    if host:
                        counters |= names
                    else:
                        values |= names
        return values - counters

    def _host_value(self, value: ast.AST) -> bool:
        """A value that is a Python number or string already (reading it later is free)."""
        if isinstance(value, (ast.Constant, ast.JoinedStr)):
            return True
        if isinstance(value, ast.Call):
            if _method(value) in ("item", "tolist", "numpy"):
                return True
            return _last(dotted(value.func)) in _HOST_VALUE_CALLS
        if isinstance(value, ast.BinOp):
            return self._host_value(value.left) and self._host_value(value.right)
        return False

    # ---------------------------------------------------------------- the facts

    def facts(self, line_offset: int, ipython_lines: int) -> SourceFacts:
        loops = tuple(self._loop_facts(loop) for loop in self.loops)
        syncs, logging = self._syncs_and_logging()
        return SourceFacts(
            parsed=True,
            line_offset=line_offset,
            ipython_lines=ipython_lines,
            loaders=tuple(self._loaders()),
            optimizers=tuple(self._optimizers()),
            loops=loops,
            model_names=frozenset(self.models),
            names_read=frozenset(
                n.id
                for n in ast.walk(self.tree)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                and not _PLACEHOLDER.match(f"{n.id}()")
            ),
            syncs=syncs,
            logging=logging,
            constructed=tuple(
                (target.id, _last(dotted(node.value.func)))
                for node in ast.walk(self.tree)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and dotted(node.value.func) is not None
                for target in node.targets
                if isinstance(target, ast.Name)
            ),
            validation=tuple(self._validation()),
            blocking_copies=tuple(self._copies(blocking=True)),
            non_blocking_copies=len(self._copies(blocking=False)),
            inference_loops=tuple(
                SourceLine(self.line_of(loop), self.text_of(loop), "inference-loop")
                for loop, facts in zip(self.loops, loops, strict=True)
                if facts.calls_model and not facts.trains and not facts.under_grad_mode
                and not any(self.trains[id(a)] for a in self.ancestors(loop) if id(a) in self.trains)
            ),
            eval_called=frozenset(
                name
                for c in self._calls()
                if _method(c) == "eval" and (name := dotted(_receiver(c))) is not None
            ),
            autocast=any(_last(dotted(c.func)) == "autocast" for c in self._calls()),
            grad_scaler=any(_last(dotted(c.func)) == "GradScaler" for c in self._calls()),
            compiled=self._compiled(),
            cudnn_benchmark=self._flag(("torch.backends.cudnn.benchmark",)),
            tf32=self._tf32(),
            data_parallel=tuple(
                self.source_line(c, "DataParallel")
                for c in self._calls()
                if _last(dotted(c.func)) == "DataParallel"
            ),
            ddp=any(_last(dotted(c.func)) == "DistributedDataParallel" for c in self._calls()),
            convolutions=any(
                re.fullmatch(r"(Conv|ConvTranspose)[123]d|conv[123]d|conv_transpose[123]d", _last(dotted(n)) or "")
                is not None
                for n in ast.walk(self.tree)
                if isinstance(n, (ast.Attribute, ast.Name))
            ),
        )

    def _calls(self) -> Iterator[ast.Call]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                yield node

    def _loop_facts(self, loop: _Loop) -> LoopFacts:
        trains = self.trains[id(loop)]
        iterates = _iterated_names(loop.iter) if isinstance(loop, (ast.For, ast.AsyncFor)) else ()
        return LoopFacts(
            line=self.line_of(loop),
            iterates=iterates,
            trains=trains,
            innermost_training=id(loop) in self.step_loops,
            calls_model=self._calls_model(loop),
            under_grad_mode=self._under_grad_mode(loop),
            is_while=isinstance(loop, ast.While),
            grad_module_calls=self._grad_module_calls(loop.body),
        )

    def _grad_module_calls(self, nodes: Iterable[ast.AST]) -> int:
        count = 0
        for node in nodes:
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.comprehension, ast.Lambda,
                                 ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # runs a number of times per step we cannot know
            if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                _is_grad_mode_call(i.context_expr) for i in node.items
            ):
                continue
            if isinstance(node, ast.Call) and dotted(node.func) in self.models:
                count += 1
            count += self._grad_module_calls(ast.iter_child_nodes(node))
        return count

    def _loaders(self) -> Iterator[LoaderCall]:
        for call in self._calls():
            if _last(dotted(call.func)) != "DataLoader":
                continue
            positional = [a for a in call.args if not isinstance(a, ast.Starred)]
            opaque = any(k.arg is None for k in call.keywords) or len(positional) > 5 or len(
                positional
            ) != len(call.args)
            stmt = self.statement_of(call)
            name = None
            if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
                name = dotted(stmt.targets[0])
            batch = _keyword(call, "batch_size")
            batch_node = batch.value if batch is not None else (positional[1] if len(positional) > 1 else None)
            dataset = _keyword(call, "dataset")
            dataset_node = dataset.value if dataset is not None else (positional[0] if positional else None)
            workers = _keyword(call, "num_workers")
            pin = _keyword(call, "pin_memory")
            persistent = _keyword(call, "persistent_workers")
            yield LoaderCall(
                line=self.line_of(call),
                name=name,
                num_workers=_int_or_none(workers.value if workers else None, None if opaque else 0),
                pin_memory=_bool_or_none(pin.value if pin else None, None if opaque else False),
                persistent_workers=_bool_or_none(
                    persistent.value if persistent else None, None if opaque else False
                ),
                batch_size=_int_or_none(batch_node, None if opaque else 1),
                dataset=ast.unparse(dataset_node) if dataset_node is not None else None,
                opaque=opaque,
            )

    def _optimizers(self) -> Iterator[OptimizerCall]:
        for call in self._calls():
            name = dotted(call.func) or ""
            parts = name.split(".")
            if parts[-1] not in _OPTIMIZERS or (len(parts) > 1 and parts[-2] != "optim"):
                continue
            stmt = self.statement_of(call)
            target = None
            if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1:
                target = dotted(stmt.targets[0])
            fused = _keyword(call, "fused")
            foreach = _keyword(call, "foreach")
            yield OptimizerCall(
                line=self.line_of(call),
                name=target,
                cls=parts[-1],
                fused=_bool_or_none(fused.value if fused else None, None),
                foreach=_bool_or_none(foreach.value if foreach else None, None),
            )

    def _logging_kind(self, call: ast.Call) -> LogKind | None:
        name = dotted(call.func)
        if name in ("print", "display", "pprint"):
            return "print"
        if name is not None and name.startswith(_LOG_PREFIXES):
            return "logger"
        method = _method(call)
        if method in _TRACKER_METHODS:
            return "tracker"
        if (method in _PROGRESS_METHODS and method != "write") or name == "tqdm.write":
            return "progress"
        return None

    def _sync_kind(self, call: ast.Call, values: set[str]) -> SyncKind | None:
        method = _method(call)
        if method is not None and dotted(_receiver(call)) in self.models:
            return None  # model.cpu() / model.to("cpu") moves weights once, not a per-step read
        if method == "item" and not call.args:
            return "item"
        if method in ("cpu", "numpy", "tolist") and not call.args:
            return method  # type: ignore[return-value]  # the three literals of SyncKind
        if method == "to" and call.args:
            text = ast.unparse(call.args[0]).lower()
            if "cpu" in text:
                return "cpu"
        name = dotted(call.func)
        if name in ("float", "int", "bool") and len(call.args) == 1:
            arg = call.args[0]
            return "float" if _names_in(arg) & values and not self._host_value(arg) else None
        if name is not None and _last(name) == "synchronize":
            return "synchronize"
        return None

    def _syncs_and_logging(self) -> tuple[tuple[SourceLine, ...], tuple[SourceLine, ...]]:
        syncs: dict[tuple[int, str], SourceLine] = {}
        logging: dict[int, SourceLine] = {}
        values_of: dict[int, set[str]] = {id(loop): self._batch_values(loop) for loop in self.loops}
        for call in self._calls():
            loop = self.enclosing_loop(call)
            if loop is None:
                continue
            values = values_of[id(loop)]
            kind = self._sync_kind(call, values)
            if kind is not None:
                line = self.source_line(call, kind)
                if self._feeds_control(call, loop):
                    line = dataclasses.replace(line, needed=True)
                syncs.setdefault((line.line, kind), line)
                continue
            log_kind = self._logging_kind(call)
            if log_kind is None:
                continue
            read = set()
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                read |= self._unwrapped_names(arg)
            if read & values:
                # Printing or logging a tensor formats it on the host: a device sync per step.
                tensor_kind: SyncKind = "print-tensor" if log_kind == "print" else "log-tensor"
                line = self.source_line(call, tensor_kind)
                syncs.setdefault((line.line, tensor_kind), line)
            else:
                line = self.source_line(call, log_kind)
                logging.setdefault(line.line, line)
        # An f-string field of a 0-d tensor calls Tensor.__format__ -> .item(): a sync, even
        # when the string is only stored (`msg = f"{loss:.3f}"`) and logged later.
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.FormattedValue):
                continue
            loop = self.enclosing_loop(node)
            if loop is None or not self._unwrapped_names(node.value) & values_of[id(loop)]:
                continue
            line = self.source_line(node, "fstring-tensor")
            if not any(key[0] == line.line for key in syncs):
                syncs[(line.line, "fstring-tensor")] = line
        sync_lines = {s.line for s in syncs.values()}
        return (
            tuple(sorted(syncs.values(), key=lambda s: s.line)),
            tuple(sorted((v for v in logging.values() if v.line not in sync_lines), key=lambda s: s.line)),
        )

    def _feeds_control(self, node: ast.AST, loop: _Loop) -> bool:
        """The value of ``node`` decides a branch of ``loop``: in a test, or through a name."""
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (ast.If, ast.While, ast.IfExp, ast.Assert)) and child is ancestor.test:
                return True
            if ancestor is loop or isinstance(ancestor, ast.stmt):
                break
            child = ancestor
        statement = self.statement_of(node)
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = list(statement.targets)
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            targets = [statement.target]
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if not names:
            return False
        return any(
            isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert)) and _names_in(n.test) & names
            for n in ast.walk(loop)
        )

    def _unwrapped_names(self, node: ast.AST) -> set[str]:
        """Names read by ``node`` that are not already turned into numbers (.item(), float())."""
        if isinstance(node, ast.Call) and (
            _method(node) in ("item", "tolist", "numpy") or dotted(node.func) in ("float", "int", "len", "str")
        ):
            return set()
        if isinstance(node, ast.Name):
            return {node.id}
        names: set[str] = set()
        for child in ast.iter_child_nodes(node):
            # loss.grad_fn / x.shape: attribute reads that are not the tensor's values
            if (
                isinstance(node, ast.Attribute)
                and child is node.value
                and isinstance(child, ast.Name)
                and node.attr in ("shape", "dtype", "device", "size", "ndim", "requires_grad")
            ):
                continue
            names |= self._unwrapped_names(child)
        return names

    def _validation(self) -> Iterator[SourceLine]:
        # Only inside step loops: validation in the epoch loop runs once per epoch, as it should.
        training = [loop for loop in self.loops if id(loop) in self.step_loops]
        found: list[SourceLine] = []
        seen: set[int] = set()
        for loop in training:
            for node in ast.walk(loop):
                if node is loop:
                    continue
                kind: ValidationKind | None = None
                if isinstance(node, ast.Call):
                    if _method(node) == "eval" and dotted(_receiver(node)) in self.models | {"model"}:
                        kind = "eval"
                    elif _VAL_CALL.match(_last(dotted(node.func))):
                        kind = "val-call"
                elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                    _is_grad_mode_call(i.context_expr) for i in node.items
                ) and not _updates_in_place(node):
                    # A no_grad block that updates tensors in place is a manual optimizer step
                    # (`w -= lr * w.grad`), not validation.
                    kind = "no_grad"
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                    _VAL_NAME.search(_last(n)) for n in _iterated_names(node.iter)
                ):
                    kind = "val-loop"
                    node = node.iter  # a comprehension has no line of its own
                if kind is None:
                    continue
                line = self.line_of(node)
                if line in seen:
                    continue
                seen.add(line)
                found.append(
                    SourceLine(
                        line=line,
                        text=self.text_of(node),
                        kind=kind,
                        gated=self.gated(node, loop),
                        loop_line=self.line_of(loop),
                        step_loop_line=self.line_of(loop),
                    )
                )
        yield from sorted(found, key=lambda s: s.line)

    def _copies(self, *, blocking: bool) -> list[SourceLine]:
        out: list[SourceLine] = []
        for call in self._calls():
            method = _method(call)
            if method not in ("to", "cuda") or self.enclosing_loop(call) is None:
                continue
            target = dotted(_receiver(call))
            if target is not None and target in self.models:
                continue
            if method == "to":
                device = _keyword(call, "device")
                arg = device.value if device is not None else (call.args[0] if call.args else None)
                if arg is None:
                    continue
                text = ast.unparse(arg).lower()
                if "cpu" in text or _last(dotted(arg)) in _DTYPE_WORDS:
                    continue
            flag = _keyword(call, "non_blocking")
            is_blocking = flag is None or _literal(flag.value) is not True
            if is_blocking == blocking:
                out.append(self.source_line(call, "copy"))
        return out

    def _compiled(self) -> bool:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and dotted(node.func) in ("torch.compile", "compile") and (
                dotted(node.func) == "torch.compile" or (node.args and dotted(node.args[0]) in self.models)
            ):
                return True
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if dotted(target) == "torch.compile":
                        return True
        return False

    def _flag(self, names: tuple[str, ...]) -> bool | None:
        value: bool | None = None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if dotted(target) in names:
                        literal = _literal(node.value)
                        value = literal if isinstance(literal, bool) else value
        return value

    def _tf32(self) -> bool | None:
        value = self._flag(("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32"))
        for call in self._calls():
            if dotted(call.func) == "torch.set_float32_matmul_precision" and call.args:
                literal = _literal(call.args[0])
                if isinstance(literal, str):
                    value = literal in ("high", "medium")
        return value


def training_loop_lines(facts: SourceFacts) -> tuple[int, ...]:
    """Lines of the innermost training loops (handy for evidence)."""
    return tuple(loop.line for loop in facts.training_loops())


__all__ = [
    "LoaderCall",
    "LoopFacts",
    "OptimizerCall",
    "SourceFacts",
    "SourceLine",
    "dotted",
    "scan_source",
    "training_loop_lines",
]

