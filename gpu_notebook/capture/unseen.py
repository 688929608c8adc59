"""Our wrappers of torch entry points and our hooks, unseen by torch's compilers and tracers.

Stdlib only at import (a spawned child imports this, see children.py); torch's modules are read
from ``sys.modules`` when they are there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def tracing_probe(torch: Any) -> Callable[[], bool]:
    """A function that says whether torch is tracing rather than running: then hooks step aside.

    Dynamo constant-folds ``torch.compiler.is_compiling()`` (the hook traces to nothing, no
    graph break); fx hands Proxies to module hooks during ``symbolic_trace``; the JIT tracer
    would record whatever the hook touches.
    """
    is_compiling = torch.compiler.is_compiling
    tracing_state = torch._C._get_tracing_state
    try:
        from torch.fx import _symbolic_trace as fx_trace
        from torch.fx._symbolic_trace import is_fx_symbolic_tracing as is_fx_tracing
    except ImportError:  # pragma: no cover - older torch

        def is_fx_tracing() -> bool:
            return False

        fx_trace = None

    if fx_trace is not None and isinstance(getattr(fx_trace, "_is_fx_tracing_flag", None), bool):
        # This runs twice a step: fx's own flag read directly, not through the function that
        # reads it (``is_fx_symbolic_tracing`` is the flag and not compiling, and compiling is
        # asked first). ``is_compiling()`` stays a call: Dynamo constant-folds it.
        def tracing() -> bool:
            return bool(
                is_compiling() or fx_trace._is_fx_tracing_flag or tracing_state() is not None
            )

        return tracing

    def tracing_via_calls() -> bool:
        return bool(is_compiling() or is_fx_tracing() or tracing_state() is not None)

    return tracing_via_calls


def invisible_to_compilers(wrapper: Any, original: Any, key: str) -> None:
    """Make a wrapper of a torch entry point look like the entry point to torch's compilers.

    Dynamo: the wrapper's frame is skipped (the frames it calls are handled as without it), so
    a compiled training step compiles the same frames and graphs and breaks where it would
    (the wrapper's code is a constant: marked once per process, in the code object, for good).
    TorchScript resolves a builtin by identity (``torch.jit._builtins``): while patched, the
    wrapper maps to the original's op, and the mapping goes at ``visible_again``.
    """
    skip_in_dynamo(getattr(wrapper, "__code__", None), callees=False)
    builtins = sys.modules.get("torch.jit._builtins")
    if builtins is None:
        return
    op = next((op for fn, op in builtins._builtin_ops if fn is original), None)
    if op is None:
        return
    builtins._builtin_ops.append((wrapper, op))  # read when the table is built (lazily)
    table = builtins._builtin_table
    if table is not None:
        table[id(wrapper)] = op


def skip_in_dynamo(code: Any, *, callees: bool = True) -> None:
    """Dynamo never compiles this code's frames, nor (``callees``) any frame they call.

    A wrapper of a torch entry point passes ``callees=False``: the original it calls (and the
    user's code under it) is Dynamo's to judge, as without the wrapper.
    """
    if code is None or code in _SKIPPED_CODES:
        return
    eval_frame = sys.modules.get("torch._C._dynamo.eval_frame")
    strategy = getattr(eval_frame, "_FrameExecStrategy", None)
    action = getattr(eval_frame, "_FrameAction", None)
    if strategy is None or action is None:
        return
    below = action.SKIP if callees else action.DEFAULT
    eval_frame.set_code_exec_strategy(code, strategy(action.SKIP, below))  # type: ignore[union-attr]
    _SKIPPED_CODES.add(code)


def visible_again(wrapper: Any, original: Any) -> None:
    builtins = sys.modules.get("torch.jit._builtins")
    if builtins is None:
        return
    # Ours was appended last (1,500+ entries before it): look from the end, not at every one,
    # since this runs inside the user's step when the clock goes lean.
    ops = builtins._builtin_ops
    for i in range(len(ops) - 1, -1, -1):
        if ops[i][0] is wrapper:
            del ops[i]
            break
    table = builtins._builtin_table
    if table is not None and id(wrapper) in table:
        del table[id(wrapper)]


_SKIPPED_CODES: set[Any] = set()
