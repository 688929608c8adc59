"""Is what ``gpucheck run`` was given a launcher (torchrun, python, mpirun, accelerate...)?

Measuring a launcher measures its agent process, not the training it starts. A launcher is known
by its name (any path to it: ``/opt/venv/bin/torchrun``, ``python3.11``), by being a program
rather than Python source (an ELF binary), or by a console-script wrapper that imports a
launcher's entry point (``from torch.distributed.run import main``). The hint puts gpucheck
inside it, keeping the user's own arguments.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Sequence

# How each launcher is told to start `gpucheck run` in every process it launches.
_TORCH = ("torch.distributed.run", ["-m", "gpu_notebook", "run"])
_BY_NAME: dict[str, tuple[str, list[str]]] = {
    "torchrun": _TORCH,
    "torch.distributed.run": _TORCH,
    "torch.distributed.launch": _TORCH,
    "accelerate": ("accelerate launch", ["-m", "gpu_notebook", "run"]),
    "deepspeed": ("deepspeed", ["--module", "gpu_notebook", "run"]),
    "mpirun": ("MPI", ["python", "-m", "gpu_notebook", "run"]),
    "mpiexec": ("MPI", ["python", "-m", "gpu_notebook", "run"]),
    "srun": ("Slurm", ["python", "-m", "gpu_notebook", "run"]),
    "horovodrun": ("Horovod", ["python", "-m", "gpu_notebook", "run"]),
}
# Entry-point modules of launchers, as a console-script wrapper imports them.
_LAUNCHER_MODULES: dict[str, str] = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "accelerate.commands.accelerate_cli": "accelerate",
    "accelerate.commands.launch": "accelerate",
    "deepspeed.launcher.runner": "deepspeed",
    "horovod.runner.launch": "horovodrun",
}
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[dmtw]?(\.exe)?$", re.I)
_BINARY_MAGIC = (b"\x7fELF", b"MZ", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


def launcher_of(script: str) -> str | None:
    """The launcher ``script`` is ("torchrun", "python", ...), or None for a training script."""
    name = os.path.basename(script.rstrip("/\\"))
    base = name[:-4] if name.lower().endswith(".exe") else name
    if base in _BY_NAME:
        return base
    if _PYTHON.match(name):
        return "python"
    try:
        with open(script, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None
    if head.startswith(_BINARY_MAGIC) or b"\0" in head:
        return "a program"
    return _imported_launcher(head)


def _imported_launcher(source: bytes) -> str | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for module in modules:
            if module in _LAUNCHER_MODULES:
                return _LAUNCHER_MODULES[module]
    return None


def launcher_hint(script: str, args: Sequence[str]) -> str:
    """What to run instead, with the user's own arguments, for a ``script`` that is a launcher."""
    kind = launcher_of(script) or "a program"
    argv = [script, *args]
    if kind == "python":
        rest = list(args)
        if len(rest) >= 2 and rest[0] == "-m" and rest[1] in _BY_NAME:
            _, prefix = _BY_NAME[rest[1]]
            return _inside(argv, prefix, f"{rest[1]} launches the training")
        if rest and rest[0].endswith(".py"):
            return f"drop the interpreter: `{shlex.join(['gpucheck', 'run', *rest])}`"
        return f"run the training script itself: `{shlex.join(['gpucheck', 'run', 'train.py'])}`"
    if kind == "a program":
        return (
            "gpucheck run measures a Python script; for a program that starts Python, put "
            "gpucheck inside it: `... python -m gpu_notebook run train.py`"
        )
    _, prefix = _BY_NAME[kind]
    return _inside(argv, prefix, f"{kind} starts the processes that train")


def _inside(argv: list[str], prefix: list[str], why: str) -> str:
    """``argv`` with ``prefix`` before its training script (the first ``*.py`` argument)."""
    at = next((i for i, a in enumerate(argv) if i and a.endswith(".py")), None)
    if at is None:
        suggestion = [*argv, *prefix, "train.py"]
    else:
        before = argv[at - 1]
        cut = (
            prefix[1:]
            if prefix[0] == "python" and _PYTHON.match(os.path.basename(before))
            else prefix
        )
        suggestion = [*argv[:at], *cut, *argv[at:]]
    return f"{why}: put gpucheck inside it, `{shlex.join(suggestion)}`"
