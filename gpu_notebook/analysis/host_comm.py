"""The host's wait in collectives, read on the loop thread's own clock over the run's steps.

The trace's "comm" phase is wall time in a few traced steps: a peer that lost its core for a
time slice shows up as this rank waiting, and the profiler swells the compute around it. The
step clock reads the loop thread's schedstat at every step end (its time on a core, its wait for
one); the rest of its steps' own time it was off a core, not waiting for one: blocked. Where the
trace shows that the host thread blocks in collectives (comm is the largest of the phases a host
thread sleeps in: comm, data, sync, copy), that blocked share over every read step is the
collectives' wait. It holds any other sleep of the loop thread too: an upper end, as a gain
bound needs. benchmarks/own_comm_load.py (torchrun, 2 ranks, gloo, 2 cores at load 16-21 from
other programs, then two spinners more; 2 runs x 2 ranks each): ddp_allreduce_log's traced
share read 41%-70% quiet and 4%-90% busy, this one 63%-74% and 58%-67%; ddp_gather_barrier's
58%-86% and 29%-88%, this one 80%-89% and 76%-83%. What stays is the wait this thread cannot
see: a peer's, and the collective's own threads' (gloo's), for a core.

Steps holding our own work (the profiler starting, stopping) are left out: under load they held
over half the run's time. Where the run's split comes from the hooks (the traced window unlike
the run), the window's trace still says what the thread blocks on, and the size is read over
the run's steps: the typical steps decide. Without the step clock's readings (not Linux, older
records) the traced share stands, as read, where the traced steps are the run's; where they are
not, the typical steps have no reading of it (None: the verdict says comm was not measured).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.on_cpu import on_cpu
from gpu_notebook.records import Analysis, PhaseBreakdown, Run

__all__ = ["HostComm", "host_comm", "traced_split"]

# Phases in which a host thread may sleep off a core (a collective, a queue of loader workers,
# the device): the blocked time is the collectives' where comm is the largest of them.
BLOCKING = ("data", "sync", "copy")


@dataclass(frozen=True)
class HostComm:
    """The share of the step the host waits in collectives, and what it rests on."""

    share: float  # what decides: ``off_core`` where read, else ``traced``
    traced: float  # the traced steps' comm phase over their own time
    off_core: float | None  # the loop thread blocked over its read steps' own time (None: unread)
    steps: int  # the steps ``share`` is read over
    # The traced comm's part inside backward (a gradient exchange: DDP's); None: not read.
    in_backward: float | None


def traced_split(analysis: Analysis) -> PhaseBreakdown | None:
    """The trace's phase split of the traced steps: the run's split, or the window's beside a
    hooks split (window unlike the run)."""
    for split in (analysis.phases, analysis.window_phases):
        if split is not None and split.source == "trace" and "comm" in split.measured:
            return split
    return None


def host_comm(run: Run, analysis: Analysis, *, clock: bool = True) -> HostComm | None:
    """The host's wait in collectives (``HostComm``); None: no trace measured a comm phase, or
    the traced steps waited in none. ``clock=False``: the traced share as read (on a GPU the
    loop thread also sleeps on the device, so its blocked time is not the collectives')."""
    split = traced_split(analysis)
    traced = split.share("comm") if split is not None else None
    if split is None or not traced:
        return None
    elsewhere = max((split.share(p) or 0.0) for p in BLOCKING)
    # The steps that hold none of our own work: under load the profiler's start and stop
    # steps held over half the run's time (ddp_allreduce_log under two spinners, 47%-49% left).
    steps = [s for s in run.steps.steps if s.ours_s <= 0]
    read = on_cpu(steps) if clock and traced >= elsewhere else None
    if read is None:
        if split is not analysis.phases:
            return None  # only an atypical window read it: the typical steps did not
        return HostComm(traced, traced, None, len(split.steps), split.comm_in_backward)
    off_core = max(0.0, 1.0 - read.share)
    return HostComm(off_core, traced, off_core, read.steps, split.comm_in_backward)
