"""A finding's fix as the report shows it: the patched cell, or why not (``FixProposal``).

``attach_fixes`` fills ``Finding.proposal`` through :func:`gpu_notebook.fixes.catalog.apply_fix` (the
rule module's own ``FIX`` where it has one, else the catalog's fix of that id). A DataLoader
built in an earlier cell, or by a framework from a live object (Lightning, HF Trainer), gets a
snippet that sets it there instead: its code, patch note and refusals are worded here.
"""

from __future__ import annotations

import ast
import dataclasses
import dis
import inspect
import sys
from collections.abc import Mapping, Sequence
from types import CodeType
from typing import Any

from gpu_notebook.cell.calls import callees
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.live import LiveFacts, LiveLoader, live_facts
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Finding, FixProposal
from gpu_notebook.rules import RULE_FIXES, cell_facts


def attach_fixes(
    findings: Sequence[Finding],
    cell_source: str,
    *,
    namespace: Mapping[str, Any] | None = None,
    made_before: bool = True,
) -> tuple[Finding, ...]:
    """Fill ``Finding.proposal`` for every finding with a fix id (findings keep their order).

    The proposal is the patched cell, or the catalog's refusal with its reason. When the
    DataLoader fix is refused because the loader was built in an earlier cell, and that loader
    is in ``namespace``, the proposal rebuilds it from the live object instead.
    ``made_before=False``: the namespace is a script's globals, bound by the source itself as it
    ran: nothing is rebuilt from a live object (above the script's first line none exists yet,
    and a run of the patched script makes its own), and no earlier cell is named; the user's
    functions it calls are still read (a fix in one of their files is said, as a diff).
    """
    from gpu_notebook.fixes import Refusal, to_proposal
    from gpu_notebook.fixes.through_calls import apply_through_calls

    cache: dict[tuple[str, tuple[tuple[str, Any], ...]], FixProposal] = {}
    live: LiveFacts | None = None
    # The user's functions the cell calls, read with it by the rules (cell.calls): a fix may
    # edit one of them.
    origins = callees(cell_source, namespace)
    out: list[Finding] = []
    for finding in findings:
        if finding.fix_id is None or finding.proposal is not None:
            out.append(finding)
            continue
        key = (finding.fix_id, tuple(sorted(finding.fix_params.items())))
        proposal = cache.get(key)
        if proposal is None:
            own = RULE_FIXES.get(finding.fix_id)
            params = dict(finding.fix_params)
            read = origins
            if finding.fix_id == "dataloader_workers":
                # A framework's loader gets its workers from its live object (the rebuilt
                # method, the object's own ``self.num_workers``): never a literal pasted into
                # its class.
                read = tuple(o for o in origins if not o.framework)
            result = apply_through_calls(own or finding.fix_id, cell_source, read, **params)
            if isinstance(result, Refusal) and result.on_script and not made_before:
                result = dataclasses.replace(result, reason=result.on_script)
            proposal = None
            refused_loader = finding.fix_id == "dataloader_workers" and isinstance(result, Refusal)
            earlier = namespace if made_before else None
            if refused_loader and earlier is not None:
                if live is None:
                    live = cell_facts(cell_source, earlier).live
                proposal = _live_loader_proposal(cell_source, finding, live, earlier)
                if proposal is None:
                    proposal = _framework_loader_proposal(cell_source, finding, live)
            if proposal is None:
                proposal = to_proposal(result, own)
            if proposal.refusal is not None and earlier is not None:
                proposal = _where_the_loader_is_made(cell_source, proposal, earlier)
            cache[key] = proposal
        out.append(dataclasses.replace(finding, proposal=proposal))
    return tuple(out)


def _where_the_loader_is_made(
    cell_source: str, proposal: FixProposal, namespace: Mapping[str, Any]
) -> FixProposal:
    """A refusal about the loader (no DataLoader call in this cell) names where to act when the
    loop iterates what a function of an earlier cell returns (``for x, y in batches():``): the
    loader is made inside that function, a new one on each call, so only its cell can set it."""
    refusal = proposal.refusal or ""
    if "DataLoader" not in refusal:
        return proposal
    facts = scan_source(cell_source)
    if facts.tree is None:
        return proposal
    bound = {b[0] for b in facts.bindings}
    pulled = _earlier_iterator(facts, bound, namespace)
    if pulled is not None:
        return dataclasses.replace(
            proposal,
            refusal=f"{refusal}: `{pulled}` is an iterator over a DataLoader, made in an earlier "
            "cell; set it where that loader is created and make the iterator again (rebuilt "
            "here, the loader would restart the epoch this cell continues)",
        )
    makers: list[str] = []
    for loop in facts.tree.loops:
        for call in ast.walk(getattr(loop, "iter", ast.Constant(None))):
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                continue
            name = call.func.id  # a plain name: looking it up runs no user code
            if name not in makers and name not in bound and inspect.isfunction(namespace.get(name)):
                makers.append(name)
    if len(makers) != 1:
        return _the_cell_that_made_it(cell_source, proposal, namespace)
    return dataclasses.replace(
        proposal,
        refusal=f"{refusal}: the loop iterates what `{makers[0]}()` returns, a function of an "
        f"earlier cell that makes a new loader on each call; make the change in its "
        f"DataLoader(...) call there and run that cell again",
    )


def _the_cell_that_made_it(
    cell_source: str, proposal: FixProposal, namespace: Mapping[str, Any]
) -> FixProposal:
    """ "where the loader is created": the cell that made it (In[N]), where the cell reads one
    DataLoader of an earlier cell and the kernel's history says which cell bound it."""
    refusal = proposal.refusal or ""
    if WHERE_THE_LOADER not in refusal:
        return proposal
    facts = cell_facts(cell_source, namespace)
    loaders = facts.live.loaders
    if len({ld.name for ld in loaders}) > 1:
        # Read through the functions the cell calls, a training function may read an evaluation
        # loader too (`run_epoch` iterating `train_loader` and passing `val_loader` to
        # `evaluate`): the one a training loop iterates is the loader meant.
        iterated = {name for loop in facts.training_loops() for name in loop.iterates}
        loaders = tuple(ld for ld in loaders if ld.name in iterated)
    made = {(ld.name, ld.made_in) for ld in loaders}
    if len(made) != 1:
        return proposal
    ((name, number),) = made
    if number is None:
        return proposal
    return dataclasses.replace(
        proposal,
        refusal=refusal.replace(
            WHERE_THE_LOADER, f"where the loader is created (`{name}`, In[{number}])"
        ),
    )


# What the data fixes' refusals say of a loader this cell does not make (fixes/codemods_data).
WHERE_THE_LOADER = "where the loader is created"


def _earlier_iterator(
    facts: SourceFacts, bound: set[str], namespace: Mapping[str, Any]
) -> str | None:
    """The name the cell pulls batches from with ``next(name)``, when it holds a DataLoader's
    iterator made in an earlier cell (read by its type only)."""
    data = sys.modules.get("torch.utils.data.dataloader")
    base = getattr(data, "_BaseDataLoaderIter", None) if data is not None else None
    if not isinstance(base, type):
        return None
    for call in facts.tree.calls() if facts.tree is not None else ():
        if not isinstance(call.func, ast.Name) or call.func.id != "next" or not call.args:
            continue
        arg = call.args[0]
        held = namespace.get(arg.id) if isinstance(arg, ast.Name) else None
        if isinstance(arg, ast.Name) and arg.id not in bound and issubclass(type(held), base):
            return arg.id
    return None


# The DataLoader settings a workers fix writes; its other parameters (running_workers: the count
# the loop ran with) steer the patch and are not settings.
_SETTINGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")


def _live_loader_proposal(
    cell_source: str, finding: Finding, live: LiveFacts, namespace: Mapping[str, Any]
) -> FixProposal | None:
    """Prepend a snippet that rebuilds the live loader the cell iterates, with the new settings."""
    from gpu_notebook.fixes import Refusal, prepended_patch, to_proposal

    facts = scan_source(cell_source)
    iterated = [name for loop in facts.loops for name in loop.iterates]
    loader = next((ld for name in iterated if (ld := live.loader(name)) is not None), None)
    if loader is None:
        loader = _iterator_made_here(facts, live)
    if loader is None:
        loader = _handed_to_training(facts, live)
    if loader is None:
        loader = _global_of_a_training_function(facts, namespace)
    if loader is None:
        return None
    params = finding.fix_params
    workers = params.get("num_workers")
    if loader.loader_class.startswith("accelerate."):
        loader = _prepared_here(facts, live) or loader
    if loader.loader_class.startswith("accelerate."):
        # accelerator.prepare() wraps the user's DataLoader (a DataLoaderShard): rebuilt as a
        # plain DataLoader it would lose its sharding and device placement. The user acts on
        # the loader they pass to prepare().
        settings = ", ".join(
            f"{k}={v}" for k, v in params.items() if v not in (None, False) and k in _SETTINGS
        )
        return to_proposal(
            Refusal(
                "dataloader_workers",
                f"`{loader.name}` comes from accelerate's `accelerator.prepare(...)`: set "
                f"{settings} on the DataLoader you pass to prepare() (where you build it), then "
                "prepare it again",
            )
        )
    snippet = rebuild_loader_source(
        loader,
        num_workers=workers if isinstance(workers, int) else None,
        pin_memory=bool(params.get("pin_memory", True)),
        persistent_workers=bool(params.get("persistent_workers", True)),
    )
    settings = ", ".join(
        f"{k}={v}"
        for k, v in params.items()
        if v not in (None, False) and k in _SETTINGS and k != "prefetch_factor"
    )
    note = f"rebuilt from the live `{loader.name}`: {settings}"
    rebound = _rebinding(facts, loader.name)
    readers = [loop.line for loop in facts.loops if loader.name in loop.iterates]
    if (
        rebound is not None
        and rebound[3]
        and len(_bindings(facts, loader.name)) == 1
        and all(line > rebound[2] for line in readers)
    ):
        # The cell makes the loader through a helper (`loader = make_loader(ds)`): rebuilt
        # right after that line, it is the one the loop iterates (above it, it would be lost).
        return _placed(cell_source, note, snippet, loader.name)
    if rebound is not None:
        # The cell makes its own loader after ours: the rebuilt one would never be iterated.
        return to_proposal(
            Refusal(
                "dataloader_workers",
                f"`{loader.name}` is bound again in this cell (line {rebound[1]}): set {settings} "
                "where that loader is built",
            )
        )
    return to_proposal(prepended_patch("dataloader_workers", cell_source, note, snippet))


def _iterator_made_here(facts: SourceFacts, live: LiveFacts) -> LiveLoader | None:
    """The live loader the cell turns into an iterator (``it = iter(loader)``, then ``next(it)``
    each step): rebuilt above the cell's lines, it is the one ``iter()`` reads. None when no such
    loader, or more than one. An iterator made in an earlier cell is not the cell's: rebuilding
    its loader would restart the epoch that a re-run of the cell continues."""
    if facts.tree is None:
        return None
    made = {
        a.id
        for call in facts.tree.calls()
        if isinstance(call.func, ast.Name) and call.func.id == "iter" and len(call.args) == 1
        for a in call.args
        if isinstance(a, ast.Name) and live.loader(a.id) is not None
    }
    return live.loader(next(iter(made))) if len(made) == 1 else None


def _prepared_here(facts: SourceFacts, live: LiveFacts) -> LiveLoader | None:
    """The plain live loader the cell hands to ``accelerator.prepare(...)`` itself: rebuilt
    above the cell's lines, it is the one prepare() wraps. None when no such call, or more than
    one such loader."""
    if facts.tree is None:
        return None
    handed = {
        a.id
        for call in facts.tree.calls()
        if (dotted(call.func) or "").rsplit(".", 1)[-1] == "prepare"
        for a in call.args
        if isinstance(a, ast.Name)
        and (ld := live.loader(a.id)) is not None
        and not ld.loader_class.startswith("accelerate.")
    }
    return live.loader(next(iter(handed))) if len(handed) == 1 else None


def _global_of_a_training_function(
    facts: SourceFacts, namespace: Mapping[str, Any]
) -> LiveLoader | None:
    """The live loader a function of an earlier cell iterates as a global (``def train_epoch():
    for x, y in train_loader: ... loss.backward()``) when the cell only calls it, directly or
    through another such function (``fit()`` calling ``train_epoch()``): the function looks the
    name up at each call, so a loader rebound above the cell's lines is the one it reads. Only
    functions of this namespace that call ``backward`` count (an evaluation function's loader
    is not the one the steps wait on); None unless exactly one loader."""
    if facts.tree is None:
        return None
    bound = {b[0] for b in facts.bindings}
    todo = [c.func.id for c in facts.tree.calls() if isinstance(c.func, ast.Name)]
    todo = [name for name in todo if name not in bound]
    seen: set[str] = set()
    names: set[str] = set()
    while todo and len(seen) < _MAX_FUNCTIONS_FOLLOWED:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        function = namespace.get(name)  # a plain name: looking it up runs no user code
        if not inspect.isfunction(function) or function.__globals__ is not namespace:
            continue
        codes = _code_objects(function.__code__)
        loaded = {
            str(ins.argval)
            for code in codes
            for ins in dis.get_instructions(code)
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")
        }
        if any("backward" in code.co_names for code in codes):
            names |= loaded
        todo.extend(sorted(loaded - seen))
    loaders = live_facts(namespace, sorted(names)).loaders
    return loaders[0] if len(loaders) == 1 else None


# How many functions of the namespace the search above reads at most (a call tree, not a program).
_MAX_FUNCTIONS_FOLLOWED = 32


def _code_objects(code: CodeType) -> list[CodeType]:
    """``code`` and the code of its nested functions and comprehensions."""
    out = [code]
    for const in code.co_consts:
        if isinstance(const, CodeType):
            out.extend(_code_objects(const))
    return out


# A call whose last name holds one of these trains on the loader it is handed
# (`train_one_epoch(model, loader, opt)`, `trainer.fit(module, train_dataloaders=dl)`).
_TRAINING_CALL_WORDS = ("train", "fit")


def _handed_to_training(facts: SourceFacts, live: LiveFacts) -> LiveLoader | None:
    """The live loader the cell hands to a call that trains on it, when the loop that iterates
    it is in a function of an earlier cell or a framework's: handed with an optimizer, to a
    ``train*`` keyword, or to a function named for training. None when no such loader, or more
    than one (an evaluation loader handed to ``evaluate(...)`` is never one of them)."""
    if facts.tree is None:
        return None
    optimizers = {o.name for o in live.optimizers}
    handed: set[str] = set()
    for call in facts.tree.calls():
        pairs = [(None, a) for a in call.args] + [(k.arg, k.value) for k in call.keywords]
        names = {(k, a.id) for k, a in pairs if isinstance(a, ast.Name)}
        loaders = {(k, n) for k, n in names if live.loader(n) is not None}
        if not loaders:
            continue
        called = (dotted(call.func) or "").rsplit(".", 1)[-1].lower()
        trains = any(w in called for w in _TRAINING_CALL_WORDS) or any(
            n in optimizers for _k, n in names
        )
        handed |= {n for k, n in loaders if trains or (k or "").startswith("train")}
    return live.loader(next(iter(handed))) if len(handed) == 1 else None


def _framework_loader_proposal(
    cell_source: str, finding: Finding, live: LiveFacts
) -> FixProposal | None:
    """Where a framework builds the loader from a live object: set it there, in the user's terms.

    Lightning ``train_dataloader`` passing ``num_workers=self.<attr>``: set that attribute on
    the live object (the script's own setting, never overridden by a literal in the call);
    otherwise the method is rebuilt from its source with the workers fix and put back on its
    class. HF Trainer: its ``args.dataloader_*`` fields, which it reads when it builds the
    loader in ``train()``.
    """
    from gpu_notebook.fixes import HEADER_PREFIX, Patch, apply_fix

    if not live.data_hooks:
        return None
    hook = live.data_hooks[0]
    params = finding.fix_params
    workers = params.get("num_workers")
    if not isinstance(workers, int):
        return None
    pin = bool(params.get("pin_memory", False))
    persistent = bool(params.get("persistent_workers", True))
    n = hook.name
    if hook.kind == "hf-trainer":
        lines = [f"{n}.args.dataloader_num_workers = {workers}"]
        if persistent and workers > 0:
            lines.append(f"{n}.args.dataloader_persistent_workers = True")
        if pin:
            lines.append(f"{n}.args.dataloader_pin_memory = True")
        snippet = "\n".join(lines) + "\n"
        where = f"the live Trainer `{n}`: args.dataloader_*; or pass them to TrainingArguments(...)"
    elif hook.workers_attribute is not None:
        snippet = f"{n}.{hook.workers_attribute} = {workers}\n"
        where = (
            f"`{n}.{hook.workers_attribute}`, which {hook.type_name}.train_dataloader passes as "
            f"num_workers; or build it with {hook.workers_attribute}={workers}"
        )
    elif hook.method_source is not None:
        patched = apply_fix("dataloader_workers", hook.method_source, num_workers=workers,
                            pin_memory=pin, persistent_workers=persistent)  # fmt: skip
        if not isinstance(patched, Patch):
            return None
        body = "\n".join(
            line for line in patched.source_after.splitlines() if not line.startswith(HEADER_PREFIX)
        )
        owner = n if hook.on_class else f"type({n})"
        snippet = f"{body}\n{owner}.train_dataloader = train_dataloader\n"
        where = f"{hook.type_name}.train_dataloader (defined in an earlier cell), rebuilt here"
    else:
        return None
    note = f"{hook.framework}: {where}"
    return _placed(cell_source, note, snippet, n)


def rebuild_loader_source(
    loader: LiveLoader,
    *,
    num_workers: int | None,
    pin_memory: bool = True,
    persistent_workers: bool = True,
    prefetch_factor: int | None = None,
) -> str:
    """One statement that rebinds ``loader.name`` to a DataLoader over the same data, new settings.

    What cannot be written as a literal is taken from the live object itself
    (``loader.dataset``, ``loader.sampler``, ``loader.collate_fn``...), so the snippet works in
    the next cell as long as the old loader is still bound to the same name. ``num_workers``
    None keeps the current count.
    """
    n = loader.name
    workers = loader.num_workers if num_workers is None else num_workers
    args: list[str] = [f"{n}.dataset"]
    if loader.custom_batch_sampler:
        args.append(f"batch_sampler={n}.batch_sampler")
    else:
        args.append(f"batch_size={loader.batch_size}")
        if loader.shuffle is True:
            args.append("shuffle=True")
        elif loader.shuffle is None and not loader.iterable_dataset:
            args.append(f"sampler={n}.sampler")
        if loader.drop_last:
            args.append("drop_last=True")
    if loader.custom_collate:
        args.append(f"collate_fn={n}.collate_fn")
    if loader.worker_init_fn:
        args.append(f"worker_init_fn={n}.worker_init_fn")
    if loader.generator:
        args.append(f"generator={n}.generator")
    args.append(f"num_workers={workers}")
    if pin_memory:
        args.append("pin_memory=True")
    # torch rejects persistent_workers and prefetch_factor without worker processes.
    if workers > 0 and persistent_workers:
        args.append("persistent_workers=True")
    if workers > 0 and prefetch_factor is not None:
        args.append(f"prefetch_factor={prefetch_factor}")
    call = ",\n    ".join(args)
    return f"import torch.utils.data\n{n} = torch.utils.data.DataLoader(\n    {call},\n)\n"


def _bindings(facts: SourceFacts, name: str) -> list[tuple[str, int, int, bool]]:
    return [b for b in facts.bindings if b[0] == name]


def _rebinding(facts: SourceFacts, name: str) -> tuple[str, int, int, bool] | None:
    """The cell's last binding of ``name`` (None: the cell never binds it)."""
    return next((b for b in reversed(facts.bindings) if b[0] == name), None)


def _placed(cell_source: str, note: str, snippet: str, name: str) -> FixProposal:
    """The snippet where it reaches the object the loop uses and runs in a fresh kernel: at the
    top when the object comes from an earlier cell; right after the cell's own binding of it
    when the cell builds it (``dm = DM(...)``: above it, the setting would go to the old object
    and fail with NameError in a new kernel); a refusal naming the line when that binding is not
    a top-level statement or is not the only one."""
    from gpu_notebook.fixes import Refusal, inserted_patch, prepended_patch, to_proposal

    facts = scan_source(cell_source)
    mine = _bindings(facts, name)
    if not mine:
        return to_proposal(prepended_patch("dataloader_workers", cell_source, note, snippet))
    _name, first, last, top = mine[-1]
    if len(mine) > 1 or not top:
        return to_proposal(
            Refusal(
                "dataloader_workers",
                f"`{name}` is bound in this cell (line {first}) inside a block or more than "
                f"once: add `{snippet.strip().splitlines()[0]}` right after the binding the loop uses",
            )
        )
    return to_proposal(inserted_patch("dataloader_workers", cell_source, note, snippet, last))


__all__ = ["attach_fixes", "rebuild_loader_source"]
