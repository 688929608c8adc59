"""The terminal's live view: one status line that ``gpucheck run`` rewrites in place on stderr
while the script runs (the notebook's live view is ``live.LiveView``)."""

from __future__ import annotations

import shutil
import threading
import time
from typing import IO

from gpu_notebook.records import LiveStatus

__all__ = ["LiveLine"]


class LiveLine:
    """One status line rewritten in place on a terminal, at most twice a second."""

    def __init__(self, stream: IO[str], prefix: str = "gpucheck") -> None:
        self._stream = stream
        self._prefix = prefix
        self._last = 0.0
        self._lock = threading.Lock()
        self._width = 0

    def update(self, status: LiveStatus) -> None:
        now = time.monotonic()
        if now - self._last < 0.5:
            return
        self._last = now
        parts = [f"step {status.step_count}"]
        if status.median_step_s is not None:
            parts.append(f"{status.median_step_s * 1e3:.1f} ms/step")
        sample = status.sample
        for gpu in sample.gpus:
            util = "n/a" if gpu.utilization_pct is None else f"{gpu.utilization_pct:.0f}%"
            parts.append(f"GPU{gpu.index} {util}")
        if sample.process_cpu_pct is not None:
            parts.append(f"CPU {sample.process_cpu_pct:.0f}%")
        if status.recording:
            parts.append("profiling")
        line = f"{self._prefix}: " + " | ".join(parts)
        width = shutil.get_terminal_size((100, 20)).columns - 1
        with self._lock:
            self._width = max(self._width, len(line[:width]))
            self._stream.write("\r" + line[:width].ljust(self._width))
            self._stream.flush()

    def clear(self) -> None:
        with self._lock:
            if self._width:
                self._stream.write("\r" + " " * self._width + "\r")
                self._stream.flush()
                self._width = 0
