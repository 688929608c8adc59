"""Shared fixtures: a real IPython shell with the extension loaded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import cells


@pytest.fixture(scope="session")
def ip() -> Iterator[Any]:
    """The real global IPython shell (IPython.testing.globalipapp), gpu_notebook loaded."""
    from IPython.testing import globalipapp

    # get_ipython, not start_ipython: the latter returns None once anything started the global
    # shell (test_bridge's fixture does, through get_ipython), so running test_bridge.py before
    # the first test using this fixture failed every one of them at setup.
    shell = globalipapp.get_ipython()
    assert shell is not None
    shell.run_cell("%load_ext gpu_notebook")
    res = shell.run_cell(cells.SETUP)
    assert res.success, res.error_in_exec
    _SETUP_NAMES.update((k, shell.user_ns[k]) for k in _setup_names() if k in shell.user_ns)
    yield shell


# What cells.SETUP binds in the shared shell, as it bound it. A test's cell that rebinds one
# (``mlp = nn.Sequential(...)`` in a cell of its own) would change every later test's ``mlp()``
# in this session: test_large_elementwise_ops did, and 20 of test_magic's cells then raised
# TypeError. ``_setup_names_stay`` binds them back after each test module (a module may rebind
# them for its own tests on purpose: tests/scenarios' COMMON_SETUP has an mlp of its own).
_SETUP_NAMES: dict[str, Any] = {}


def _setup_names() -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.parse(cells.SETUP).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


@pytest.fixture(autouse=True, scope="module")
def _environment_stays() -> Iterator[None]:
    """After each test module, the process's environment is what it was before it: a cell run in the
    shared shell with ``%env NAME=1`` sets it in this process (test_magic's shell-lines test),
    and every kernel or script a later test starts would inherit it (test_example_notebooks'
    environment checks read ``GPUCHECK_T`` when they ran after it)."""
    import os

    before = dict(os.environ)
    yield
    for name in [k for k in os.environ if k not in before]:
        del os.environ[name]
    for name, value in before.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


@pytest.fixture(autouse=True, scope="module")
def _setup_names_stay() -> Iterator[None]:
    """After each test module, the shared shell's SETUP names are SETUP's objects again."""
    yield
    if not _SETUP_NAMES:
        return
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    if shell is not None:
        shell.user_ns.update(_SETUP_NAMES)


@pytest.fixture(scope="session")
def reference_traces() -> Any:
    """Folder of the Kineto traces recorded on real GPUs (shared/reference_traces, not committed).

    ``GPU_NOTEBOOK_REFERENCE_TRACES`` overrides the default ``<repo>/../shared/reference_traces``;
    tests that need it are skipped, saying where they looked, when the folder is absent.
    """
    import os
    from pathlib import Path

    default = Path(__file__).resolve().parents[1].parent / "shared" / "reference_traces"
    folder = Path(os.environ.get("GPU_NOTEBOOK_REFERENCE_TRACES", default))
    if not folder.is_dir():
        pytest.skip(
            f"reference traces not found at {folder} "
            "(set GPU_NOTEBOOK_REFERENCE_TRACES to the shared/reference_traces folder)"
        )
    return folder


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each test starts as a fresh process would with respect to Dynamo (as torch's own test
    suite does): the step clock installs no optimizer hooks in a process where Dynamo has
    compiled (their dicts would join a compiled step's guards), so one test's torch.compile
    would otherwise change how every later test in this process finds its steps."""
    yield
    import sys

    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
        counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
        if counters is not None:
            counters.clear()


@pytest.fixture
def default_hangup() -> Iterator[None]:
    """Children start with SIGHUP's and SIGTERM's default action while the test runs.

    A test runner started under ``nohup`` (or by a service that ignores them) passes these
    signals on ignored, and an ignored signal stays ignored under gpucheck as without it: a test
    of what the default action does would then see the run go on to exit 0.
    """
    import signal

    saved = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGTERM)}
    for s, handler in saved.items():
        if handler is signal.SIG_IGN:
            signal.signal(s, signal.SIG_DFL)
    try:
        yield
    finally:
        for s, handler in saved.items():
            if handler is signal.SIG_IGN:
                signal.signal(s, handler)
