"""Trace readers: Kineto JSON into numpy arrays (``kineto``), each file once a report (``windows``)."""

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
