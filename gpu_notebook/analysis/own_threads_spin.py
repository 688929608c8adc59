"""The process's own threads on a core beside the loop while the steps ran: figures only.

The loop thread's wait for a core (schedstat run_delay) is the machine's only where the work it
queued behind is other programs'. A thread of this process that computes beside the loop (a
``while True:`` poll of the RSS with no sleep: transformers' ``TrainerMemoryTracker``, a user's
NVML poller, a busy-wait heartbeat) is runnable whenever the loop is, and on a core it holds the
GIL the loop thread waits for. Its time on a core (the sampler's per-thread readings,
capture/own_threads_spin.py) over the steps is read against the loop thread's own: a thread at
``SIDE_SHARE`` of the loop's rate or more is named. A spinner gets a core whenever it can, so
both rates fall together under other programs' load and the ratio holds; a thread that sleeps or
waits (a heartbeat, a queue's consumer, the pin-memory thread) reads near 0.

Of the loop's wait, the threads account for their cores over theirs and the other processes'
(the runnable work the loop thread queued behind), or, where more, the part of the step the
loop would not need with their cores added to its own (Linux shares the cores between sessions
first, autogroup: the process keeps its share, ``MachineFacts.session_cores``), out of its wait:
``SideThreads.held``. The memory tracker of unseen round 22 ran at 0.12 cores beside a loop
thread at 0.12 (82% of the steps waiting, other programs at 1.76 cores): 7% by the first
reading, 60% by the second. The most the steps gain
without them is the larger of two readings, one for each way the threads slow the loop:
- the GIL and a free core: each step keeps its own time on a core and the others' part of its
  wait, the rest (the threads' part of the wait, and the time off a core: the GIL's wait among
  it) given back;
- a busy machine: the cores the threads used go to the loop (Linux shares the cores between
  sessions first, autogroup: the process keeps its share, and the loop takes the threads'
  part of it), the loop thread's rate at most one core.
On unseen round 22's memory tracker (82% of the steps waiting for a core, load 9-16 on 2 cores)
the first alone read 1.19x where ``skip_memory_metrics=True`` measured 2.31x by hand.
"""

from __future__ import annotations

import itertools

from gpu_notebook.analysis.steps import steady_steps
from gpu_notebook.records import MachineFacts, OwnThread, Run, SideThread, SideThreads

__all__ = ["SIDE_SHARE", "side_threads"]

# A thread on a core at least this share of the loop thread's own rate over the steps is named:
# a quarter of what the training itself computes (a spinner sharing the GIL with the loop reads
# near 1; a sleeping heartbeat under 0.01).
SIDE_SHARE = 0.25
# Where neither the loop thread's own time on a core nor the process's was read: a thread at
# this many cores.
SIDE_CORES = 0.25
# A thread read over less of the steps than this (s) is not read: two ticks at least.
MIN_SPAN_S = 0.4
# Threads that belong to the libraries' machinery (the loader's pin-memory and feeder threads, a
# pool's idle workers, the kernel's and the shell's own): their work is the pipeline's.
LIBRARY_PARTS = (
    "/torch/utils/data/",
    "/multiprocessing/",
    "/concurrent/futures/",
    "/gpu_notebook/",
    "/ipykernel/",
    "/IPython/",
    "/zmq/",
    "/tornado/",
    "/jupyter_client/",
)


def side_threads(run: Run, machine: MachineFacts | None) -> SideThreads | None:
    """The process's threads on a core beside the loop while the steps ran (at ``SIDE_SHARE`` of
    the loop thread's rate or more), what of the loop's wait they account for, and the most the
    steps gain without them; None: no steps, no thread read, or none on a core that much."""
    steps = steady_steps(run.steps, run.window.warmup_steps)
    if not steps or not run.samples.threads:
        return None
    start = min(s.start_s for s in steps)
    end = max(s.start_s + s.duration_s for s in steps)
    clocked = [s for s in steps if s.cpu_s is not None and s.wait_s is not None]
    wall = sum(s.duration_s for s in clocked)
    cpu = sum(s.cpu_s or 0.0 for s in clocked)
    wait = sum(s.wait_s or 0.0 for s in clocked)
    loop_cores = cpu / wall if clocked and wall > 0 else None
    process = machine.loop_process_cores if machine is not None else None
    found = []
    for thread in run.samples.threads:
        side = _over(thread, start, end)
        if side is None or _library(side.file):
            continue
        # The loop's rate: its own clock, else the process's threads less this one.
        loop = loop_cores if loop_cores is not None else (
            process - side.cores if process is not None and process > side.cores else None
        )  # fmt: skip
        line = SIDE_SHARE * loop if loop is not None else SIDE_CORES
        if side.cores >= line and side.cpu_s > 0:
            found.append(side)
    if not found:
        return None
    found.sort(key=lambda t: -t.cores)
    others = None
    if machine is not None:
        others = (
            machine.loop_others_cores
            if machine.loop_others_cores is not None
            else machine.others_median_cores
        )
    cores = sum(t.cores for t in found)
    held = cores / (cores + max(0.0, others or 0.0))
    wait_share = wait / wall if clocked and wall > 0 else None
    if loop_cores and wait_share:
        # The process keeps its share of the cores (autogroup): with the threads' cores the loop
        # needs this much less of each step, taken out of its wait.
        taken = 1.0 - loop_cores / min(1.0, loop_cores + cores)
        held = max(held, min(1.0, taken / wait_share))
    bounds = []
    if clocked and wall > 0 and cpu > 0:
        bounds.append(wall / (cpu + (1.0 - held) * wait))  # the time off a core given back
    if loop_cores:
        bounds.append(min(1.0, loop_cores + cores) / loop_cores)  # the threads' cores taken
    bound = max(1.0, *bounds) if bounds else None
    return SideThreads(
        threads=tuple(found),
        loop_cores=loop_cores,
        others_cores=others,
        wait_share=wait_share,
        held=held,
        bound=bound,
    )


def _over(thread: OwnThread, start: float, end: float) -> SideThread | None:
    """The thread's time on a core over the part of [start, end] its readings span (read
    between readings as a straight line); None: under ``MIN_SPAN_S`` of it, or never placed."""
    readings = thread.readings
    if len(readings) < 2 or not thread.spots:
        return None
    lo, hi = max(start, readings[0][0]), min(end, readings[-1][0])
    if hi - lo < MIN_SPAN_S:
        return None
    spot = thread.spots[0]
    return SideThread(
        name=thread.name,
        function=spot.function,
        file=spot.file,
        line=spot.line,
        cpu_s=max(0.0, _at(readings, hi) - _at(readings, lo)),
        span_s=hi - lo,
    )


def _at(readings: tuple[tuple[float, float], ...], t: float) -> float:
    """The thread's time on a core so far at ``t`` (within the readings' span)."""
    for (t0, c0), (t1, c1) in itertools.pairwise(readings):
        if t0 <= t <= t1:
            return c0 if t1 <= t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
    return readings[-1][1] if t >= readings[-1][0] else readings[0][1]


def _library(file: str) -> bool:
    path = file.replace("\\", "/")
    return any(part in path for part in LIBRARY_PARTS)
