"""Run a cell's body exactly as IPython would run the cell without the magic.

Same namespace, IPython syntax (line magics, ``!cmd``) through the shell's own transformers, the
last expression displayed as ``Out[N]``, and an exception shown as the normal traceback with the
cell's own line numbers (line 1 is the ``%%gpucheck`` line). A failure is also written into the
enclosing cell's ExecutionResult, so the kernel reports the execution as failed and "Run All"
stops there, while the magic itself returns normally and can still show a partial report.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from IPython.core.async_helpers import _pseudo_sync_runner
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

from gpu_notebook.exception_text import exception_line
from gpu_notebook.records import CellStatus

T = TypeVar("T")


@dataclass(frozen=True)
class CellOutcome:
    status: CellStatus
    error: str | None  # "ValueError: bad shape"
    exception: BaseException | None
    compiled: bool = True  # False: a SyntaxError, nothing ran
    # The value of the cell's last expression, which IPython would show as Out[N]: the magic
    # returns it, so whatever called the magic shows it (IPython's display hook for a plain
    # %%gpucheck cell, %%time around it) or drops it (%%prun -q), as for the cell without it.
    value: Any = None


async def run_cell_body(shell: Any, body: str, header_line: str) -> CellOutcome:
    """Execute ``body`` (the cell without its ``%%`` line) in the user's namespace.

    A coroutine, as IPython's own runner: a cell without top-level ``await`` completes at the
    first ``send`` (``run_sync``); one with it is awaited in the kernel's event loop (see
    ``magic_async``).
    """
    # The enclosing cell's result, taken now: a nested get_ipython().run_cell() in the body
    # replaces (then clears) the shell's current one, and a failure after it must still fail
    # the cell the user ran, as it would without the magic.
    outer = getattr(shell.displayhook, "exec_result", None)
    transformed = shell.transform_cell(body)
    raw = f"{header_line}\n{body}"
    # Line numbers as IPython gives them to the same cell without the magic, plus one: line 1
    # is the magic line. (IPython numbers a cell from its first non-blank line.)
    code = "\n" + transformed
    # The cell's own number: IPython has already counted past it while the cell runs.
    number = getattr(outer, "execution_count", None) or shell.execution_count
    cell_name = shell.compile.cache(code, number, raw_code=raw)
    result = ExecutionResult(ExecutionInfo(raw, False, False, False, None))
    try:
        tree = shell.compile.ast_parse(code, filename=cell_name)
    except (SyntaxError, OverflowError, ValueError) as exc:
        shell.showsyntaxerror(filename=cell_name)
        return dataclasses.replace(_outcome(outer, exc), compiled=False)
    tree = shell.transform_ast(tree)
    nodes: list[ast.stmt] = list(tree.body)
    interactivity = shell.ast_node_interactivity
    if shell.displayhook.semicolon_at_end_of_expression(transformed):
        # IPython reads the trailing ";" from the cell it ran (here "%%gpucheck ..."): say it.
        interactivity = "none"
    head, last, head_mode = _split_last_value(nodes, interactivity)
    await shell.run_ast_nodes(
        head, cell_name, interactivity=head_mode, compiler=shell.compile, result=result
    )
    value = None
    if last is not None and result.error_in_exec is None:
        caught: list[Any] = []
        # The last expression runs as IPython runs it ("single" mode), but its value goes to
        # the magic's caller instead of being shown from inside the magic.
        saved_hook = sys.displayhook
        sys.displayhook = caught.append
        try:
            await shell.run_ast_nodes(
                [last], cell_name, interactivity="last", compiler=shell.compile, result=result
            )
        finally:
            sys.displayhook = saved_hook
        value = next((v for v in reversed(caught) if v is not None), None)
    if result.error_in_exec is not None:
        return _outcome(outer, result.error_in_exec)
    return CellOutcome("ok", None, None, value=value)


def _split_last_value(
    nodes: list[ast.stmt], interactivity: str
) -> tuple[list[ast.stmt], ast.stmt | None, str]:
    """(nodes to run first, the expression whose value is the cell's, their interactivity).

    As IPython reads its ``ast_node_interactivity``: "last_expr_or_assign" shows the value a
    final ``name = ...`` assigns; the other statements keep their own mode ("all" still shows
    every earlier expression); a cell whose last statement is no expression has no value.
    """
    if not nodes:
        return nodes, None, interactivity
    if interactivity == "last_expr_or_assign":
        target = _assigned_name(nodes[-1])
        if target is not None:
            name = ast.Expr(ast.Name(target, ast.Load()))
            ast.copy_location(name, nodes[-1])
            ast.fix_missing_locations(name)
            nodes = [*nodes, name]
        interactivity = "last_expr"
    if interactivity in ("last_expr", "last", "all") and isinstance(nodes[-1], ast.Expr):
        return nodes[:-1], nodes[-1], "all" if interactivity == "all" else "none"
    return nodes, None, interactivity


def _assigned_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target: ast.expr | None = node.targets[0]
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        target = node.target
    else:
        target = None
    return target.id if isinstance(target, ast.Name) else None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never really suspends (a cell without top-level ``await``)."""
    return _pseudo_sync_runner(coro)  # type: ignore[no-any-return]


def compiles(shell: Any, body: str) -> bool:
    """Whether the body parses, as ``run_cell_body`` would parse it (IPython syntax included)."""
    try:
        shell.compile.ast_parse("\n" + shell.transform_cell(body))
    except (SyntaxError, OverflowError, ValueError):
        return False
    return True


def fail_enclosing(shell: Any, exc: BaseException) -> None:
    """Mark the cell the user ran as failed with ``exc`` (the kernel replies ``error`` and
    aborts the queued cells) without showing a traceback."""
    outer = getattr(shell.displayhook, "exec_result", None)
    if outer is not None and outer.error_in_exec is None:
        outer.error_in_exec = exc


def _outcome(outer: Any, exc: BaseException) -> CellOutcome:
    if outer is not None and outer.error_in_exec is None:
        outer.error_in_exec = exc
    status: CellStatus = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
    return CellOutcome(status, exception_line(exc), exc)
