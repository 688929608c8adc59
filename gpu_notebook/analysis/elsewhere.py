"""Training the cell's source does that the measured thread did not: in child processes.

A cell that starts processes which train (``mp.spawn``, ``multiprocessing.Process``, hogwild)
runs its steps elsewhere: its children count their optimizer steps for us, forked or spawned
(capture/children.py), and the parent's own loop (often an evaluation) is all that is
profiled. Read from the source (names of calls) and the
step clock's counts, never from the user's objects.
"""

from __future__ import annotations

import ast

from gpu_notebook.analysis.verdict_said import (
    ChildrenInput,
    ChildrenNote,
    ChildrenPhases,
    ChildrenUnknown,
)
from gpu_notebook.cell.ipython import protect
from gpu_notebook.cell.parse import parse_ast
from gpu_notebook.records import Run, Verdict

# A data wait at least this share of the children's step time: input-bound (verdict.py's
# INPUT_CRITICAL, which this module cannot import without a cycle).
_INPUT_SHARE = 0.20

_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef

# Calls that start processes running the user's function.
_LAUNCHERS = frozenset({"spawn", "start_processes", "Process", "Pool", "ProcessPoolExecutor"})


def _called_names(source: str) -> set[str]:
    """The names the source calls (``f`` of ``f(...)``, ``attr`` of ``x.attr(...)``), less a
    bare call of a class or function the source defines itself: a model class named ``Pool``
    (``model = Pool().to(device)``, a pooling classifier) starts no process (unseen round 14:
    "the script starts processes (Pool)" on a script that started none)."""
    # A notebook cell may hold IPython lines (`!ls`, `%time ...`): read through the same door as
    # the cell's facts, or one such line would hide every call of the cell.
    try:
        tree = parse_ast(protect(source).code)
    except (SyntaxError, ValueError):  # NotPythonCell is a ValueError
        return set()
    own = {node.name for node in ast.walk(tree) if isinstance(node, _Definition)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name) and func.id not in own:
                names.add(func.id)
    return names


def source_trains(source: str) -> bool:
    """Whether the source calls ``backward`` anywhere (a loop, a function, a thread's target)."""
    return "backward" in _called_names(source)


def defined_not_run(source: str) -> tuple[str, ...]:
    """The functions and classes a cell defines whose bodies train, when the cell trains only
    inside them and never uses them (calls, hands on or decorates with them): nothing of its
    training ran, whatever the step clock could follow. () when the cell trains itself, uses
    a definition that trains, or does not train.

    A cell that only defines ``train_epoch(...)`` for a later cell to call is a common notebook
    shape; its report must not guess that the training ran elsewhere.
    """
    try:
        tree = parse_ast(protect(source).code)
    except (SyntaxError, ValueError):  # NotPythonCell is a ValueError
        return ()
    trainers: list[_Definition] = []
    used: set[str] = set()

    def visit(node: ast.AST, inside: _Definition | None) -> None:
        if isinstance(node, _Definition):
            if inside is None and _trains(node):
                trainers.append(node)
            owner = inside if inside is not None else node
            # A decorator, a default or a base class runs at definition time, outside the body.
            for part in (*node.decorator_list, *_definition_time_parts(node)):
                visit(part, inside)
            for stmt in node.body:
                visit(stmt, owner)
            return
        if isinstance(node, ast.Call) and inside is None and _is_backward(node):
            used.add("<backward>")  # the cell trains itself
        # A name read inside a definition that trains is that definition's (recursion); read
        # anywhere else, a definition is used.
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and (inside is None or node.id != inside.name)
        ):
            used.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    for top in tree.body:
        visit(top, None)
    if "<backward>" in used or any(d.name in used for d in trainers):
        return ()
    return tuple(d.name for d in trainers)


# Calls that hand a coroutine to the event loop, to run when the cell gives the loop a turn.
_SCHEDULERS = frozenset(
    {"create_task", "ensure_future", "run_coroutine_threadsafe", "gather", "start_soon"}
)


def scheduled_not_awaited(source: str) -> tuple[tuple[str, ...], str | None]:
    """The coroutines (``async def``) a cell defines whose bodies train, when the cell calls
    them and awaits none of those calls: ``(names, scheduler)``, the scheduler the call that
    makes the coroutine is handed to (``create_task``...; None: a bare call, never awaited).
    ``((), None)`` otherwise.

    ``asyncio.get_running_loop().create_task(train(3))`` in a notebook cell starts nothing
    while the cell runs: the task runs in the kernel's loop once the cell has ended, where
    nothing is measured (unseen round 12, 20_asyncio_task_background). Read where no step
    was seen: a cell that awaits its training, or trains itself, has its steps.
    """
    try:
        tree = parse_ast(protect(source).code)
    except (SyntaxError, ValueError):  # NotPythonCell is a ValueError
        return (), None
    coroutines = {
        node.name for node in tree.body if isinstance(node, ast.AsyncFunctionDef) and _trains(node)
    }
    if not coroutines:
        return (), None
    awaited = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Await)}
    called: list[str] = []
    scheduler = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name in coroutines:
            if id(node) in awaited:
                return (), None
            called.append(name)
        elif name in _SCHEDULERS and any(
            isinstance(a, ast.Call) and _call_name(a) in coroutines for a in node.args
        ):
            scheduler = name
    return tuple(dict.fromkeys(called)), scheduler if called else None


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _trains(definition: _Definition) -> bool:
    return any(isinstance(n, ast.Call) and _is_backward(n) for n in ast.walk(definition))


def _is_backward(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "backward"


def _definition_time_parts(node: _Definition) -> list[ast.AST]:
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *node.keywords]
    return [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]


def children_train_note(run: Run) -> ChildrenNote | None:
    """One line when the cell starts processes and its source trains, else None."""
    counts = run.steps.event_counts
    return children_note(
        run.cell_source,
        here=counts.get("optimizer", 0),
        in_children=counts.get("optimizer_in_children", 0),
    )


def children_note(source: str, *, here: int, in_children: int) -> ChildrenNote | None:
    """Where the training of a cell that starts processes ran, and what of it was measured
    (worded by ``words.verdict``).

    Children count their optimizer steps for the parent (``in_children``, named per child with
    their step times in the run's notes): forked ones through the step clock's inherited hooks,
    spawned ones (spawn, forkserver) through an entry of multiprocessing's preparation data.
    Counted and timed, not profiled: torchrun under ``gpucheck run`` profiles each rank.
    """
    called = _called_names(source)
    launchers = tuple(sorted(called & _LAUNCHERS))
    trains = "backward" in called
    if not in_children and not (trains and launchers):
        return None
    return ChildrenNote(launchers, trains, here, in_children)


def children_verdict(run: Run) -> Verdict | None:
    """The verdict from the children's own phases when this process ran no optimizer step
    (its loop, an evaluation or a wait for the children, is not the training): None when no
    child timed a span of steps.

    Hooks split each child's steps into the DataLoader wait, backward, the optimizer step and
    the rest (forward and anything else); no trace says what the device did, so only a data
    wait decides a category (input-bound); any other phase is named, the category unknown.
    """
    rows = [c for c in run.steps.children if c.steps > 1 and c.span_s > 0]
    if run.steps.event_counts.get("optimizer", 0) or not rows:
        return None
    span = sum(c.span_s for c in rows)
    totals: dict[str, float] = {}
    for c in rows:
        for name, t in c.phases_s().items():
            totals[name] = totals.get(name, 0.0) + t
    bound, bound_s = max(totals.items(), key=lambda kv: kv[1])
    shares = tuple((name, t / span) for name, t in sorted(totals.items(), key=lambda kv: -kv[1]))
    steps = sum(c.steps for c in rows)
    lines = (ChildrenPhases(len(rows), steps, shares),)
    if totals["data"] / span >= _INPUT_SHARE:
        return Verdict(
            "input-bound",
            "",
            "",
            (),
            "low",
            answer=ChildrenInput(len(rows), totals["data"] / span),
            lines=lines,
        )
    return Verdict(
        "unknown",
        "",
        "",
        (),
        "low",
        answer=ChildrenUnknown(len(rows), bound, bound_s / span),
        lines=lines,
    )
