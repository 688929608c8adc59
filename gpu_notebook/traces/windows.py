"""The traces of one report: each profiler window's file decoded once, then shared by every reader.

Holistic Trace Analysis parses a job's trace files once into one ``Trace`` that every analysis
takes. This is ours for one report: ``build_report`` and ``gpucheck analyze`` make one, and the
analysis (phases, the later windows, the GPU estimate, the all-reduce), the rules (the steady
steps' operators) take it instead of a path, so no file is decoded twice for a report.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu_notebook.traces import kineto
from gpu_notebook.traces.kineto import Trace

__all__ = ["WindowTraces"]


class WindowTraces:
    """Decoded traces by file path, each decoded on first use (``kineto.load_trace``) and kept.

    A file that cannot be decoded is not tried again: its error is kept and raised to every
    later reader, as the first one got it.
    """

    def __init__(self, decoded: Mapping[str, Trace] | None = None) -> None:
        self._decoded: dict[str, Trace | OSError | ValueError] = dict(decoded or {})

    def load(self, path: str) -> Trace:
        """The trace in ``path`` (raises what ``kineto.load_trace`` raises)."""
        found = self._decoded.get(path)
        if found is None:
            try:
                found = kineto.load_trace(path)
            except (OSError, ValueError) as exc:
                found = exc
            self._decoded[path] = found
        if isinstance(found, Trace):
            return found
        raise found

    def get(self, path: str | None) -> Trace | None:
        """The trace in ``path``; None without a path or when the file cannot be decoded."""
        if path is None:
            return None
        try:
            return self.load(path)
        except (OSError, ValueError):
            return None
