"""The tensor-core share of the kernel time, as a range where the GPU timeline is partial.

A kernel's tensor-core use is read from its name (``gpu_timeline.TENSOR_CORE_PATTERN``), so an
unclocked kernel (CUPTI left it ts 0 / dur 0: the buffer filled, the tail was lost) is known to
be tensor-core or not; only how long it ran is unknown. What bounds that: a stream runs one
event at a time, so the unclocked kernels of a stream took at most the window's time that the
stream's clocked events leave free (its *room*, ``unclocked_rooms``). The share then lies
between the clocked tensor-core time over the clocked kernel time plus all the room of the
streams holding unclocked other kernels (they ran as long as they could, the tensor-core ones
not at all), and the clocked tensor-core time plus the room of the streams holding unclocked
tensor-core kernels over the kernel time plus that room. Without an unclocked kernel of a kind
its end stays where the clocked kernels put it: a float32 model whose lost kernels are all
float32 by name reads its share exactly at the top. A stream that is not known bounds nothing
(room None): that end goes to 0 or 100%.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_notebook.analysis.phases import _merge
from gpu_notebook.records import GpuTimeline
from gpu_notebook.traces.kineto import BoolArray, Trace

__all__ = ["TensorCoreShare", "UnclockedRooms", "tensor_core_share", "unclocked_rooms"]


@dataclass(frozen=True)
class UnclockedRooms:
    """Unclocked kernels by kind (tensor-core by name or not), and the most time (µs, inside the
    window) each kind can have run: the room its streams' clocked events leave (None: a stream
    not known)."""

    tensor_core: int
    other: int
    tensor_core_room_us: float | None
    other_room_us: float | None


def unclocked_rooms(
    trace: Trace, tensor_core_names: BoolArray, w0_us: float, width_ns: int
) -> UnclockedRooms:
    """Count the trace's unclocked kernels by kind and bound their time in the window
    ``[w0_us, w0_us + width_ns)`` by their streams' room."""
    kernel = trace.cat_id == _category_id(trace, "kernel")
    unclocked = np.flatnonzero(trace.unclocked_gpu_mask & kernel)
    if unclocked.size == 0 or width_ns <= 0:
        return UnclockedRooms(0, 0, 0.0, 0.0)
    clocked = np.flatnonzero(trace.gpu_mask)
    start = np.rint((trace.ts_us[clocked] - w0_us) * 1000.0).astype(np.int64)
    end = start + np.rint(trace.dur_us[clocked] * 1000.0).astype(np.int64)
    keys = _stream_keys(trace, clocked)
    room: dict[tuple[int, int, int], int] = {}

    def room_of(key: tuple[int, int, int]) -> int:
        if key not in room:
            on = np.fromiter((k == key for k in keys), dtype=np.bool_, count=len(keys))
            s, e = _merge(np.clip(start[on], 0, width_ns), np.clip(end[on], 0, width_ns))
            room[key] = width_ns - int((e - s).sum())
        return room[key]

    is_tc = tensor_core_names[trace.name_id[unclocked]]
    counts = [int(is_tc.sum()), int((~is_tc).sum())]
    rooms: list[float | None] = []
    for kind in (is_tc, ~is_tc):
        streams = set(_stream_keys(trace, unclocked[kind]))
        if any(stream < 0 and tid < 0 for _, tid, stream in streams):
            rooms.append(None)  # no stream known: nothing bounds its time
        else:
            rooms.append(sum(room_of(k) for k in streams) / 1000.0)
    return UnclockedRooms(counts[0], counts[1], rooms[0], rooms[1])


@dataclass(frozen=True)
class TensorCoreShare:
    """Tensor-core kernels' share of the kernel time: ``low == high`` where measured (a complete
    timeline, or no unclocked kernel), else the range the unclocked kernels leave."""

    low: float
    high: float
    unclocked_tensor_core: int = 0  # unclocked kernels that are tensor-core by name
    unclocked_other: int = 0

    @property
    def measured(self) -> bool:
        return self.unclocked_tensor_core + self.unclocked_other == 0


def tensor_core_share(gpu: GpuTimeline | None) -> TensorCoreShare | None:
    """The timeline's tensor-core share (``TensorCoreShare``); None: no clocked kernel time, or
    the trace named no kernel."""
    if gpu is None or gpu.kernel_us <= 0 or gpu.tensor_core_kernel_us is None:
        return None
    tc, kernels = gpu.tensor_core_kernel_us, gpu.kernel_us
    n_tc, n_other = gpu.unclocked_tensor_core_kernels, gpu.unclocked_other_kernels
    low = high = tc / kernels
    if n_other:
        other = gpu.unclocked_other_room_us
        low = 0.0 if other is None else tc / (kernels + other)
    if n_tc:
        room = gpu.unclocked_tensor_core_room_us
        high = 1.0 if room is None else (tc + room) / (kernels + room)
    return TensorCoreShare(low, high, n_tc, n_other)


def _stream_keys(trace: Trace, rows: np.ndarray) -> list[tuple[int, int, int]]:
    return list(
        zip(
            trace.pid[rows].tolist(),
            trace.tid[rows].tolist(),
            trace.stream[rows].tolist(),
            strict=True,
        )
    )


def _category_id(trace: Trace, name: str) -> int:
    try:
        return trace.categories.index(name)
    except ValueError:
        return -1
