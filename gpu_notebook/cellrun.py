"""Run a cell's body exactly as IPython would run the cell without the magic.

Same namespace, IPython syntax (line magics, ``!cmd``) through the shell's own transformers, the
last expression displayed as ``Out[N]``, and an exception shown as the normal traceback with the
cell's own line numbers (line 1 is the ``%%gpucheck`` line). A failure is also written into the
enclosing cell's ExecutionResult, so the kernel reports the execution as failed and "Run All"
stops there, while the magic itself returns normally and can still show a partial report.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from IPython.core.async_helpers import _pseudo_sync_runner
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

from gpu_notebook.records import CellStatus


@dataclass(frozen=True)
class CellOutcome:
    status: CellStatus
    error: str | None  # "ValueError: bad shape"
    exception: BaseException | None


def run_cell_body(shell: Any, body: str, header_line: str) -> CellOutcome:
    """Execute ``body`` (the cell without its ``%%`` line) in the user's namespace."""
    transformed = shell.transform_cell(body)
    raw = f"{header_line}\n{body}"
    # Leading newlines keep line numbers equal to the notebook's: line 1 is the magic line, and
    # IPython's cleanup drops the body's leading blank lines, which we put back.
    code = "\n" * (1 + _leading_blank_lines(body)) + transformed
    cell_name = shell.compile.cache(code, shell.execution_count, raw_code=raw)
    result = ExecutionResult(ExecutionInfo(raw, False, False, False, None))
    try:
        tree = shell.compile.ast_parse(code, filename=cell_name)
    except (SyntaxError, OverflowError, ValueError) as exc:
        shell.showsyntaxerror(filename=cell_name)
        return _outcome(shell, exc)
    tree = shell.transform_ast(tree)
    nodes: list[ast.stmt] = list(tree.body)
    interactivity = shell.ast_node_interactivity
    coro = shell.run_ast_nodes(
        nodes, cell_name, interactivity=interactivity, compiler=shell.compile, result=result
    )
    _pseudo_sync_runner(coro)
    if result.error_in_exec is not None:
        return _outcome(shell, result.error_in_exec)
    return CellOutcome("ok", None, None)


def _leading_blank_lines(body: str) -> int:
    count = 0
    for line in body.splitlines():
        if line and not line.isspace():
            break
        count += 1
    return count


def _outcome(shell: Any, exc: BaseException) -> CellOutcome:
    outer = getattr(shell.displayhook, "exec_result", None)
    if outer is not None and outer.error_in_exec is None:
        outer.error_in_exec = exc
    status: CellStatus = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
    return CellOutcome(status, f"{type(exc).__name__}: {exc}".rstrip(": "), exc)
