"""Builders of small synthetic Kineto trace dicts, shaped like torch.profiler's JSON export."""

from __future__ import annotations

from typing import Any

from gpu_notebook import markers

HOST_PID = 100
HOST_TID = 100
OTHER_TID = 200  # e.g. the autograd engine's device thread
GPU_PID = 0  # Kineto writes GPU events with pid = device index, tid = stream

Event = dict[str, Any]


def x(
    name: str,
    cat: str,
    ts: float,
    dur: float,
    *,
    pid: int | str = HOST_PID,
    tid: int | str = HOST_TID,
    **args: Any,
) -> Event:
    """A complete ('X') event; keyword arguments become its ``args``."""
    ev: Event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        ev["args"] = dict(args)
    return ev


def op(name: str, ts: float, dur: float, *, tid: int = HOST_TID) -> Event:
    return x(name, "cpu_op", ts, dur, tid=tid)


def annotation(name: str, ts: float, dur: float, *, tid: int = HOST_TID) -> Event:
    return x(name, "user_annotation", ts, dur, tid=tid)


def step_mark(index: int, ts: float, *, tid: int = HOST_TID) -> Event:
    """The zero-length mark the step clock writes at each step boundary."""
    return annotation(f"{markers.STEP_MARK_PREFIX}{index}", ts, 0.0, tid=tid)


def runtime(name: str, ts: float, dur: float, correlation: int, *, tid: int = HOST_TID) -> Event:
    return x(name, "cuda_runtime", ts, dur, tid=tid, correlation=correlation, cbid=211)


def launch(ts: float, correlation: int, *, dur: float = 2.0, tid: int = HOST_TID) -> Event:
    return runtime("cudaLaunchKernel", ts, dur, correlation, tid=tid)


def kernel(
    name: str, ts: float, dur: float, correlation: int, *, stream: int = 7, device: int = 0
) -> Event:
    return x(
        name,
        "kernel",
        ts,
        dur,
        pid=device,
        tid=stream,
        device=device,
        stream=stream,
        correlation=correlation,
    )


def memcpy(
    kind: str,
    ts: float,
    dur: float,
    correlation: int,
    *,
    nbytes: int | None,
    stream: int = 7,
    device: int = 0,
) -> Event:
    args: dict[str, Any] = {"device": device, "stream": stream, "correlation": correlation}
    if nbytes is not None:
        args["bytes"] = nbytes
    return x(f"Memcpy {kind}", "gpu_memcpy", ts, dur, pid=device, tid=stream, **args)


def memset(ts: float, dur: float, correlation: int, *, stream: int = 7, device: int = 0) -> Event:
    return x(
        "Memset (Device)",
        "gpu_memset",
        ts,
        dur,
        pid=device,
        tid=stream,
        device=device,
        stream=stream,
        correlation=correlation,
        bytes=8,
    )


def flow(correlation: int, ts: float, *, start: bool) -> Event:
    """The launch -> kernel arrow (ac2g); the reader must skip it."""
    ev: Event = {
        "ph": "s" if start else "f",
        "id": correlation,
        "pid": HOST_PID if start else GPU_PID,
        "tid": HOST_TID if start else 7,
        "ts": ts,
        "cat": "ac2g",
        "name": "ac2g",
    }
    if not start:
        ev["bp"] = "e"
    return ev


def trace_dict(events: list[Event], **meta: Any) -> dict[str, Any]:
    """A Kineto document around ``events`` with the metadata events torch writes."""
    head: list[Event] = [
        {
            "name": "process_name",
            "ph": "M",
            "ts": 0,
            "pid": HOST_PID,
            "tid": 0,
            "args": {"name": "python"},
        },
        {
            "name": "thread_name",
            "ph": "M",
            "ts": 0,
            "pid": HOST_PID,
            "tid": HOST_TID,
            "args": {"name": "thread 100 (python)"},
        },
    ]
    tail: list[Event] = [
        {
            "name": "Iteration Start: PyTorch Profiler",
            "ph": "i",
            "s": "g",
            "pid": "Traces",
            "tid": "Trace PyTorch Profiler",
            "ts": 0,
        },
    ]
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": head + events + tail}
    doc.update(meta)
    return doc


# ---------------------------------------------------------------------------------------------
# The phase scenario: two steps between three marks, every rule of the painting exercised.
# ---------------------------------------------------------------------------------------------

# Hand-computed from the events below (µs); each step sums to 100.
PHASE_SCENARIO_EXPECTED: dict[int, dict[str, float]] = {
    3: {
        "data": 7.0,  # DataLoader [0,10) minus the copy inside it
        "copy": 3.0,  # cudaMemcpyAsync [3,6) beats data
        "forward": 30.0,  # forward [15,50) minus the .item() inside it
        "sync": 5.0,  # aten::item [40,45) beats forward
        "backward": 25.0,  # backward [50,80) until the optimizer overlaps it at 75
        "optimizer": 15.0,  # [75,90) beats backward
        "other": 4.0,  # aten::add [92,96): an op in no classified range
        "unattributed": 11.0,  # [10,15) + [90,92) + [96,100): nothing ran
    },
    4: {
        "data": 0.0,
        "copy": 0.0,
        "forward": 50.0,  # [100,160) until the sync starts at 150
        "sync": 20.0,  # cudaStreamSynchronize [150,170) crosses the forward's end
        "backward": 5.0,  # evaluate_function on the autograd thread [175,180)
        "optimizer": 0.0,
        "other": 10.0,  # an op [190,215) clipped at the last mark
        "unattributed": 15.0,  # [170,175) + [180,190): other threads' work does not count
    },
}


def phase_scenario() -> dict[str, Any]:
    """Marks at 0, 100, 200 (steps #3 and #4), nested and overlapping ranges, a GPU kernel."""
    events = [
        # A ProfilerStep range around everything: marks win, and it is not "work" itself.
        annotation(f"{markers.PROFILER_STEP_PREFIX}9", -5.0, 300.0),
        step_mark(3, 0.0),
        step_mark(4, 100.0),
        step_mark(5, 200.0),
        # step 3
        annotation(f"{markers.DATALOADER_PREFIX}_SingleProcessDataLoaderIter.__next__", 0.0, 10.0),
        runtime("cudaMemcpyAsync", 3.0, 3.0, 1),
        annotation(f"{markers.FORWARD_PREFIX}Net", 15.0, 35.0),
        op("aten::linear", 16.0, 14.0),
        op("aten::addmm", 17.0, 10.0),
        op("aten::item", 40.0, 5.0),
        op("aten::_local_scalar_dense", 41.0, 3.0),
        annotation(markers.BACKWARD, 50.0, 30.0),
        op(f"{markers.AUTOGRAD_PREFIX}: AddmmBackward0", 55.0, 15.0),
        annotation(f"{markers.OPTIMIZER_STEP_PREFIX}SGD.step", 75.0, 15.0),
        op("aten::add", 92.0, 4.0),
        # step 4
        annotation(f"{markers.FORWARD_PREFIX}Net", 100.0, 60.0),
        runtime("cudaStreamSynchronize", 150.0, 20.0, 2),
        op(f"{markers.AUTOGRAD_PREFIX}: MmBackward0", 175.0, 5.0, tid=OTHER_TID),
        annotation(f"{markers.DATALOADER_PREFIX}worker", 170.0, 20.0, tid=OTHER_TID),
        op("aten::mul", 180.0, 5.0, tid=OTHER_TID),
        op("aten::cat", 190.0, 25.0),
        # the device side, so that "copy" is measured
        launch(101.0, 3),
        kernel("void gemm_kernel()", 105.0, 10.0, 3),
        memcpy("HtoD (Pinned -> Device)", 4.0, 1.0, 1, nbytes=1024),
    ]
    return trace_dict(events)


# ---------------------------------------------------------------------------------------------
# The GPU timeline scenario (µs). Window [0, 200) unless a test says otherwise.
# ---------------------------------------------------------------------------------------------

GPU_SCENARIO_WINDOW = (0.0, 200.0)


def gpu_scenario() -> dict[str, Any]:
    """Kernels on two streams, a copy, a memset, an NCCL and a tensor-core kernel.

    Merged GPU timeline in [0, 200): busy [10,30) [32,60) [70,75) [80,90) [130,155) [180,200).
    Gaps: [0,10) host wait (A launched at 5 > 0); [30,32) kernel wait (B launched at 8, 2 µs);
    [60,70) host wait (copy launched at 65 > 60); [75,80) kernel wait (E launched at 20, 5 µs);
    [90,130) other (F launched at 60, 40 µs >= 30); [155,180) host wait (H launched at 170).
    """
    events = [
        annotation(f"{markers.FORWARD_PREFIX}Net", 0.0, 50.0),
        annotation(f"{markers.OPTIMIZER_STEP_PREFIX}SGD.step", 55.0, 15.0),
        launch(5.0, 1),
        launch(8.0, 2),
        launch(20.0, 3),
        launch(22.0, 5),
        launch(60.0, 6),
        runtime("cudaMemcpyAsync", 65.0, 2.0, 4),
        launch(140.0, 7, dur=1.0),
        launch(170.0, 8),
        kernel("A_elementwise_kernel", 10.0, 20.0, 1),
        kernel("B_elementwise_kernel", 32.0, 18.0, 2),
        kernel("C_reduce_kernel", 40.0, 20.0, 3, stream=8),
        memcpy("HtoD (Pageable -> Device)", 70.0, 5.0, 4, nbytes=4096),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 80.0, 10.0, 5, stream=20),
        kernel("volta_h884gemm_64x64_ldg8_nn", 130.0, 20.0, 6),
        memset(150.0, 5.0, 7),
        kernel("H_long_kernel", 180.0, 70.0, 8),
        kernel("I_kernel_without_launch", 185.0, 5.0, 99, stream=8),
        flow(1, 5.0, start=True),
        flow(1, 10.0, start=False),
    ]
    return trace_dict(events, distributedInfo={"backend": "nccl", "rank": 0, "world_size": 1})
