"""``%%gpucheck`` on a cell with top-level ``await``: measured in the kernel's own event loop.

A cell magic is called synchronously, from inside the coroutine IPython runs for the cell, so
it cannot await the body itself. For such a cell (and only such a cell: IPython's
``should_run_async`` decides, as it does for a cell without the magic) an input transformer
rewrites ``%%gpucheck ARGS`` + body into one line, ``await <measure>(ARGS, body)``: IPython then
runs the cell as the async cell it is, and :func:`measure` awaits the body in the same loop,
namespace and cell as without the magic.
"""

from __future__ import annotations

from typing import Any

MAGIC = "%%gpucheck"


def rewrite_await_cells(lines: list[str]) -> list[str]:
    """IPython cleanup transformer: rewrite a ``%%gpucheck`` cell whose body needs a loop."""
    if not lines:
        return lines
    first = lines[0].strip()
    if first != MAGIC and not first.startswith(MAGIC + " "):
        return lines
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or not getattr(shell, "autoawait", False):
        return lines
    body = "".join(lines[1:])
    try:
        transformed = shell.transform_cell(body)
        needs_loop = shell.should_run_async(
            body, transformed_cell=transformed, preprocessing_exc_tuple=None
        )
    except Exception:  # noqa: BLE001 - not ours to judge: IPython reports it on the normal path
        return lines
    if not needs_loop:
        return lines
    args = first[len(MAGIC) :].strip()
    call = "__import__('gpu_notebook.magic_async', fromlist=['measure']).measure"
    return [f"await {call}({args!r}, {body!r})\n"]


async def measure(line: str, body: str) -> Any:
    """Run the magic on ``body``, awaiting it in the running loop; the body's last value is
    the rewritten cell's (IPython shows it as Out[N])."""
    from IPython import get_ipython

    from gpu_notebook.magic import GpuCheckMagics

    shell: Any = get_ipython()
    magics = shell.magics_manager.registry[GpuCheckMagics.__name__]
    return await magics.measure(line, body)
