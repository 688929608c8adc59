"""The GPU timeline's window cut into its steps: each step's busy, exposed-collective and idle
figures, so a verdict line decided on the GPU timeline can read its share with a range.

The window's one busy share (82%) is one sample of the steps it covers; the next run of the same
code reads 79% and another verdict (the GPU-bound line, 80%). Each step's figures give the
share's spread (``analysis.gpu_line_reading``), as the host's phase split gives the data wait's.

A step's GPU window is not its host range: a host that runs ahead of a busy GPU (no sync in the
step) issues a step's kernels long before they run, and a host window would read that GPU idle.
Step ``i``'s GPU window runs from the end of the step before's to the later of the host's end of
step ``i`` and the end of the last GPU work launched inside it (never before the one before's):
a host-bound step's window is its host range with the GPU idle in it, a GPU-paced step's is the
time the GPU ran its work. The windows tile the timeline's window exactly (the first opens at
its start, the last closes at its end), so their sums are the window's figures.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpu_notebook.analysis.phases import _Cover
from gpu_notebook.records import GpuStepFigures
from gpu_notebook.traces.kineto import FloatArray, IntArray

__all__ = ["step_edges_ns", "step_figures"]


def step_edges_ns(
    host_start_us: tuple[float, ...],
    host_end_us: tuple[float, ...],
    launch_us: FloatArray,
    gpu_end_us: FloatArray,
    w0_us: float,
    width_ns: int,
) -> IntArray | None:
    """The steps' GPU windows' edges, window-relative ns (``len(steps) + 1`` of them, from 0 to
    ``width_ns``); None with fewer than two steps (one window: no spread to read)."""
    n = len(host_start_us)
    if n < 2:
        return None
    ends_us = np.empty(n, dtype=np.float64)
    for i, (a, b) in enumerate(zip(host_start_us, host_end_us, strict=True)):
        mine = (launch_us >= a) & (launch_us < b)
        ends_us[i] = max(b, float(gpu_end_us[mine].max())) if mine.any() else b
    inner = np.rint((ends_us[:-1] - w0_us) * 1000.0).astype(np.int64)
    inner = np.clip(np.maximum.accumulate(inner), 0, width_ns)
    return np.concatenate([[0], inner, [width_ns]]).astype(np.int64)


def step_figures(
    edges_ns: IntArray,
    busy: tuple[IntArray, IntArray],
    exposed: tuple[IntArray, IntArray],
    gaps: tuple[IntArray, IntArray, IntArray],
    waits: Callable[[tuple[IntArray, IntArray, IntArray]], tuple[int, int]],
) -> tuple[GpuStepFigures, ...]:
    """Each step's window and its figures: busy and exposed-collective time (``busy``,
    ``exposed``: sorted, disjoint, window-relative ns), and the idle gaps (``gaps``: start, end,
    cause) cut to it, split by ``waits`` into (data wait, sync wait) ns as the window's are."""
    a, b = edges_ns[:-1], edges_ns[1:]
    busy_ns = _Cover.of(*busy).covered(a, b)
    exposed_ns = _Cover.of(*exposed).covered(a, b)
    gs, ge, cause = gaps
    out: list[GpuStepFigures] = []
    for i in range(a.size):
        s, e = np.maximum(gs, a[i]), np.minimum(ge, b[i])
        keep = e > s
        data_ns, sync_ns = waits((s[keep], e[keep], cause[keep]))
        out.append(
            GpuStepFigures(
                window_us=int(b[i] - a[i]) / 1000.0,
                busy_us=int(busy_ns[i]) / 1000.0,
                comm_exposed_us=int(exposed_ns[i]) / 1000.0,
                idle_data_wait_us=data_ns / 1000.0,
                idle_sync_wait_us=sync_ns / 1000.0,
            )
        )
    return tuple(out)
