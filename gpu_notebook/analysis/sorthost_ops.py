"""The tensor operators of a CPU trace's steps that the phases paint "other": work a GPU runs as
kernels, though no model phase holds it.

"other" is host time covered by some event but by no classified range (phases.py): an
operator outside the forward, the backward and the optimizer is there, as is Python inside a
marked range. A loop's own tensor work under ``torch.no_grad()`` between the optimizer and the
next forward (a hard-negative ``argsort`` over a memory bank, a queue or bank update, an EMA)
lands there, and ``host.outside_ops_share`` reads it as host Python: the GPU estimate kept a
66 ms CPU sort a step as host time on the GPU (benchmarks/README.md, generator_argsort_hardneg's
"Would a GPU help?"), while the same sort also became its kernels.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook.analysis.phases import find_host_thread, phase_at
from gpu_notebook.records import PHASES
from gpu_notebook.traces.kineto import Trace

__all__ = ["ops_in_other_share"]

_OTHER = PHASES.index("other")


def ops_in_other_share(trace: Trace, spans: list[tuple[float, float]]) -> float:
    """The share of the steps ``spans`` (trace clock, us) that the host thread spent inside
    top-level operators the phases paint "other"; 0.0 where none is read."""
    total_us = sum(b - a for a, b in spans)
    host = find_host_thread(trace)
    if host is None or total_us <= 0:
        return 0.0
    locate = phase_at(trace, host[1])
    if locate is None:
        return 0.0
    rows = np.flatnonzero(
        trace.category_mask("cpu_op") & (trace.pid == host[0]) & (trace.tid == host[1])
    )
    start = trace.ts_us[rows]
    end = start + trace.dur_us[rows]
    order = np.lexsort((-end, start))
    start, end = start[order], end[order]
    top = np.zeros(start.size, dtype=np.bool_)
    reach = -np.inf
    for i in range(start.size):  # outermost: an operator not inside the one before it
        if start[i] >= reach:
            top[i] = True
            reach = end[i]
    start, end = start[top], end[top]
    # Read at each operator's middle: its start may share a nanosecond with a range before it.
    other = locate((start + end) / 2.0) == _OTHER
    inside = 0.0
    for a, b in spans:
        lo, hi = np.maximum(start, a), np.minimum(end, b)
        inside += float(np.clip(hi - lo, 0.0, None)[other].sum())
    return min(1.0, inside / total_us)
