"""The verdict's lines decided on the GPU timeline, each read with its share's range: the same
code gives the same answer.

The GPU's busy share against the GPU-bound line (80%), its exposed collectives against the
communication line (10%), its idle time while the host waited for data or synced against their
critical line (20%), the peak memory against the card (90%) and NVML's utilization where no
timeline measures: each was read as a point, and a real trace whose busy share sat a point or two
from its line gave one verdict to one run and another to the next (an H100's autocast MLP: steps
77%, 97% and 80% busy read 84% and gpu-bound; the same loop without its middle step read 78%
and host-bound).

Each share is read as ``analysis.verdict_near_line`` reads the host's: its 90% interval over the
profiled steps' figures (``GpuTimeline.steps``: the window cut into the steps' GPU windows,
``analysis.gpu_line_steps``), widened by ``RUN_TO_RUN``. Where the window is one stretch of few
steps with no per-step figures (a GPU span, a one-step trace, NVML's mean, a memory peak), the
point itself is the range, widened by ``RUN_TO_RUN`` alone. A range that reaches the line decides
as the line and is said as near it (``verdict_said.GpuAcrossLine``).

Not read with a range: a *partial* timeline's figures (they are bounds already,
``analysis.gpu_bounds``, and read at both ends), and the exposed collectives' margin (10% is two
margins from nothing: widened by ``RUN_TO_RUN``, 5.5% of exposed collectives would read
communication-bound), whose range alone decides, as the host's wait in collectives does.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from gpu_notebook.analysis.uncertainty import ratio_interval
from gpu_notebook.analysis.verdict_near_line import LineReading, line_reading
from gpu_notebook.records import GpuTimeline

__all__ = ["GpuFigure", "gpu_line", "point_line"]

GpuFigure = Literal["busy", "comm", "data", "sync"]


def _parts_us(gpu: GpuTimeline, figure: GpuFigure) -> list[float]:
    steps = gpu.steps
    if figure == "busy":
        return [s.busy_us for s in steps]
    if figure == "comm":
        return [s.comm_exposed_us for s in steps]
    if figure == "data":
        return [s.idle_data_wait_us for s in steps]
    return [s.idle_sync_wait_us for s in steps]


def gpu_line(
    gpu: GpuTimeline, figure: GpuFigure, share: float, line: float, *, widen: bool = True
) -> LineReading:
    """``share`` (the window's ``figure``, as the verdict reads it) against ``line``, with its
    range over the window's steps where the timeline has them (``GpuTimeline.steps``), else the
    window's point as its range, widened by ``RUN_TO_RUN`` where ``widen``. A partial timeline's
    figures are bounds: the point alone decides there."""
    if gpu.partial:
        return line_reading(share, line, None, 0)
    if len(gpu.steps) < 2:
        return line_reading(share, line, (share, share), 1, widen=widen)
    part = np.asarray(_parts_us(gpu, figure), dtype=np.float64)
    whole = np.asarray([s.window_us for s in gpu.steps], dtype=np.float64)
    span = ratio_interval(part, whole)
    return line_reading(share, line, span, len(gpu.steps), widen=widen)


def point_line(share: float, line: float) -> LineReading:
    """A share read once (NVML's mean over the steps' ticks, the run's peak memory) against
    ``line``: the point its own range, widened by ``RUN_TO_RUN`` (another run of the code may
    read it that much higher or lower)."""
    return line_reading(share, line, (share, share), 1)
