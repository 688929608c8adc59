"""Training the cell's source does that the measured thread did not: in child processes.

A cell that starts processes which train (``mp.spawn``, ``multiprocessing.Process``, hogwild)
runs its steps elsewhere: its children count their optimizer steps for us, forked or spawned
(capture/children.py), and the parent's own loop (often an evaluation) is all that is
profiled. Read from the source (names of calls) and the
step clock's counts, never from the user's objects.
"""

from __future__ import annotations

import ast

from gpu_notebook.cell.parse import parse_ast
from gpu_notebook.records import Run

# Calls that start processes running the user's function.
_LAUNCHERS = frozenset({"spawn", "start_processes", "Process", "Pool", "ProcessPoolExecutor"})


def _called_names(source: str) -> set[str]:
    try:
        tree = parse_ast(source)
    except (SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


def source_trains(source: str) -> bool:
    """Whether the source calls ``backward`` anywhere (a loop, a function, a thread's target)."""
    return "backward" in _called_names(source)


def children_train_note(run: Run) -> str | None:
    """One line when the cell starts processes and its source trains, else None."""
    counts = run.steps.event_counts
    return children_note(
        run.cell_source,
        here=counts.get("optimizer", 0),
        in_children=counts.get("optimizer_in_children", 0),
    )


def children_note(source: str, *, here: int, in_children: int) -> str | None:
    """Where the training of a cell that starts processes ran, and what of it was measured.

    Children count their optimizer steps for the parent (``in_children``, named per child with
    their step times in the run's notes): forked ones through the step clock's inherited hooks,
    spawned ones (spawn, forkserver) through an entry of multiprocessing's preparation data.
    Counted and timed, not profiled: torchrun under ``gpucheck run`` profiles each rank.
    """
    called = _called_names(source)
    launchers = sorted(called & _LAUNCHERS)
    trains = "backward" in called
    if not in_children and not (trains and launchers):
        return None
    started = (
        f"the cell starts processes ({', '.join(launchers)})"
        + (" and its source trains: " if trains else ": ")
        if launchers
        else ""
    )
    profile = (
        "to profile each one, run the training as a script under torchrun, where `gpucheck run` "
        "measures every rank (`torchrun --nproc-per-node N -m gpu_notebook run train.py`)"
    )
    if in_children:
        return (
            f"{started}{in_children} optimizer step(s) ran in child processes (counted and timed "
            f"per child, see the notes; not profiled), {here} here; the phases and the verdict "
            f"are this process's; {profile}"
        )
    return (
        f"{started}no optimizer step was counted in its child processes; this report covers "
        f"this process only ({here} optimizer step(s) here); {profile}"
    )
