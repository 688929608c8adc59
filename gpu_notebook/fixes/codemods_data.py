"""Codemods for the input pipeline: DataLoader workers, pinned non-blocking copies, bigger batches.

Each function takes the parsed cell and the fix's parameters, and returns ``Edited`` with the
patched module or ``Declined`` with a reason for the user. Parameter values are the caller's
responsibility: a bad one raises ValueError (a bug upstream, not a property of the cell).

The loaders, optimizers and copies edited are the facts' (``cell/facts.py``); where a setting
held in a variable gets its literal is read by ``cell/origins.py``. No search of the cell here.
"""

from __future__ import annotations

import functools

import libcst as cst

from gpu_notebook.cell.facts import LoaderCall
from gpu_notebook.cell.loops import drawn_by_next
from gpu_notebook.cell.names import bool_or_none, has_star_kwargs, int_or_none, keyword_of
from gpu_notebook.cell.origins import accumulation_steps, keyword_origin
from gpu_notebook.cell.parse import cst_nodes
from gpu_notebook.cell.words import IN_MEMORY_DATASETS
from gpu_notebook.fixes.cst_tools import (
    CodemodResult,
    Declined,
    Edited,
    Replacement,
    add_comment,
    expression,
    facts_of,
    nodes_of,
    paired,
    replace_nodes,
    set_keyword,
    tree_of,
)
from gpu_notebook.fixes.records import Fix

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...): a call
# with this many positional arguments sets num_workers positionally, which we leave alone.
_NUM_WORKERS_POSITION = 5
_BATCH_COMMENT = "# gpucheck: batch size x"


def _dataloader_calls(module: cst.Module) -> list[cst.Call]:
    """The cell's ``DataLoader(...)`` calls: the loaders of the facts the rule read."""
    return nodes_of(module, [ld.node for ld in facts_of(module).loaders])


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and arg.star == ""]


def _settings_text(num_workers: int | None, pin_memory: bool) -> str:
    """What a refusal asks for: only what would change (no pin_memory=True when it is set)."""
    parts = [f"num_workers={num_workers}"] if num_workers is not None else []
    if pin_memory:
        parts.append("pin_memory=True")
    return " and ".join(parts) or "the loader's settings"


def dataloader_workers(
    module: cst.Module,
    *,
    num_workers: int | None = 4,
    pin_memory: bool = True,
    persistent_workers: bool = True,
    prefetch_factor: int | None = None,
    running_workers: int | None = None,
) -> CodemodResult:
    """Set worker processes and pinned memory on every ``DataLoader(...)`` of the cell, or, in a
    cell without one, on HF ``TrainingArguments(...)`` (the Trainer builds the loader from its
    ``dataloader_*`` fields; it pins by default, so only a ``False`` there is changed).

    ``num_workers=None`` leaves the worker count as written (pinned memory only).
    ``running_workers``: the count the loop's loader ran with (its iterator's), which picks the
    branch of ``4 if torch.cuda.is_available() else 0`` that ran here.
    ``persistent_workers`` and ``prefetch_factor`` are only set where workers are used: torch
    rejects both when ``num_workers == 0``.
    """
    if num_workers is not None and (isinstance(num_workers, bool) or num_workers < 0):
        raise ValueError(f"num_workers must be a non-negative int or None, not {num_workers!r}")
    if prefetch_factor is not None and prefetch_factor < 1:
        raise ValueError(f"prefetch_factor must be at least 1, not {prefetch_factor!r}")
    facts = facts_of(module)
    calls = _dataloader_calls(module)
    found = [] if calls or num_workers is None else facts.training_arguments
    hf = [c for c in nodes_of(module, list(found)) if not has_star_kwargs(c)]
    # The facts' node of each call: where its variable setting gets its value is read there.
    fact_of = paired(module, [*(ld.node for ld in facts.loaders), *found])
    settings = _settings_text(num_workers, pin_memory)
    if not calls and not hf:
        return Declined(
            f"no DataLoader(...) call in this cell; set {settings} where the loader is created"
        )
    editable = hf or [
        c for c in calls if not has_star_kwargs(c) and len(_positional(c)) <= _NUM_WORKERS_POSITION
    ]
    if not editable:
        return Declined(
            f"the DataLoader arguments come from **kwargs or positions; set {settings} where "
            "they are defined"
        )
    if not hf and num_workers:
        editable = _waited_on(module, editable)
    key = "dataloader_num_workers" if hf else "num_workers"
    persistent = "dataloader_persistent_workers" if hf else "persistent_workers"
    edits: dict[cst.CSTNode, Replacement] = {}
    applied: dict[str, str] = {}
    held: list[str] = []  # variables that hold num_workers and could not be patched here
    for call in editable:
        wanted: dict[str, str] = {}
        current = keyword_of(call, key)
        variable = current is not None and int_or_none(current.value, None) is None
        if num_workers is not None and variable and current is not None:
            # The script already holds the setting in a variable (`num_workers=self.num_workers`,
            # a flag): patch where it gets its value, never override it with a literal here.
            name = cst.Module([]).code_for_node(current.value)
            assert facts.tree is not None  # the cell parsed: it has this call
            held_at = keyword_origin(facts.tree, fact_of[call], key, running_workers)
            origin = cst_nodes(module, [held_at])[0] if held_at is not None else None
            if origin is None:
                held.append(name)
            else:
                edits[origin] = lambda _literal: cst.Integer(str(num_workers))
                applied[key] = (
                    f"{num_workers} (the branch of `{name}` that ran here)"
                    if isinstance(current.value, cst.IfExp)
                    else f"{num_workers} (where `{name}` gets its value)"
                )
            if pin_memory and not hf:
                wanted["pin_memory"] = "True"
            inline = isinstance(current.value, cst.IfExp)
            if persistent_workers and inline and origin is not None:
                # `4 if cuda else 0` now reads `4 if cuda else 2`: persistent workers hold only
                # where every branch starts workers (torch rejects them with 0).
                other = current.value.orelse if origin is current.value.body else current.value.body
                if isinstance(other, cst.Integer) and int(other.evaluated_value) > 0:
                    wanted[persistent] = "True"
            elif persistent_workers and not inline:
                # Still valid if the variable is 0 again: torch rejects persistent workers then.
                wanted[persistent] = f"{name} > 0"
        else:
            if num_workers is not None:
                wanted[key] = str(num_workers)
                workers = num_workers
            else:
                workers = (int_or_none(current.value, None) if current is not None else None) or 0
            if pin_memory and not hf:
                wanted["pin_memory"] = "True"
            if workers > 0 and persistent_workers:
                wanted[persistent] = "True"
            if workers > 0 and prefetch_factor is not None and not hf:
                wanted["prefetch_factor"] = str(prefetch_factor)
        pin = keyword_of(call, "dataloader_pin_memory") if hf else None
        if pin_memory and pin is not None and bool_or_none(pin.value, None) is False:
            wanted["dataloader_pin_memory"] = "True"
        changes = {k: v for k, v in wanted.items() if not _keyword_is(call, k, v)}
        applied.update(wanted)
        if changes:
            edits[call] = _setter(changes)
    if held and key not in applied:
        names = ", ".join(f"`{n}`" for n in held)
        return Declined(
            f"{key} comes from {names}, which this cell does not set to one literal; give it "
            f"{num_workers} where its value is chosen (a flag, a constructor argument such as "
            f"{key}={num_workers})"
        )
    if not edits and hf:
        return Declined("every TrainingArguments in this cell already sets its DataLoader workers")
    if not edits:
        settings = ", ".join(f"{k}={v}" for k, v in applied.items())
        return Declined(f"every DataLoader in this cell already has {settings}")
    detail = ", ".join(f"{k}={v}" for k, v in applied.items())
    return Edited(replace_nodes(module, edits), detail)


DATALOADER_WORKERS = Fix(
    "dataloader_workers",
    "DataLoader workers and pinned memory",
    (
        "The GPU waits while the main process loads and collates every batch.",
        "Worker processes prepare batches ahead; pinned memory speeds up the copy to the GPU.",
    ),
    "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
    dataloader_workers,
)


def _waited_on(module: cst.Module, calls: list[cst.Call]) -> list[cst.Call]:
    """Of several DataLoaders, those the step waits on and workers can help: the ones a training
    loop iterates (a validation loader is left as it is), less those over an in-memory dataset
    (a TensorDataset's batch is a view: a worker only adds its handoff). All of ``calls`` when
    that leaves none."""
    if len(calls) < 2:
        return calls
    facts, fact = facts_of(module), _loader_facts(module)
    kept = [c for c in _stepped(module, calls) or calls
            if c not in fact or facts.dataset_class(fact[c]) not in IN_MEMORY_DATASETS]  # fmt: skip
    return kept or calls


def _trained_on(module: cst.Module, calls: list[cst.Call]) -> list[cst.Call]:
    """Of several DataLoaders, the ones a training loop iterates (all when none is)."""
    if len(calls) < 2:
        return calls
    return _stepped(module, calls) or calls


def _loader_facts(module: cst.Module) -> dict[cst.CSTNode, LoaderCall]:
    """Each ``DataLoader(...)`` call of the cell with the scan's fact for it."""
    loaders = facts_of(module).loaders
    found = cst_nodes(module, [ld.node for ld in loaders])
    return {n: ld for ld, n in zip(loaders, found, strict=True) if n is not None}


def _stepped(module: cst.Module, calls: list[cst.Call]) -> list[cst.Call]:
    """The calls whose loader a training loop of the cell iterates."""
    iterated = {name for loop in facts_of(module).training_loops() for name in loop.iterates}
    fact = _loader_facts(module)
    return [c for c in calls if c in fact and fact[c].name in iterated]


def _keyword_is(call: cst.Call, name: str, value_code: str) -> bool:
    arg = keyword_of(call, name)
    return arg is not None and cst.Module([]).code_for_node(arg.value) == value_code


def _setter(changes: dict[str, str]) -> Replacement:
    def apply(call: cst.Call) -> cst.Call:
        for name, code in changes.items():
            call = set_keyword(call, name, expression(code))
        return call

    return apply


def bigger_batch(module: cst.Module, *, factor: int = 2, scale_lr: bool = True) -> CodemodResult:
    """Multiply each DataLoader's batch size by ``factor`` and scale literal learning rates too.

    The linear scaling rule (Goyal et al., 2017) keeps the update size per sample the same. A
    learning rate that is not a literal is left alone and the added comment says to scale it.
    """
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise ValueError(f"factor must be an int of at least 2, not {factor!r}")
    if _BATCH_COMMENT in module.code:
        return Declined(
            "gpucheck already scaled the batch size in this cell; apply bigger_batch to the "
            "original cell with a larger factor instead"
        )
    tree = tree_of(module)
    edits: dict[cst.CSTNode, Replacement] = {}
    # The batch the step trains on: an evaluation loader beside it keeps its own.
    loaders = _trained_on(module, _dataloader_calls(module))
    # A batch_sampler= (by keyword or position) makes the batches: torch rejects a batch_size
    # beside it, and replacing it would drop the user's sampling (issue 26).
    fact = _loader_facts(module)
    sampled = [c for c in loaders if c in fact and fact[c].batch_sampler is not None]
    if sampled and len(sampled) == len(loaders):
        given = fact[sampled[0]].batch_sampler
        return Declined(
            f"the DataLoader takes its batches from batch_sampler={given}, which sets the batch "
            "size (torch rejects a batch_size beside it); make that batch sampler's batches "
            f"{factor}x bigger where it is built, and keep it"
        )
    loaders = [c for c in loaders if c not in sampled]
    # batch_size=None: the loader does not batch; its sampler (a BatchSampler) or its dataset
    # makes each batch, and `None * 2` is a TypeError (unseen round 20's batch_sampler_fetch).
    unbatched = [c for c in loaders if c in fact and fact[c].unbatched]
    if unbatched and len(unbatched) == len(loaders):
        given = fact[unbatched[0]].sampler
        source = f"its sampler={given}" if given is not None else "its dataset"
        return Declined(
            f"the DataLoader does not batch (batch_size=None): {source} makes each batch; make "
            f"those batches {factor}x bigger where they are made, and keep the loader as it is"
        )
    loaders = [c for c in loaders if c not in unbatched]
    # A batch size not written in the call may come from its **kwargs: setting one there would
    # pass it twice (a TypeError) or replace it with the factor itself.
    unseen = [
        c for c in loaders if has_star_kwargs(c) and _second_argument(c, "batch_size") is None
    ]
    if unseen and len(unseen) == len(loaders):
        return Declined(
            "the DataLoader's batch size comes from **kwargs; multiply it where they are defined"
        )
    loaders = [c for c in loaders if c not in unseen]
    facts = facts_of(module)
    drawn = drawn_by_next(facts.tree, [fact[c].node for c in loaders]) if facts.tree else None
    if drawn is not None:
        return Declined(
            f"the loop takes its batches with next({drawn[0]}) from one pass over "
            f"`{drawn[1]}` ({drawn[0]} = iter({drawn[1]})): a batch {factor}x bigger leaves "
            f"{factor}x fewer, and a fixed count of next() calls would run out "
            f"(StopIteration); multiply the batch size and divide that count by {factor} together"
        )
    for call in loaders:
        edits[call] = _batch_scaler(factor)
    if not edits:
        return Declined(
            "no DataLoader(...) call with a batch size in this cell; multiply the batch size "
            "where the loader is created"
        )
    folded = _accumulation_folded(module, factor)
    if folded:
        # Gradient accumulation over `factor` or more micro-batches: fold `factor` of them into
        # one bigger micro-batch. Each optimizer step sees the same samples as before, so the
        # learning rate stays; the ops get `factor` times the work.
        edits.update(folded)
        note = (
            f"{_BATCH_COMMENT}{factor}; gradient accumulation steps /{factor}: the same samples "
            "per optimizer step, the learning rate stays"
        )
        for stmt in {tree.statement_of(call) for call in loaders}:
            if stmt is not None:
                edits[stmt] = functools.partial(add_comment, text=note)
        detail = f"batch size x{factor}, gradient accumulation /{factor}"
        return Edited(replace_nodes(module, edits), detail)
    lr_scaled = False
    if scale_lr:
        for call in nodes_of(module, [opt.node for opt in facts_of(module).optimizers]):
            lr_arg = _second_argument(call, "lr")
            if lr_arg is not None and isinstance(lr_arg.value, (cst.Integer, cst.Float)):
                # The user's literal stays visible: "1e-3 * 2" says what changed, "0.002" not.
                scaled = expression(f"{lr_arg.value.value} * {factor}")
                edits[lr_arg] = functools.partial(cst.Arg.with_changes, value=scaled)
                lr_scaled = True
            # Parameter groups' own literal rates override the optimizer's: scaled too (a
            # backbone and a head at 1e-3 and 3e-3 kept them under "lr scaled x2").
            for element in _group_lrs(call):
                scaled = expression(f"{element.value.value} * {factor}")  # type: ignore[attr-defined]
                edits[element] = functools.partial(cst.DictElement.with_changes, value=scaled)
                lr_scaled = True
    if lr_scaled:
        note = f"{_BATCH_COMMENT}{factor}; optimizer lr scaled x{factor} too (linear scaling rule)"
    else:
        note = (
            f"{_BATCH_COMMENT}{factor}; scale the learning rate x{factor} as well "
            "(linear scaling rule)"
        )
    statements = {tree.statement_of(call) for call in loaders}
    for stmt in statements:
        if stmt is not None:
            edits[stmt] = functools.partial(add_comment, text=note)
    detail = f"batch size x{factor}" + (f", lr x{factor}" if lr_scaled else "")
    return Edited(replace_nodes(module, edits), detail)


BIGGER_BATCH = Fix(
    "bigger_batch",
    "Bigger batch",
    (
        "A small batch leaves the GPU underused and pays the per-step overhead more often.",
        "A bigger batch does more work per step; the learning rate scales with it.",
    ),
    "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    bigger_batch,
)


def _group_lrs(call: cst.Call) -> list[cst.DictElement]:
    """The ``"lr": <number>`` entries of the parameter-group dicts an optimizer is built from
    (its first argument a list or tuple of dict literals)."""
    positional = _positional(call)
    groups = positional[0].value if positional else None
    if not isinstance(groups, (cst.List, cst.Tuple)):
        return []
    return [
        entry
        for element in groups.elements
        if isinstance(element.value, cst.Dict)
        for entry in element.value.elements
        if isinstance(entry, cst.DictElement)
        and isinstance(entry.key, cst.SimpleString)
        and entry.key.evaluated_value == "lr"
        and isinstance(entry.value, (cst.Integer, cst.Float))
    ]


def _accumulation_folded(module: cst.Module, factor: int) -> dict[cst.CSTNode, Replacement]:
    """``gradient_accumulation_steps=K`` (accelerate's ``Accelerator``, HF ``TrainingArguments``)
    set to literals that ``factor`` divides, each divided by it; empty when there is none, or
    one that is not such a literal (then the batch grows and the learning rate scales)."""
    tree = facts_of(module).tree
    values = accumulation_steps(tree) if tree is not None else []
    steps = [int_or_none(value, None) for value in values]
    found = cst_nodes(module, values)
    if not values or any(k is None or k < factor or k % factor for k in steps) or None in found:
        return {}
    return {
        node: functools.partial(_literal, cst.Integer(str(k // factor)))
        for node, k in zip(found, steps, strict=True)
        if node is not None and k is not None
    }


def _literal(new: cst.Integer, _old: cst.CSTNode) -> cst.Integer:
    return new


def _batch_scaler(factor: int) -> Replacement:
    def apply(updated: cst.Call) -> cst.Call:
        arg = _second_argument(updated, "batch_size")
        if arg is None:
            # DataLoader's default batch size is 1.
            return set_keyword(updated, "batch_size", cst.Integer(str(factor)))
        new_arg = arg.with_changes(value=_times(arg.value, factor))
        return updated.with_changes(args=[new_arg if a is arg else a for a in updated.args])

    return apply


def _times(value: cst.BaseExpression, factor: int) -> cst.BaseExpression:
    literal = int_or_none(value, None)
    if literal is not None:
        return cst.Integer(str(literal * factor))
    code = cst.Module([]).code_for_node(value)
    simple = isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Float))
    return expression(f"{code} * {factor}" if simple else f"({code}) * {factor}")


def _second_argument(call: cst.Call, name: str) -> cst.Arg | None:
    """The argument ``name=`` or, absent, the second positional one (DataLoader's batch_size,
    an optimizer's lr)."""
    positional = _positional(call)
    return keyword_of(call, name) or (positional[1] if len(positional) >= 2 else None)


def non_blocking_copies(module: cst.Module, *, model_name: str | None = None) -> CodemodResult:
    """Add ``non_blocking=True`` to the host-to-device copies of batches inside loops.

    The copies are the ones the rules found (``SourceFacts.blocking_copies``: ``.to(<device>)``
    and ``.cuda()`` in a loop, on values other than modules), edited where they stand
    (``cell/parse.py``). A module's ``.to`` is a one-off, and copies to the CPU are left
    blocking because reading a non-blocking device-to-host copy before a sync returns garbage.
    """
    facts = facts_of(module, model_name)
    todo = [n for n in nodes_of(module, [c.node for c in facts.blocking_copies])
            if isinstance(n, cst.Call)]  # fmt: skip
    if not todo:
        if facts.non_blocking_copies:
            return Declined("every copy inside the loops already has non_blocking=True")
        return Declined("no .to(device) or .cuda() copy of a batch inside a loop in this cell")
    edits: dict[cst.CSTNode, Replacement] = {
        call: _setter({"non_blocking": "True"}) for call in todo
    }
    plural = "copy" if len(todo) == 1 else "copies"
    return Edited(replace_nodes(module, edits), f"{len(todo)} {plural}")


NON_BLOCKING_COPIES = Fix(
    "non_blocking_copies",
    "Non-blocking copies to the GPU",
    (
        "Each .to(device) of a batch makes Python wait until the copy is done.",
        "non_blocking=True (with pinned memory) lets the copy overlap with GPU work.",
    ),
    "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
    non_blocking_copies,
)
