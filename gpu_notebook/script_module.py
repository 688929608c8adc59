"""A fresh ``__main__`` module for a user's script, as ``python script.py`` makes one.

``gpucheck run`` (``cli``) and each ``--try-fixes`` run (``tryfix/child``, a light child
process) execute the script's code in it: ``__file__`` names the script, the rest of the
module attributes are what CPython sets for a script run by path.
"""

from __future__ import annotations

import builtins
import io
import types

__all__ = ["compile_file", "fresh_main"]


def compile_file(path: str) -> types.CodeType:
    """The file's code, named by ``path`` (tracebacks), compiled as a script (no inherited flags)."""
    with io.open_code(path) as source:
        return compile(source.read(), path, "exec", dont_inherit=True)


def fresh_main(file: str) -> types.ModuleType:
    """An empty ``__main__`` whose ``__file__`` is ``file``."""
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=file,
        __cached__=None,
        __loader__=None,
        __package__=None,
        __spec__=None,
        __builtins__=builtins,
    )
    return module
