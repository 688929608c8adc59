"""Training the cell's source does that the measured thread did not: in child processes.

A cell that starts processes which train (``mp.spawn``, ``multiprocessing.Process``, hogwild)
runs its steps where no hook of ours is: the parent's own loop (often an evaluation) is all the
step clock sees. Read from the source only (names of calls), never from the user's objects.
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
    called = _called_names(run.cell_source)
    launchers = sorted(called & _LAUNCHERS)
    if "backward" not in called or not launchers:
        return None
    here = run.steps.event_counts.get("optimizer", 0)
    return (
        f"the cell starts processes ({', '.join(launchers)}) and its source trains: steps run "
        f"in those processes are not measured; this report covers this process only "
        f"({here} optimizer step(s) here)"
    )
