"""Static facts about a cell's source for the rules: loaders, loops, per-step syncs and logs, flags.

Read with :mod:`ast` (line numbers and a read-only walk are all the rules need; the fixes package
does the libcst rewriting). IPython lines (``%time``, ``!ls``, ``x = !cmd``, ``obj?``) are hidden
behind placeholders by :func:`gpu_notebook.cell.ipython.protect`, the same door the fixes
use, and every line number is mapped back to the cell as written.

Line numbers: 1-based lines of the cell as the notebook shows it. ``Run.cell_source`` is the body
*below* the ``%%gpucheck`` line, so ``scan_source(run.cell_source, line_offset=1)`` numbers the
lines like the traceback and the stack profile do (the magic line is line 1).

Everything here is a heuristic over names, never a type check: a name is a "model" because the
cell calls module methods on it or builds it from ``nn.*``; a value is "a tensor made in the loop"
because the loop assigns it. The rules say "likely" where that matters, and live objects
(:mod:`gpu_notebook.cell.live`) confirm what exists in the namespace.

``cell_facts`` is the one reading every report makes: these facts plus the live objects behind
the names the cell reads.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from gpu_notebook.cell.calls import callees
from gpu_notebook.cell.collectives import own_collectives
from gpu_notebook.cell.facts import LoopFacts, Origin, SourceFacts
from gpu_notebook.cell.host_made import host_factories, host_reads_traced
from gpu_notebook.cell.ipython import (
    PLACEHOLDER_LINE,
    NotPythonCell,
    bound_by,
    plain_names,
    protect,
)
from gpu_notebook.cell.live import live_facts
from gpu_notebook.cell.live_hooks import HooksAtStart, LiveHooks, live_hooks, own_positions
from gpu_notebook.cell.loops import (
    frozen_forwards,
    inference_loops,
    loop_facts,
    per_sample_loops,
    validation,
)
from gpu_notebook.cell.names import (
    dotted,
    method_of,
    names_held,
    position,
    receiver_of,
    targets_of,
)
from gpu_notebook.cell.parse import parse_ast
from gpu_notebook.cell.registered_hooks import (
    reading_hook_lines,
    registered_hook_reads,
    removals_before_loop,
)
from gpu_notebook.cell.setup import (
    compiled,
    copies,
    created,
    flag,
    flags,
    framework_settings,
    loaders,
    optimizers,
    step_logs,
    tf32,
)
from gpu_notebook.cell.syncs import hook_reads, redraws, state_copies, syncs_and_logging
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.words import CUDNN_BENCHMARK, last

# Run.cell_source is the body below the %%gpucheck line, which is line 1 of the notebook cell.
CELL_LINE_OFFSET = 1


def cell_facts(
    source: str,
    namespace: Mapping[str, Any] | None = None,
    *,
    line_offset: int = CELL_LINE_OFFSET,
    made_before: bool = True,
    hooks_at_start: HooksAtStart | None = None,
) -> SourceFacts:
    """Static facts of ``source`` plus the live objects behind the names it reads.

    ``made_before``: the namespace's objects were made before ``source`` ran (a notebook's
    earlier cells); False for a script's own globals, which the script bound as it ran.
    ``hooks_at_start``: the live hooks as the cell started (``cell.live_hooks.hooks_at_start``),
    read with those on now: a hook the cell removed after its loop ran in it."""
    origins = callees(source, namespace)
    facts = scan_source(source, line_offset=line_offset, origins=origins)
    if namespace is None or not facts.parsed:
        return facts
    live = live_facts(namespace, facts.names_read, made_before=made_before)
    models = {m.name for m in live.models}
    if models - facts.model_names:
        # Rescan knowing which names hold modules: inference loops and copies depend on it.
        facts = scan_source(source, line_offset=line_offset, model_names=models, origins=origins)
    hooks = live_hooks(
        namespace,
        facts.names_read,
        source,
        sys.modules.get("torch"),
        at_start=hooks_at_start,
        removed=removals_before_loop(facts.tree) if facts.tree is not None else (),
    )
    facts = _with_live_hooks(facts, hooks)
    return dataclasses.replace(facts, live=live)


def _with_live_hooks(facts: SourceFacts, hooks: LiveHooks) -> SourceFacts:
    """The hooks' reads as the live modules hold them: the cell's own minus those removed
    before the step loop, plus the hooks of another cell or a user's file."""
    if hooks.own_on is None or facts.tree is None:
        return facts
    on = own_positions(facts.tree, hooks.own_on)
    return dataclasses.replace(
        facts,
        registered_hook_reads=registered_hook_reads(facts.tree, on) + hooks.reads,
        registered_hook_lines=reading_hook_lines(facts.tree, on),
        live_hook_lines=hooks.lines,
    )


def scan_source(
    source: str,
    *,
    line_offset: int = 0,
    model_names: Iterable[str] = (),
    origins: tuple[Origin, ...] = (),
) -> SourceFacts:
    """Scan a cell. ``line_offset`` is added to every line (1 for ``Run.cell_source``).

    ``model_names`` adds names known to hold modules (from the live namespace). ``origins``: the
    user's functions the cell calls (``cell.calls.callees``), read above it (their facts keep
    their origin). Never raises on user code: a cell that is not Python comes back with
    ``parsed=False`` and the reason.
    """
    try:
        cell = protect(source)
    except NotPythonCell as exc:
        return SourceFacts(parsed=False, parse_error=str(exc))
    above = [
        (origin.offset + k, text)
        for origin in origins
        for k, text in enumerate(origin.text.splitlines(), start=1)
    ]
    lines = [text for _, text in above] + cell.code.splitlines()
    mapping: list[int] = [line for line, _ in above]
    original = 1 + (1 if cell.magic_line else 0)
    for text in lines[len(above) :]:
        mapping.append(original + line_offset)
        match = PLACEHOLDER_LINE.match(text)
        # A placeholder already in the text (a fix reading the protected cell) is one line.
        index = int(match.group("index")) if match else len(cell.originals)
        original += len(cell.originals[index]) if index < len(cell.originals) else 1
    try:
        tree = parse_ast("".join(o.text for o in origins) + cell.code)
    except SyntaxError as exc:
        where = mapping[exc.lineno - 1] if exc.lineno and 0 < exc.lineno <= len(mapping) else None
        return SourceFacts(parsed=False, parse_error=f"not valid Python (line {where}): {exc.msg}")
    read = CellTree(tree, lines, mapping, frozenset(model_names), origins)
    return dataclasses.replace(_facts(read, cell.originals), origins=origins)


def _facts(tree: CellTree, originals: tuple[tuple[str, ...], ...] = ()) -> SourceFacts:
    loops = tuple(loop_facts(tree, loop) for loop in tree.loops)
    syncs, logged = syncs_and_logging(tree)
    # Checkpoint writes are gated as logs are (the same every-N fix), said by their own rule.
    logging = tuple(line for line in logged if line.kind not in ("checkpoint", "collect"))
    saves = tuple(line for line in logged if line.kind == "checkpoint")
    collects = tuple(line for line in logged if line.kind == "collect")
    flags_set = tuple(flags(tree))
    called = {last(dotted(c.func)) for c in tree.calls()}  # the last names of what is called
    return SourceFacts(
        parsed=True,
        tree=tree,
        # Not yet said through calls (cell.calls): the cell's own loaders and optimizers.
        loaders=tuple(ld for ld in loaders(tree) if ld.node is None or tree.in_cell(ld.node)),
        optimizers=tuple(o for o in optimizers(tree) if o.node is None or tree.in_cell(o.node)),
        loops=loops,
        model_names=frozenset(tree.models),
        names_read=frozenset(
            n.id
            for n in ast.walk(tree.tree)
            if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)
            and not PLACEHOLDER_LINE.match(f"{n.id}()")
        ),
        syncs=syncs,
        hook_reads=hook_reads(tree),
        registered_hook_reads=registered_hook_reads(tree),
        registered_hook_lines=reading_hook_lines(tree),
        logging=logging,
        saves=saves,
        collects=collects,
        collectives=own_collectives(tree),
        state_copies=state_copies(tree),
        redraws=redraws(tree),
        host_factories=host_factories(tree),
        host_reads=host_reads_traced(tree),
        constructed=tuple(
            (target.id, last(dotted(node.value.func)))
            for node in ast.walk(tree.tree)
            if isinstance(node, ast.Assign)
            and tree.in_cell(node)
            and isinstance(node.value, ast.Call)
            and dotted(node.value.func) is not None
            for target in node.targets
            if isinstance(target, ast.Name)
        ),
        validation=tuple(validation(tree)),
        frozen_forwards=tuple(frozen_forwards(tree)),
        per_sample_loops=tuple(per_sample_loops(tree)),
        blocking_copies=tuple(copies(tree, blocking=True)),
        non_blocking_copies=len(copies(tree, blocking=False)),
        inference_loops=inference_loops(tree, loops),
        eval_called=frozenset(
            name
            for c in tree.calls()
            if method_of(c) == "eval" and (name := dotted(receiver_of(c))) is not None
        ),
        autocast="autocast" in called,
        grad_scaler="GradScaler" in called,
        compiled=compiled(tree),
        created=tuple((name, node) for name, node in created(tree) if tree.in_cell(node)),
        training_arguments=tuple(
            sorted(
                (c for c in tree.calls() if last(dotted(c.func)) == "TrainingArguments"),
                key=position,
            )
        ),
        framework_settings=tuple(framework_settings(tree)),
        bindings=tuple(_bindings(tree, originals)),
        imported=frozenset(
            (alias.asname or alias.name).split(".")[0]
            for node in ast.walk(tree.tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        ),
        step_logs=tuple(step_logs(tree)),
        flags=flags_set,
        cudnn_benchmark=flag(flags_set, (CUDNN_BENCHMARK,)),
        tf32=tf32(flags_set),
        data_parallel=tuple(
            tree.source_line(c, "DataParallel")
            for c in tree.calls()
            if last(dotted(c.func)) == "DataParallel" and tree.in_cell(c)
        ),
        convolutions=any(
            re.fullmatch(
                r"(Conv|ConvTranspose)[123]d|conv[123]d|conv_transpose[123]d", last(dotted(n)) or ""
            )
            is not None
            for n in ast.walk(tree.tree)
            if isinstance(n, (ast.Attribute, ast.Name))
        ),
    )


def _bindings(
    tree: CellTree, originals: tuple[tuple[str, ...], ...] = ()
) -> list[tuple[str, int, int, bool]]:
    """(name, first line, last line, top level) of each statement binding a plain name:
    assignments, for targets, with ... as, imports, def and class, and the IPython lines that
    bind one (``%time loader = DataLoader(...)``, ``files = !ls``: ``originals`` holds each
    placeholder's lines). ``obj.attr = ...`` binds no name: it changes the object ``obj`` holds."""
    top = {id(stmt) for stmt in tree.tree.body}
    out = []
    for node in ast.walk(tree.tree):
        names: list[str] = []
        spans = 0
        if targets_of(node):
            names = [n for t in targets_of(node) for n in plain_names(t)]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            names = plain_names(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            names = [n for item in node.items if item.optional_vars is not None
                     for n in plain_names(item.optional_vars)]  # fmt: skip
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Expr) and (index := _placeholder(node)) is not None:
            held = originals[index] if index < len(originals) else ()
            names, spans = list(bound_by(held)), len(held)
        if not names or not tree.in_cell(node):  # the cell's own: what it binds
            continue
        first = tree.line_of(node)
        end = int(getattr(node, "end_lineno", 0) or getattr(node, "lineno", 1))
        last_line = tree.mapping[end - 1] if 0 < end <= len(tree.mapping) else first
        if spans:  # an IPython line continued over several physical lines ends at its last
            last_line += spans - 1
        out += [(n, first, last_line, id(node) in top) for n in names]
    return out


def _placeholder(node: ast.Expr) -> int | None:
    """The index of the IPython line an expression statement stands for (None: not one)."""
    call = node.value
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
        return None
    match = PLACEHOLDER_LINE.match(f"{call.func.id}()")
    return int(match.group("index")) if match else None


def names_mentioned(facts: SourceFacts, skip: LoopFacts | None = None) -> set[str]:
    """Every name the cell mentions outside the loop ``skip``: variables read or written,
    parameters, functions and classes defined, names imported, declared global (an attribute,
    ``step`` of ``opt.step()``, and a keyword, ``lr=``, are not names). A fix picks a new name
    none of these is, and keeps a value a line outside its loop reads."""
    if facts.tree is None:
        return set()
    found: set[str] = set()
    stack: list[ast.AST] = [facts.tree.tree]
    while stack:
        node = stack.pop()
        if skip is not None and node is skip.node:
            continue
        if isinstance(node, ast.Name):
            found.add(node.id)
        found |= names_held(node)
        stack.extend(ast.iter_child_nodes(node))
    return found
