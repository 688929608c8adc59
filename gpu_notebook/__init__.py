"""gpu_notebook: measure a training cell and answer "optimize the code or buy more GPUs?".

Importing this package is cheap on purpose: torch, NVML and bokeh are imported only when a
measurement runs (``%load_ext gpu_notebook`` registers the magics and nothing else).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``__version__``, read when asked: labextension/package.json is the one version source
    (hatch-nodejs-version), through importlib.metadata: its import and the distribution scan
    stay out of ``import gpu_notebook`` (torch imports importlib.metadata itself, later)."""
    if name == "__version__":
        from importlib.metadata import version

        value: str = version("gpu-notebook")
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GpuNotebookWarning", "__version__", "load_ipython_extension", "wait_for_warm_imports"]


class GpuNotebookWarning(UserWarning):
    """Warnings issued by gpu_notebook itself (tests turn them into errors)."""


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%gpucheck`` (called by ``%load_ext gpu_notebook``)."""
    from gpu_notebook.magic import GpuCheckMagics
    from gpu_notebook.magic_async import rewrite_await_cells

    magics = GpuCheckMagics(ipython)
    # `%reload_ext gpu_notebook` makes a new instance: the session's reports go on to it, so
    # the next cell still gets its before/after (it had none after a reload).
    earlier = getattr(ipython, "magics_manager", None)
    earlier = earlier.registry.get(GpuCheckMagics.__name__) if earlier is not None else None
    if earlier is not None:
        magics.reports = earlier.reports
    ipython.register_magics(magics)
    cleanup = getattr(ipython, "input_transformers_cleanup", None)
    if cleanup is not None and rewrite_await_cells not in cleanup:
        cleanup.append(rewrite_await_cells)  # cells with top-level await (magic_async.py)
    _start_warm_imports()


# What the first report needs (libcst ~0.2 s, bokeh ~0.5 s, ipywidgets): imported on a thread
# while the user types, so the first report comes in ~0.4 s instead of ~1.2 s
# (benchmarks/README.md, C). A capture waits for it before starting (see wait_for_warm_imports).
# torch is not among them: the thread that imports torch registers Kineto's client, and a profiler
# later started from another thread (the cell's) makes Kineto print "ERROR: External init callback
# must run in same thread as registerClient" into the user's cell output. A training cell imports
# torch itself, on its own thread, at no extra cost to it.
_WARM_MODULES = (
    "gpu_notebook.rules",
    "gpu_notebook.fixes.catalog",
    "gpu_notebook.views.report_widget",
    "bokeh.models",
    "bokeh.plotting",
    "bokeh.layouts",
    "bokeh.embed",
)
_warm_thread: Any = None


def _start_warm_imports() -> None:
    import contextlib
    import importlib
    import threading

    global _warm_thread
    if _warm_thread is not None:
        return

    def warm() -> None:
        from gpu_notebook.hygiene import our_imports_leave_no_filters

        with our_imports_leave_no_filters():  # bokeh adds warnings filters when imported
            for name in _WARM_MODULES:
                # A failing import here is said by the real one, in context, when it is needed
                # (a user's cell importing a module of ours at the same time may meet this
                # thread in an import cycle: Python's _DeadlockError is a RuntimeError).
                with contextlib.suppress(ImportError, RuntimeError):
                    importlib.import_module(name)

    _warm_thread = threading.Thread(target=warm, name="gpu_notebook-warm-imports", daemon=True)
    _warm_thread.start()


def wait_for_warm_imports() -> None:
    """Join the background imports (a Run-All may reach %%gpucheck before they finish)."""
    if _warm_thread is not None:
        _warm_thread.join()


def unload_ipython_extension(ipython: Any) -> None:
    """Take out the await-cell transformer; nothing else of ours survives a cell."""
    from gpu_notebook.magic_async import rewrite_await_cells

    cleanup = getattr(ipython, "input_transformers_cleanup", None)
    if cleanup is not None and rewrite_await_cells in cleanup:
        cleanup.remove(rewrite_await_cells)
