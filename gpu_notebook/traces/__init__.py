"""Trace readers: a file read capped and streamed (``source``), a Kineto trace's events cut into
pieces decoded one by one (``pieces``) into numpy arrays (``kineto``), and each window's file
decoded once a report, shared by every reader (``windows``)."""

from __future__ import annotations

from gpu_notebook.traces.kineto import (
    GPU_CATEGORIES,
    HOST_CATEGORIES,
    DistributedInfo,
    Trace,
    load_trace,
    load_trace_dict,
)
from gpu_notebook.traces.windows import WindowTraces

__all__ = [
    "GPU_CATEGORIES",
    "HOST_CATEGORIES",
    "DistributedInfo",
    "Trace",
    "WindowTraces",
    "load_trace",
    "load_trace_dict",
]
