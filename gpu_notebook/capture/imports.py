"""Be told when a module finishes importing, without importing it ourselves.

``%load_ext`` and ``gpucheck run`` must not import torch before the user's code does: a script
that sets ``OMP_NUM_THREADS`` on its first line, or a notebook that does it in its first cell,
would otherwise get torch's defaults. And once ``torch._dynamo`` loads (``torch.compile``,
``torch.export``), the step clock's global module hooks must be gone before dynamo traces a
module: dynamo guards on them, warns about them and would recompile once they are removed.

:class:`ImportWatch` is a one-shot ``sys.meta_path`` finder: it finds nothing itself; for a
watched name it asks the finders after it for the real spec and wraps the spec's loader so the
callback runs right after the module's code has executed, on the importing thread.
``close()`` takes it out of ``sys.meta_path`` again (it outlives no capture).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class _NotifyingLoader(importlib.abc.Loader):
    """The real loader, plus a call once the module has executed."""

    def __init__(self, real: Any, on_loaded: Callable[[str], None]) -> None:
        self._real = real
        self._on_loaded = on_loaded

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._real, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._real.exec_module(module)
        finally:
            # The module keeps the real loader, as if we had never been there.
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._real
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._real
        self._on_loaded(module.__name__)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... of the real loader
        return getattr(self._real, name)


class ImportWatch(importlib.abc.MetaPathFinder):
    """Calls ``callback(name)`` once for each name in ``names`` when it finishes importing.

    Names already in ``sys.modules`` are reported by :meth:`start` at once. The callback runs
    on the importing thread, inside the ``import`` statement, after the module is complete.
    """

    def __init__(self, names: Sequence[str], callback: Callable[[str], None]) -> None:
        self._pending = set(names)
        self._callback = callback
        self._lock = threading.Lock()
        self._finding = threading.local()

    def start(self) -> ImportWatch:
        for name in sorted(self._pending):
            if name in sys.modules:
                self._done(name)
        if self._pending and self not in sys.meta_path:
            sys.meta_path.insert(0, self)
        return self

    def close(self) -> None:
        with self._lock:
            self._pending.clear()
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)

    def _done(self, name: str) -> None:
        with self._lock:
            if name not in self._pending:
                return
            self._pending.discard(name)
            empty = not self._pending
        if empty:
            self.close()
        self._callback(name)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._pending or getattr(self._finding, "active", False):
            return None
        self._finding.active = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding.active = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, self._done)
        return spec
