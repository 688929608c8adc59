"""gpu_notebook: measure a training cell and answer "optimize the code or buy more GPUs?".

Importing this package is cheap on purpose: torch, NVML and bokeh are imported only when a
measurement runs (``%load_ext gpu_notebook`` registers the magics and nothing else).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["GpuNotebookWarning", "__version__", "load_ipython_extension"]


class GpuNotebookWarning(UserWarning):
    """Warnings issued by gpu_notebook itself (tests turn them into errors)."""


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%gpucheck`` (called by ``%load_ext gpu_notebook``)."""
    from gpu_notebook.magic import GpuCheckMagics

    ipython.register_magics(GpuCheckMagics)


def unload_ipython_extension(ipython: Any) -> None:
    """Nothing global survives a cell, so unloading has nothing to undo."""
