"""The facts record :func:`gpu_notebook.cell.scan.scan_source` gives the rules.

What the cell's source says, as frozen data: the lines a rule can point at (syncs, logs,
validation, copies), the loaders, optimizers and loops, the flags set. The rules read only this;
how it is found lives in the scanner modules of ``gpu_notebook.cell``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpu_notebook.cell.live import LiveFacts

if TYPE_CHECKING:
    from gpu_notebook.cell.tree import CellTree

SyncKind = Literal[
    "item",
    "cpu",
    "numpy",
    "tolist",
    "float",
    "synchronize",
    "print-tensor",
    "log-tensor",
    "fstring-tensor",
    "bool",  # a branch test on a tensor's truth value (Tensor.__bool__): ``if torch.isnan(loss):``
]
ValidationKind = Literal["eval", "no_grad", "val-loop", "val-call"]


# Reading lines of the k-th function read above the cell start at k * ORIGIN_LINES: apart from
# every line of a cell.
ORIGIN_LINES = 1_000_000


@dataclass(frozen=True)
class Origin:
    """A function of the user's the cell calls, defined before it (``cell.calls``): where, and
    its source as the reading holds it (above the cell, its lines numbered from ``offset``)."""

    filename: str  # its code object's file: another cell's compiled name, or a user's .py file
    function: str  # its name
    cell_number: int | None  # In[N] of the cell that defined it, where IPython numbers it
    in_file: bool  # a user's file (never edited: its fix is a refusal that says the change)
    first_line: int  # the line of its ``def`` (or first decorator) there
    offset: int  # a reading line is ``offset + k`` for its text's line k (never a cell line)
    text: str = dataclasses.field(compare=False, repr=False)  # its source, dedented
    # A class the cell calls a method of (``trainer.fit()``), read whole: ``function`` is its
    # name, ``instance`` the name the cell calls it through.
    instance: str | None = None
    # The cell makes that instance itself (``trainer = Trainer(...)``), so a patched class put
    # above the cell reaches the object it runs; one made earlier keeps the class it had.
    made_here: bool = True
    # A class deriving from a framework's (LightningModule, Dataset, TrainerCallback): the
    # framework calls its methods, and it holds the live objects' own settings.
    framework: bool = False

    def line_there(self, reading_line: int) -> int:
        """The line of its cell or file a reading line is."""
        return self.first_line + reading_line - self.offset - 1


@dataclass(frozen=True)
class SourceLine:
    """One line of the cell a rule can point at."""

    line: int  # 1-based line of the notebook cell
    text: str  # the line, stripped
    kind: str  # what was found there: "item", "print", "eval", ...
    gated: bool = False  # behind an ``if`` within its step (or innermost) loop: some steps only
    # Gated only by tests for CUDA (``if torch.cuda.is_available():``): every step on a GPU,
    # never on the CPU (a CPU run's trace holds none of it).
    cuda_only: bool = False
    loop_line: int | None = None  # the innermost loop holding it
    step_loop_line: int | None = None  # the training step loop holding it (nested loops included)
    # The value read decides what the loop does (an if/while test, directly or through a name
    # assigned from it): ``if loss.item() < 0.1: break``, an early stop. It cannot be skipped.
    needed: bool = False
    # Of a needed read: the branch it decides can end the loop (``break``, ``return``, ``raise``,
    # a ``while`` or ``assert`` test): an early stop. Else it picks work inside the step (``if
    # loss.item() < best: best_state = copy.deepcopy(...)``): a branch, not a stop.
    stops: bool = False
    # A needed read handed straight to host code as an argument (``env.step(a.item())``: an
    # action for a numpy environment): the callee's dotted name. It needs the number every step.
    handed_to: str | None = None
    # A needed read whose value the step's work takes (cell.syncs.feeds_the_step): the name
    # that carries it into the model or the backward, or the model call it is an argument of.
    feeds: str | None = None
    # A read in a function of the cell the step runs through its calls (cell.step_calls): its
    # name as said (``Net.forward``). The value feeds the model's work: read every step.
    called_in: str | None = None
    # Of such a read handed to an API that takes its value on the CPU (``pack_padded_sequence``'s
    # lengths): the line where the step loop moves that value to the device, which it need not.
    keep_on_host: int | None = None
    # A read that is an argument of a logging call (``print(loss.item())``): the line logs too,
    # which the log fix gates (the line is a sync, so it is not among the logging lines).
    logged: bool = False
    # The ast node it came from (cell/parse.py finds the libcst node of the same code, which a
    # fix edits); not part of the fact's value.
    node: ast.AST | None = dataclasses.field(default=None, compare=False, repr=False)
    # Where it is when not in the cell: a function of the user's the cell calls (cell.calls);
    # ``line`` is then the reading's (``Origin.offset`` on), never a line of the cell.
    origin: Origin | None = None
    # The other nodes of the same kind on the line (``a.item() + b.item()``), which a fix edits
    # too; one fact per line and kind.
    others: tuple[ast.AST, ...] = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def cell_line(self) -> int | None:
        """The line of the measured cell it is on (None: in a function the cell calls)."""
        return self.line if self.origin is None else None

    @property
    def line_there(self) -> int:
        """The line of the cell or file it is on, as the user sees it there."""
        return self.line if self.origin is None else self.origin.line_there(self.line)


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
    node: ast.AST | None = dataclasses.field(default=None, compare=False, repr=False)
    worker_init_fn: bool = False  # passed by keyword
    shuffle: bool | None = False  # False when absent; None when not a literal
    drop_last: bool | None = False  # False when absent; None when not a literal
    # Source text of the user's ``sampler=`` / ``batch_sampler=`` (by keyword or position):
    # they choose the indices, and no advice may drop them.
    sampler: str | None = None
    batch_sampler: str | None = None
    # ``batch_size=None`` as a literal: the loader does not batch (no auto-collation): each
    # index its sampler yields goes to the dataset's ``__getitem__`` as it is.
    unbatched: bool = False


@dataclass(frozen=True)
class RemadeLoaderAt:
    """A ``DataLoader(...)`` call made anew on every pass of the loop around the step loop that
    reads it (cell.loops.remade_loaders)."""

    call: LoaderCall
    outer_line: int  # the loop that makes it anew (an epoch loop)
    step_line: int  # the step loop that iterates it
    function: str | None  # the function that builds it, called in the step loop's header


@dataclass(frozen=True)
class OptimizerCall:
    line: int
    name: str | None
    cls: str  # "AdamW"
    fused: bool | None  # literal value of fused=..., None when absent or not a literal
    foreach: bool | None
    node: ast.AST | None = dataclasses.field(default=None, compare=False, repr=False)
    # SGD with no momentum and no weight decay (literally: absent or 0): its unfused update is
    # one add_ a tensor, one pass over the memory already (rules.launch.unfused_optimizer).
    one_pass: bool = False
    # ``model`` of ``AdamW(model.parameters())``: whose parameters it updates (the first
    # ``.parameters()``/``.named_parameters()`` receiver its first argument names).
    params_of: str | None = None


@dataclass(frozen=True)
class FlagSet:
    """``torch.backends.<flag> = value`` in the cell, or a ``torch.set_float32_matmul_precision``
    call (value: True for "high"/"medium", False for another literal)."""

    name: str  # "torch.backends.cudnn.benchmark"
    value: bool | None  # the literal; None when not a bool (or str) literal
    single: bool  # the only target of its assignment (a fix may flip it in place)
    node: ast.AST | None = dataclasses.field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class LightningLog:
    """A call of Lightning's log API: ``self.log`` / ``self.log_dict`` in a LightningModule's
    method, or ``pl_module.log`` on the module a Callback's hook is handed."""

    at: SourceLine  # kind: "on_step" (logged each step), "off_step" (``on_step=False``: still
    # called each step, accumulated for the epoch) or "epoch" (a hook that runs once an epoch or
    # in validation: not on a training step)
    hook: str | None  # the method holding the call (None: not in a method)
    owner: str | None  # that method's class
    callback: bool  # on a Callback hook's module argument (or ``trainer.lightning_module``)


@dataclass(frozen=True)
class LoopFacts:
    line: int
    iterates: tuple[str, ...]  # names the loop iterates (``loader`` in enumerate(loader))
    trains: bool  # calls .backward() in its body
    innermost_training: bool  # trains and holds no other loop that trains
    calls_model: bool
    under_grad_mode: bool  # in or holding no_grad(), inference_mode(), or a decorated def
    node: ast.AST | None = dataclasses.field(default=None, compare=False, repr=False)
    # Names its body passes whole to a call (``loader`` in ``train_one_epoch(model, loader)``).
    hands: tuple[str, ...] = ()
    # The .backward() calls of its body, in source order (where the autocast fix scales).
    backward_calls: tuple[ast.AST, ...] = dataclasses.field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class SourceFacts:
    """What the cell's source says, for the rules. Empty when the cell does not parse."""

    parsed: bool
    parse_error: str | None = None
    loaders: tuple[LoaderCall, ...] = ()
    optimizers: tuple[OptimizerCall, ...] = ()
    loops: tuple[LoopFacts, ...] = ()
    model_names: frozenset[str] = frozenset()
    names_read: frozenset[str] = frozenset()
    syncs: tuple[SourceLine, ...] = ()  # per-loop reads of device values
    # Reads in the methods a framework calls every step (a Lightning on_train_batch_end's .cpu())
    hook_reads: tuple[SourceLine, ...] = ()
    # Reads in the functions the cell registers as module or tensor hooks (a forward hook's
    # ``out.mean().item()``): torch runs them on every forward or backward (cell.registered_hooks)
    registered_hook_reads: tuple[SourceLine, ...] = ()
    # Every line of those hooks (their whole body: what gating or removing them saves)
    registered_hook_lines: frozenset[int] = frozenset()
    # Every line of the reading hooks on the live modules that the cell does not define (another
    # cell's, a user's file's: cell.live_hooks), each with its origin; their reads are among
    # ``registered_hook_reads``.
    live_hook_lines: tuple[SourceLine, ...] = ()
    logging: tuple[SourceLine, ...] = ()  # logging calls in loops that read no tensor
    saves: tuple[SourceLine, ...] = ()  # checkpoint writes in loops (torch.save, save_pretrained)
    # housekeeping calls in loops (gc.collect(), torch.cuda.empty_cache(): words.COLLECT_CALLS)
    collects: tuple[SourceLine, ...] = ()
    # torch.distributed collectives the step loops call themselves (cell.collectives: a loss
    # reduced for a log, a barrier), gradients' own exchange left out; ``gated``: some steps.
    collectives: tuple[SourceLine, ...] = ()
    # Copies of a model's whole state in a step loop, not behind a period (cell.syncs.state_copies:
    # ``copy.deepcopy(model.state_dict())``); ``gated``: some steps, by a test of a value.
    state_copies: tuple[SourceLine, ...] = ()
    # progress-bar calls in loops that redraw the bar on each call (``bar.set_postfix(...)``
    # without refresh=False: cell.syncs.redraws); ``node``: the call
    redraws: tuple[SourceLine, ...] = ()
    # Operators of the torch factories a step runs that make CPU tensors, none of them made on a
    # device in the cell (cell.syncs.host_factories): reads of what they make are no device reads.
    host_factories: frozenset[str] = frozenset()
    # Reads a step makes of values the source shows on the CPU, each recording aten::item on a
    # CPU trace (cell.syncs.host_reads_traced): no device reads, on a GPU either.
    host_reads: int = 0
    validation: tuple[SourceLine, ...] = ()  # validation work inside a training loop
    # no_grad blocks of a step loop that run a model for the loss (a teacher's targets)
    frozen_forwards: tuple[SourceLine, ...] = ()
    # loops of a step loop over the batch's samples that call a model on each
    per_sample_loops: tuple[SourceLine, ...] = ()
    blocking_copies: tuple[SourceLine, ...] = ()  # .to(device)/.cuda() in loops, non_blocking off
    non_blocking_copies: int = 0
    inference_loops: tuple[SourceLine, ...] = ()  # loops calling a model without grad mode off
    eval_called: frozenset[str] = frozenset()  # names .eval() is called on
    autocast: bool = False
    grad_scaler: bool = False
    compiled: bool = False
    cudnn_benchmark: bool | None = None  # literal assigned in the cell; None: not set here
    tf32: bool | None = None  # allow_tf32 / set_float32_matmul_precision in the cell
    flags: tuple[FlagSet, ...] = ()  # every backends flag set and precision call
    data_parallel: tuple[SourceLine, ...] = ()
    convolutions: bool = False  # nn.Conv*/F.conv* named in the cell
    # ``name = Something(...)`` in the cell: name -> the called class or function's last name.
    constructed: tuple[tuple[str, str], ...] = ()
    # ``name = <call>`` statements outside functions, classes and loops, in source order: the
    # dotted target and the assignment node (where a fix inserts what follows a creation).
    created: tuple[tuple[str, ast.AST], ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )
    # ``TrainingArguments(...)`` calls, in source order (the HF Trainer builds its loaders).
    training_arguments: tuple[ast.AST, ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )
    # (class, keyword, value) of TrainingArguments(...) / Lightning Trainer(...) logging
    # settings: the literal, the framework's default when absent, None when not a literal.
    framework_settings: tuple[tuple[str, str, object], ...] = ()
    step_logs: tuple[LightningLog, ...] = ()  # Lightning self.log(...) / pl_module.log(...) calls
    # Every binding of a plain name in the cell: (name, first line, last line, top level);
    # a fix that sets something on a live object reads it (the cell may rebind the object).
    bindings: tuple[tuple[str, int, int, bool], ...] = ()
    imported: frozenset[str] = frozenset()  # names an import binds (torch of import torch.nn)
    # Objects behind the names the cell reads (filled by run_rules when it has the namespace).
    live: LiveFacts = dataclasses.field(default_factory=LiveFacts)
    # The parsed cell these facts came from (loops, step loops, models, positions): a rule that
    # needs a fact no field holds reads it here rather than parsing the cell again.
    tree: CellTree | None = dataclasses.field(default=None, compare=False, repr=False)

    origins: tuple[Origin, ...] = ()  # the functions read with the cell (cell.calls)

    def constructor_of(self, name: str) -> str | None:
        return next((c for n, c in reversed(self.constructed) if n == name), None)

    def dataset_class(self, loader: LoaderCall) -> str | None:
        """Class name of a DataLoader call's dataset, as the cell (or a live object) makes it:
        ``DataLoader(TensorDataset(...))``, or ``ds = TensorDataset(...)`` then ``DataLoader(ds)``."""
        return self._class_of(loader.dataset)

    def sampler_class(self, loader: LoaderCall) -> str | None:
        """Class name of a DataLoader call's ``sampler=`` (else ``batch_sampler=``), as the
        dataset's (``dataset_class``)."""
        return self._class_of(loader.sampler or loader.batch_sampler)

    def _class_of(self, text: str | None) -> str | None:
        if text is None:
            return None
        text = text.strip()
        call = re.match(r"^(?:[\w.]*\.)?(\w+)\(", text)
        if call:
            return call.group(1)
        if text.isidentifier():
            known = self.live.dataset_type(text)
            return known if known is not None else self.constructor_of(text)
        return None

    def framework_setting(self, cls: str, key: str) -> object:
        """The setting's value where every such call agrees, else None (unknown or several)."""
        values = {repr(v): v for c, k, v in self.framework_settings if (c, k) == (cls, key)}
        return next(iter(values.values())) if len(values) == 1 else None

    def trained_model(self) -> str | None:
        """The model being trained: whose parameters an optimizer updates, else a likely name.
        Never ``self``: an optimizer over ``self.parameters()`` is a module's own method's (a
        LightningModule's ``configure_optimizers``), and the model is what the cell makes of
        its class (``add self = torch.compile(self)`` was offered so)."""
        fed = next(
            (opt.params_of for opt in self.optimizers if opt.params_of not in (None, "self")),
            None,
        )
        return fed or next((n for n in ("model", "net", "network") if n in self.model_names), None)

    def training_loops(self) -> tuple[LoopFacts, ...]:
        return tuple(loop for loop in self.loops if loop.innermost_training)

    def per_step(self, lines: Iterable[SourceLine]) -> tuple[SourceLine, ...]:
        """The lines that run on every step (not behind an ``if``)."""
        return tuple(line for line in lines if not line.gated)
