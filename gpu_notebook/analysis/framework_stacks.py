"""Framework overhead in the sampled stacks: logging, callbacks and progress bars that run inside
Lightning's or the HF Trainer's loop, read by file and function (the cell's lines show only
``trainer.fit(...)``). Pure functions over :class:`~gpu_notebook.records.RawStacks`; the rule
(rules/step_logging.framework_overhead) reads their counts.
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpu_notebook.analysis.lines import cell_number_of, other_cell, users_code
from gpu_notebook.analysis.loader_wait import blocked_kept
from gpu_notebook.records import RawStacks, Run, StackCount

# Framework code that logs, reports or draws progress on the step (not training work), found
# by its file and function in the stack sampler's stacks: the cell's own lines do not show it
# when Lightning's `self.log` or the HF Trainer's `logging_steps=1` run inside `fit`/`train`.
# (label, framework, file substring(s), function pattern or None for the whole file)
OVERHEAD: tuple[tuple[str, str, tuple[str, ...], re.Pattern[str] | None], ...] = (
    ("lightning-log", "lightning", ("lightning/pytorch/", "pytorch_lightning/"),
     re.compile(r"LightningModule\.log|_LoggerConnector|_ResultCollection|_ResultMetric|log_metrics|"
                r"update_train_step_metrics|Logger\.|_log_dict_through_fabric")),
    ("lightning-loggers", "lightning", ("lightning/pytorch/loggers/", "lightning/fabric/loggers/"), None),
    ("lightning-bar", "lightning", ("lightning/pytorch/callbacks/progress/",), None),
    ("hf-logging", "transformers", ("transformers/trainer.py",),
     re.compile(r"_maybe_log_save_evaluate|Trainer\.log\b|_nested_gather|_get_learning_rate")),
    # The callbacks' own files only: transformers/integrations/ also holds model code (the
    # attention kernels' sdpa_attention_forward, flash/flex attention), which is training work.
    ("hf-callbacks", "transformers", ("transformers/trainer_callback.py",
     "transformers/integrations/integration_utils.py", "transformers/utils/notebook.py"), None),
    ("tqdm-bar", "tqdm", ("/tqdm/",), None),
)  # fmt: skip


def overhead_label(filename: str, function: str) -> tuple[str, str] | None:
    if function == "<module>":
        return None  # a module's import (Lightning's loggers import tensorboard): not per step
    path = filename.replace("\\", "/")
    for label, framework, files, pattern in OVERHEAD:
        if any(f in path for f in files) and (pattern is None or pattern.search(function)):
            return label, framework
    return None


# Where a framework calls the user's callbacks (HF's ``CallbackHandler.call_event``, Lightning's
# ``_call_callback_hooks``): the frame below is the user's hook (a TrainerCallback's
# ``on_step_end``, a Callback's ``on_train_batch_end``), whose work is the user's, gated in the
# hook, not the framework's logging nor a setting of its (issue 26, unseen hf_callback_metrics:
# a callback's weight norms read "HF Trainer callbacks: 27%, the framework's own per-step
# bookkeeping, nothing to turn down").
DISPATCH: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("transformers", "transformers/trainer_callback.py", re.compile(r"CallbackHandler\.call_event$")),
    ("lightning", "lightning/pytorch/trainer/call.py", re.compile(r"^_call_callback_hooks$")),
    ("lightning", "pytorch_lightning/trainer/call.py", re.compile(r"^_call_callback_hooks$")),
)  # fmt: skip
USER_HOOK = "user-callback"  # the samples in the user's callback hooks (count_overhead)

# The HF Trainer's evaluation and checkpoints, called from ``_maybe_log_save_evaluate`` (whose
# name holds the logging too): periodic work set by eval_steps / save_steps, which
# rules/step_logging.periodic_work names by its setting (cell/blocks), not logging overhead
# (unseen hf_save_steps: a save every 5 steps read "HF Trainer logging: 17%").
EVAL_SAVE = re.compile(
    r"Trainer\.(_evaluate|evaluate|evaluation_loop|prediction_loop|_save_checkpoint|save_model|"
    r"_save|_rotate_checkpoints|_save_optimizer_and_scheduler|_save_rng_state)$"
)


@dataclass(frozen=True)
class CallbackHook:
    """A hook of the user's callback that a framework's loop called (``DISPATCH``)."""

    framework: str  # "transformers", "lightning"
    filename: str
    function: str  # its qualified name: ``WeightNorms.on_step_end``
    first_line: int  # the hook's ``def`` line
    cell_number: int | None = None  # the notebook cell that defined it (In[N]), where known


def _user_hook(raw: RawStacks, stack: StackCount, cell: str) -> tuple[int, CallbackHook] | None:
    """The depth and hook of the user's frame right below a framework's callback dispatcher."""
    frames = stack.frames
    for depth in range(len(frames) - 1):
        ref = raw.functions[frames[depth][0]]
        path = ref.filename.replace("\\", "/")
        framework = next(
            (fw for fw, part, pattern in DISPATCH if part in path and pattern.search(ref.function)),
            None,
        )
        if framework is None:
            continue
        hook = raw.functions[frames[depth + 1][0]]
        if hook.filename == cell or users_code(hook, cell):
            number = cell_number_of(hook.filename, raw) if hook.filename != cell else None
            return depth, CallbackHook(
                framework, hook.filename, hook.function, hook.first_line, number
            )
        return None
    return None


# An iterator that wraps the loop's iterable (``tqdm(enumerate(loader))``): what its frame calls
# is the wrapped iterable's work (the DataLoader fetching a batch) unless it is overhead itself
# (the bar's update); only the frame's own time is the framework's.
ITERATOR = re.compile(r"(^|\.)(__iter__|__next__)$")


def sampled_stacks(run: Run) -> list[RawStacks]:
    """The stacks whose time split is a share: the dense samples after the window (or over the
    whole cell), and the sparse ones over the rest of the run where they fell on a clock
    (``RawStacks.clocked``: where a sample falls does not depend on where the program releases
    the GIL), each sample's time on the loop thread's own clock (``on_own_clock``). A sparse
    sampler at the program's own switch interval leans: its samples only say that the logging
    ran (rules/step_logging._seen)."""
    out = [run.stacks] if run.stacks is not None else []
    sparse = run.framework_stacks
    if sparse is not None and sparse.clocked:
        out.append(sparse)
    clock = share_clock(run, out)
    kept = blocked_kept(run.steps.steps)
    return [
        without_ours(on_own_clock(raw, clock, 1.0 if kept is None else kept))
        for raw in out
        if raw.time_us > 0 and raw.stacks
    ]


# Our own package's files: a sample whose innermost frame is here caught the loop thread in our
# capture's work (the step clock's hooks reading its clocks), not in the program's.
OWN_CODE = str(Path(__file__).resolve().parent.parent) + os.sep


def without_ours(raw: RawStacks) -> RawStacks:
    """``raw`` less the samples that caught the loop thread running our own code (``OWN_CODE``):
    the tool's cost is not the program's loop (issue 26: on a busy machine, load 26-29, 34% of a
    Lightning run's sparse samples fell on the step clock's two reads of the thread's CPU clock
    around the optimizer step and its closure, 0-3% on a quieter one, and read the log calls'
    share at 27% where the quieter run read 52%; benchmarks/framework_share_load.py). Samples
    in the program's code that our wrappers called stay the program's."""
    ours = [s for s in raw.stacks if s.frames and _ours(raw.functions[s.frames[-1][0]].filename)]
    if not ours:
        return raw
    return dataclasses.replace(
        raw,
        stacks=tuple(s for s in raw.stacks if s not in ours),
        samples=raw.samples - sum(s.count for s in ours),
        time_us=max(0, raw.time_us - sum(s.time_us for s in ours)),
    )


def _ours(filename: str) -> bool:
    return _real_path(filename).startswith(OWN_CODE)


@functools.lru_cache(maxsize=1024)
def _real_path(filename: str) -> str:
    return os.path.realpath(filename)


def dense_sampled(run: Run) -> bool:
    """``sampled_stacks(run)`` begins with the dense samples (``Run.stacks``)."""
    return run.stacks is not None and run.stacks.time_us > 0 and bool(run.stacks.stacks)


# What a sample's time is, for a share of the loop's time (``share_clock``).
Clock = Literal["cpu", "own", "wall"]


def share_clock(run: Run, raws: list[RawStacks]) -> Clock:
    """The clock the framework's share is read on (issue 26: a Lightning ``log_dict`` on every
    step read 43% at load 7.6 and 21-23% at load 15-26, where it took 69% of the loop thread's
    CPU).

    The samples fall on a wall clock, and each stood for the wall time since the previous one.
    On a busy machine most of that time is the loop thread's wait for a core, and some its wait
    for the GIL after each call that released it (the model's many small ops) while the thread
    that took it waits for a core: a sampler delayed by the same GIL takes its sample in the
    frame that waited, with the whole wait in its weight. Neither is the program's work.

    On a CPU run the work is the loop thread computing: each sample weighs the thread's CPU
    time since the previous sample ("cpu", as ``rules.common.run_optimizer`` reads the update's
    share), and in the data phase also the time it blocked off any core that was the loader's
    (a worker's queue, a dataset's read: the step waits for its data, on a quiet machine as on
    a busy one), not the GIL another thread held (``loader_wait.blocked_kept``). On a GPU a log call's wait for the
    device is its cost too: each sample weighs its wall time less the wait for a core ("own":
    schedstat run_delay). "wall": a sampler that read no thread clock (no schedstat, an older
    record)."""
    if not raws or any(raw.cpu_us is None or raw.wait_us is None for raw in raws):
        return "wall"
    return "own" if run.env.cuda_available or run.env.gpus else "cpu"


def on_own_clock(raw: RawStacks, clock: Clock, data_kept: float = 1.0) -> RawStacks:
    """``raw`` with its time on ``clock`` (``share_clock``), as the share readers (``loop_time``,
    ``count_overhead``, ``by_log_line``, ``log_callers``) weigh it. "own": the whole is the
    sampled spans' wall time less the wait for a core, summed before it is taken (a reading
    can fall in the next sample's span). "cpu": the whole is the stacks' weights and the
    folded samples' CPU time; a data-phase sample adds ``data_kept`` of its time blocked off a
    core (the loader's share of its blocked time, ``loader_wait.blocked_kept``: under load most
    of a ``TensorDataset`` loader's was the GIL our samplers held while they waited for a core,
    6-17% of a Lightning run's CPU at load 18-28)."""
    if clock == "wall" or raw.cpu_us is None or raw.wait_us is None:
        return raw

    def weight(stack: StackCount) -> int:
        own = max(0, stack.time_us - stack.wait_us)
        if clock == "own":
            return own
        if stack.phase != "data":
            return stack.cpu_us
        return stack.cpu_us + round(data_kept * max(0, own - stack.cpu_us))

    stacks = tuple(dataclasses.replace(s, time_us=weight(s)) for s in raw.stacks)
    if clock == "own":
        total = max(0, raw.time_us - raw.wait_us)
    else:
        folded = max(0, raw.cpu_us - sum(s.cpu_us for s in raw.stacks))
        total = sum(s.time_us for s in stacks) + folded
    return dataclasses.replace(raw, stacks=stacks, time_us=total)


def loop_time(raw: RawStacks) -> tuple[int, int]:
    """The samples and time of ``raw`` outside imports (the loop's)."""
    importing = [s for s in raw.stacks if imported(raw, s)]
    return (
        raw.samples - sum(s.count for s in importing),
        raw.time_us - sum(s.time_us for s in importing),
    )


def count_overhead(
    raw: RawStacks,
    by_label: dict[str, int],
    functions: dict[str, int],
    frameworks: set[str],
    *,
    weigh: bool = True,
    named: frozenset[int] = frozenset(),
    logged: frozenset[int] = frozenset(),
    hooks: dict[CallbackHook, int] | None = None,
    log_hooks: frozenset[tuple[str, str]] = frozenset(),
) -> int:
    """Add ``raw``'s loop samples in framework overhead frames, by label and function: their
    time (``weigh``) or their count. Returns the samples found there. ``named``: cell lines
    whose drawing another finding names with its line (rules/step_logging.progress_redraw):
    samples under them are left out, not said twice. ``logged``: the cell's lines that call
    Lightning's log on every step: a sample under one outside Lightning's frames computes a
    value only to log it (a Callback's ``pl_module.log(name, p.grad.norm())``): "lightning-
    logged", the line's own. A sample in the user's callback hook (``DISPATCH``) in no
    overhead frame below it is ``USER_HOOK``'s, added to ``hooks`` by hook, unless the hook
    calls Lightning's log (``log_hooks``: (filename, function), named as a log caller). The
    HF Trainer's evaluation and checkpoints (``EVAL_SAVE``) are not counted."""
    labels = [overhead_label(ref.filename, ref.function) for ref in raw.functions]
    hits = 0
    cell = raw.cell_filename or raw.root_filename
    for stack in raw.stacks:
        if imported(raw, stack):
            continue
        if named and any(
            raw.functions[i].filename == cell and line in named for i, line in stack.frames
        ):
            continue
        amount = stack.time_us if weigh else stack.count
        user = _user_hook(raw, stack, cell or "")
        for depth, (index, _line) in enumerate(stack.frames):
            hit, name = labels[index], raw.functions[index].function
            if hit is None:
                continue
            if depth + 1 < len(stack.frames) and ITERATOR.search(name):
                continue  # tqdm(loader).__iter__ calling on: the loader's time, not the bar's
            if user is not None and depth <= user[0]:
                continue  # the dispatcher above the user's hook: the hook's time, not its
            if hit[0] == "hf-logging" and any(
                EVAL_SAVE.search(raw.functions[i].function) for i, _ in stack.frames[depth + 1 :]
            ):
                break  # evaluation or a checkpoint: periodic work, not logging
            by_label[hit[0]] = by_label.get(hit[0], 0) + amount
            functions[name] = functions.get(name, 0) + amount
            frameworks.add(hit[1])
            hits += stack.count
            break
        else:
            at = _cell_line(raw, stack, cell, logged) if logged else None
            if at is not None:
                by_label[LOGGED] = by_label.get(LOGGED, 0) + amount
                name = raw.functions[at[0]].function
                functions[name] = functions.get(name, 0) + amount
                frameworks.add("lightning")
                hits += stack.count
            elif user is not None and (user[1].filename, user[1].function) not in log_hooks:
                by_label[USER_HOOK] = by_label.get(USER_HOOK, 0) + amount
                functions[user[1].function] = functions.get(user[1].function, 0) + amount
                frameworks.add(user[1].framework)
                if hooks is not None:
                    hooks[user[1]] = hooks.get(user[1], 0) + amount
                hits += stack.count
    return hits


LOGGED = "lightning-logged"  # the values a per-step log line computes (count_overhead)


def _cell_line(
    raw: RawStacks, stack: StackCount, cell: str | None, lines: frozenset[int]
) -> tuple[int, int] | None:
    """The outermost frame of ``stack`` in the cell at one of ``lines``: (function index, line)."""
    return next(
        (
            (i, line)
            for i, line in stack.frames
            if raw.functions[i].filename == cell and line in lines
        ),
        None,
    )


@dataclass(frozen=True)
class LogCaller:
    """A frame of the user's code outside the measured cell that called Lightning's log: a
    LightningModule or a Callback defined in another cell or in a user's file, which the cell's
    source does not show (the cell holds only ``trainer.fit(...)``)."""

    filename: str
    function: str  # its qualified name: ``GradNormLogger.on_before_optimizer_step``
    line: int
    text: str  # the line, stripped ("" where linecache has no source)
    callback: bool  # Lightning's ``_call_callback_hooks`` called it: a Callback's hook
    cell_number: int | None  # In[N] where it is another cell's
    in_file: bool  # a user's .py file, not another cell


def log_callers(raw: RawStacks, *, weigh: bool = True) -> dict[LogCaller, int]:
    """The time (``weigh``) or count of ``raw``'s loop samples under each frame of the user's
    code outside the cell that called Lightning's log (its "lightning-log" frames): the call and
    the values its line computes, by the calling line."""
    cell = raw.cell_filename or raw.root_filename or ""
    labels = [overhead_label(ref.filename, ref.function) for ref in raw.functions]
    callers: dict[tuple[str, int], LogCaller] = {}
    for stack in raw.stacks:
        frames = stack.frames
        depth = next((d for d, (i, _line) in enumerate(frames) if labels[i] is not None), None)
        if (
            depth is None
            or depth == 0
            or labels[frames[depth][0]] != ("lightning-log", "lightning")
        ):
            continue
        index, line = frames[depth - 1]
        ref = raw.functions[index]
        if imported(raw, stack) or not users_code(ref, cell) or (ref.filename, line) in callers:
            continue
        hooks = raw.functions[frames[depth - 2][0]].function if depth >= 2 else ""
        elsewhere = other_cell(ref.filename, cell)
        callers[(ref.filename, line)] = LogCaller(
            ref.filename,
            ref.function,
            line,
            linecache.getline(ref.filename, line).strip(),
            hooks.endswith("_call_callback_hooks"),
            cell_number_of(ref.filename, raw) if elsewhere else None,
            not elsewhere,
        )
    out: dict[LogCaller, int] = {}
    for stack in raw.stacks:
        if imported(raw, stack):
            continue
        at = next(
            (
                callers[k]
                for i, line in stack.frames
                if (k := (raw.functions[i].filename, line)) in callers
            ),
            None,
        )
        if at is not None:
            out[at] = out.get(at, 0) + (stack.time_us if weigh else stack.count)
    return out


def by_log_line(raw: RawStacks, lines: frozenset[int], *, weigh: bool = True) -> dict[int, int]:
    """The time (``weigh``) or count of ``raw``'s loop samples under a frame of the cell at one
    of ``lines`` (Lightning log calls), by that line: the log call and the values it computes
    (``pl_module.log(name, p.grad.norm())``: what gating the call every N steps removes)."""
    cell = raw.cell_filename or raw.root_filename
    out: dict[int, int] = {}
    for stack in raw.stacks:
        if imported(raw, stack):
            continue
        at = _cell_line(raw, stack, cell, lines)
        if at is not None:
            out[at[1]] = out.get(at[1], 0) + (stack.time_us if weigh else stack.count)
    return out


def imported(raw: RawStacks, stack: StackCount) -> bool:
    """A sample taken while Python imported a module (its import machinery on the stack)."""
    return any(raw.functions[i].filename.startswith("<frozen importlib") for i, _ in stack.frames)


# Progress-bar and console libraries: a sample in their frames under a cell line is that line
# drawing or writing for a human (tqdm's set_postfix -> refresh -> display -> write), not the
# line's own work (a device read in its arguments, the formatting of a number). Where the
# cell-side work has no Python frame (a ``print``), nothing tells the two apart: not counted.
Library = Literal["tqdm", "rich"]
DRAWING: tuple[tuple[Library, str], ...] = (
    ("tqdm", "/tqdm/"),
    ("rich", "/rich/progress.py"),
    ("rich", "/rich/progress_bar.py"),
    ("rich", "/rich/live.py"),
    ("rich", "/rich/console.py"),
)


def drawing_library(filename: str) -> Library | None:
    """The id (``DRAWING``) of the progress or console library ``filename`` belongs to."""
    path = filename.replace("\\", "/")
    return next((library for library, part in DRAWING if part in path), None)


def drawn_under(raw: RawStacks, lines: frozenset[int]) -> tuple[dict[int, int], set[Library]]:
    """The time (us) of ``raw``'s loop samples that ran a progress or console library
    (``DRAWING``) below a frame of the cell at one of ``lines``, by that line; and the libraries
    seen. The outermost such cell frame takes the sample (a bar's call in a helper the line
    calls is the line's)."""
    cell = raw.cell_filename or raw.root_filename
    by_line: dict[int, int] = {}
    libraries: set[Library] = set()
    for stack in raw.stacks:
        if imported(raw, stack):
            continue
        at: int | None = None
        for index, line in stack.frames:
            filename = raw.functions[index].filename
            if at is None:
                if filename == cell and line in lines:
                    at = line
                continue
            library = drawing_library(filename)
            if library is not None:
                by_line[at] = by_line.get(at, 0) + stack.time_us
                libraries.add(library)
                break
    return by_line, libraries
