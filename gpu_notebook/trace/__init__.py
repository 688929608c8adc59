"""Trace readers: Kineto JSON into numpy arrays (see ``gpu_notebook.trace.kineto``)."""

from __future__ import annotations

from gpu_notebook.trace.kineto import (
    GPU_CATEGORIES,
    HOST_CATEGORIES,
    DistributedInfo,
    Trace,
    load_trace,
    load_trace_dict,
)

__all__ = [
    "GPU_CATEGORIES",
    "HOST_CATEGORIES",
    "DistributedInfo",
    "Trace",
    "load_trace",
    "load_trace_dict",
]
