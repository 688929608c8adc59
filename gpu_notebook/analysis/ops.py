"""Top host operators by self time, top GPU kernels by total time, and the kernel time that chosen
host operators launched, from a Kineto trace."""

from __future__ import annotations

from typing import Literal

import numpy as np

from gpu_notebook.analysis.phases import find_host_thread
from gpu_notebook.records import OpStat
from gpu_notebook.traces.kineto import IntArray, Trace

__all__ = ["launched_kernel_us", "self_time_ns", "top_ops"]


def self_time_ns(start: IntArray, end: IntArray) -> IntArray:
    """Self time of each interval of one thread: its length minus its direct children's.

    Intervals on one thread nest (a child lies inside its parent). Vectorised: sort by start
    (longer first on ties), get each interval's depth from how many are still open when it
    starts, and its parent as the nearest earlier interval one level up. Zero-length intervals
    have no children and are nobody's child. A child poking past its parent's end (float
    rounding in Kineto) only counts up to the parent's end.
    """
    dur: IntArray = np.maximum(end - start, 0)
    out: IntArray = dur.copy()
    rows = np.flatnonzero(dur > 0)
    if rows.size < 2:
        return out
    order = rows[np.lexsort((-dur[rows], start[rows]))]
    s, e = start[order], end[order]
    m = s.size
    # Open at s[i]: intervals before i in this order whose end is after s[i]. Every interval
    # that ended by s[i] started before it, so depth = i - (#ends <= s[i]).
    depth = np.arange(m) - np.searchsorted(np.sort(e), s, side="right")
    parent = np.full(m, -1, dtype=np.int64)
    for d in range(1, int(depth.max()) + 1 if m else 0):
        here = np.flatnonzero(depth == d)
        above = np.flatnonzero(depth == d - 1)
        if here.size == 0 or above.size == 0:
            continue
        k = np.searchsorted(above, here, side="left") - 1
        ok = k >= 0
        parent[here[ok]] = above[k[ok]]
    has = parent >= 0
    child_ns = np.minimum(e[has], e[parent[has]]) - s[has]
    children = np.zeros(m, dtype=np.int64)
    np.add.at(children, parent[has], np.maximum(child_ns, 0))
    out[order] = np.maximum(dur[order] - children, 0)
    return out


def top_ops(
    trace: Trace,
    n: int = 10,
    host_tid: int | None = None,
    *,
    window: tuple[float, float] | None = None,
) -> tuple[OpStat, ...]:
    """The ``n`` host ``cpu_op``s with most self time, then the ``n`` GPU kernels with most time.

    Host ops come from the host thread only (``phases.find_host_thread`` unless ``host_tid``).
    ``window`` (trace µs) keeps events that start inside it. Kernels have ``self_us ==
    total_us`` (they do not nest).
    """
    keep = np.ones(len(trace), dtype=np.bool_)
    if window is not None:
        keep = (trace.ts_us >= window[0]) & (trace.ts_us < window[1])

    stats: list[OpStat] = []
    host = None
    if host_tid is not None:
        rows_tid = np.flatnonzero(trace.category_mask("cpu_op") & (trace.tid == host_tid))
        if rows_tid.size:
            host = (int(trace.pid[rows_tid[0]]), host_tid)
    else:
        host = find_host_thread(trace)
    if host is not None:
        rows = np.flatnonzero(
            trace.category_mask("cpu_op") & (trace.pid == host[0]) & (trace.tid == host[1])
        )
        if rows.size:
            origin = float(trace.ts_us[rows].min())
            start = np.rint((trace.ts_us[rows] - origin) * 1000.0).astype(np.int64)
            end = start + np.rint(trace.dur_us[rows] * 1000.0).astype(np.int64)
            self_ns = self_time_ns(start, end)
            sel = keep[rows]
            stats += _aggregate(
                trace, trace.name_id[rows][sel], (end - start)[sel], self_ns[sel], n, "cpu"
            )

    kernels = np.flatnonzero(trace.category_mask("kernel") & keep)
    if kernels.size:
        dur = np.rint(trace.dur_us[kernels] * 1000.0).astype(np.int64)
        stats += _aggregate(trace, trace.name_id[kernels], dur, dur, n, "gpu")
    return tuple(stats)


def _aggregate(
    trace: Trace,
    name_id: IntArray,
    total_ns: IntArray,
    self_ns: IntArray,
    n: int,
    device: Literal["cpu", "gpu"],
) -> list[OpStat]:
    if name_id.size == 0 or n <= 0:
        return []
    names, inverse = np.unique(name_id, return_inverse=True)
    calls = np.bincount(inverse, minlength=names.size)
    total = np.bincount(inverse, weights=total_ns.astype(np.float64), minlength=names.size)
    self_ = np.bincount(inverse, weights=self_ns.astype(np.float64), minlength=names.size)
    top = np.lexsort((names, -self_))[:n]  # by self time, then name id for a stable order
    return [
        OpStat(
            name=trace.names[int(names[i])],
            calls=int(calls[i]),
            total_us=float(total[i]) / 1000.0,
            self_us=float(self_[i]) / 1000.0,
            device=device,
            # The typical call: one call the machine preempted (a busy host) weighs in the
            # mean, not in the median.
            median_self_us=float(np.median(self_ns[inverse == i])) / 1000.0,
        )
        for i in top
    ]


def launched_kernel_us(trace: Trace, roots: list[int]) -> float:
    """Device time of the kernels that the host operators under ``roots`` launched (each root's
    operators on its own thread, matched to kernels by External id)."""
    if not roots:
        return 0.0
    cpu = np.flatnonzero(trace.category_mask("cpu_op"))
    ids: set[int] = set()
    for r in roots:
        a, b = float(trace.ts_us[r]), float(trace.end_us[r])
        under = cpu[
            (trace.ts_us[cpu] >= a) & (trace.end_us[cpu] <= b) & (trace.tid[cpu] == trace.tid[r])
        ]
        ids.update(int(x) for x in trace.external_id[under] if x >= 0)
    gpu = np.flatnonzero(trace.gpu_mask)
    hit = gpu[np.isin(trace.external_id[gpu], np.fromiter(ids, dtype=np.int64))]
    return float(trace.dur_us[hit].sum())
