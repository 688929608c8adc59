"""Multi-GPU rules: nn.DataParallel instead of DDP, communication taking >= 10% of the window,
and collectives of the user's own that the step loop runs every step.

Thresholds: communication > 10% of the step -> overlap / compression / accumulation (PyTorch
TensorBoard profiler plugin's distributed view); 20% high (TraceML critical level). The
communication share is the collective kernels' (NCCL/RCCL) time over the GPU window; the exposed
part (not overlapped with compute) is at most that, so Amdahl over it is an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.host_comm import host_comm
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_bound, gpu_busy_bounds, severity_of

COMM = 0.10


@dataclass(frozen=True)
class DataParallel(Said):
    line: int | None  # the cell's first nn.DataParallel(...)
    text: str | None
    live: tuple[tuple[str, str], ...]  # live models that are one: (name, type name)
    gpus: int  # visible


@dataclass(frozen=True)
class Communication(Said):
    busy_us: float  # collective kernels' time
    window_us: float
    overlapped: float | None  # share of it computation overlaps
    exposed_us: float
    share: float  # exposed share of the window
    bound: float | None
    # A partial GPU timeline (``GpuBusyBounds``): the unclocked events may be computation that
    # overlapped the collectives or collectives nothing overlapped, so the exposed share lies
    # between these (the grade rests on the low, the bound on the high). 0: measured.
    unclocked_events: int = 0
    share_low: float | None = None
    share_high: float | None = None


@dataclass(frozen=True)
class OwnCollectives(Said):
    calls: tuple[tuple[int, str, int], ...]  # (line, text, step loop line) run every step
    share: float  # the step's time in collectives (host wait, or the GPU window's exposed)
    on_gpu: bool  # the share is the GPU window's exposed communication
    bound: float | None  # every collective's time gone (theirs and DDP's): an upper bound
    # The host's wait (analysis/host_comm) behind ``share``: the part of it in backward (the
    # gradient exchange's; None: not told apart), the steps the loop thread's clock read it
    # over (None: the traced steps' wall share), the traced steps' share as the trace read it.
    in_backward: float | None = None
    clock_steps: int | None = None
    traced: float | None = None
    # ``on_gpu`` on a partial GPU timeline: ``share`` is the least the exposed share can be,
    # ``share_high`` the most (the bound rests on it). 0: measured.
    unclocked_events: int = 0
    share_high: float | None = None


def data_parallel(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    live = [m for m in facts.live.models if m.data_parallel]
    if not facts.data_parallel and not live:
        return None
    first = facts.data_parallel[0] if facts.data_parallel else None
    said = DataParallel(
        first.line if first else None,
        first.text if first else None,
        tuple((m.name, m.type_name) for m in live),
        len(run.env.gpus),
    )
    return found("distributed.data_parallel", "medium", said, line=said.line,
                 fix_id="dataparallel_to_ddp")  # fmt: skip


def communication(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    gpu = analysis.gpu
    if gpu is None or gpu.window_us <= 0:
        return None
    # Only the collectives' time that no computation overlaps delays the step (HTA's
    # comm/compute overlap, TraceLens's exposed communication).
    comm = gpu.comm_exposed_us / gpu.window_us
    low, high = _exposed_range(analysis, comm)
    if low is None or high is None:
        return None  # a partial timeline without NVML: the exposed share is not measured
    if severity_of(high, low=COMM, medium=COMM, high=0.20) is None:
        return None
    severity = severity_of(low, low=COMM, medium=COMM, high=0.20) or "medium"
    bound = gain_bound(high, analysis, host_side=False)
    unclocked = gpu.unclocked_events if gpu.partial else 0
    said = Communication(gpu.comm_busy_us, gpu.window_us, gpu.comm_overlap_share,
                         gpu.comm_exposed_us, comm, bound, unclocked,
                         low if unclocked else None, high if unclocked else None)  # fmt: skip
    return found("distributed.communication", severity, said, phase_share=comm, bound=bound)


def _exposed_range(analysis: Analysis, exposed: float) -> tuple[float | None, float | None]:
    """The least and most the exposed communication's share of the window can be: itself on a
    complete timeline; on a partial one, give or take all the busy time no event shows (it may
    be computation hiding the collectives, or collectives nothing hides); None: not measured
    (a partial timeline without NVML)."""
    busy = gpu_busy_bounds(analysis)
    unseen = 0.0 if busy is None else busy.unseen
    if unseen is None:
        return None, None
    return max(0.0, exposed - unseen), min(1.0, exposed + unseen)


def own_collectives(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step loop's own collectives (``cell.collectives``: a loss reduced for a log) every
    step, where collectives take >= ``COMM`` of the step. No patch: whether the value is needed
    on the steps that do not log is the user's call (rank-consistent gating is what helps)."""
    every = [c for c in facts.collectives if not c.gated]
    if not every:
        return None
    gpu = analysis.gpu
    on_gpu = gpu is not None and gpu.window_us > 0
    # The GPU window's exposed share, within its range on a partial timeline (found on its most,
    # graded on its least, bounded by its most; None: not measured).
    comm = high = None
    if on_gpu and gpu is not None:
        comm, high = _exposed_range(analysis, gpu.comm_exposed_us / gpu.window_us)
    # The host's wait in every collective, on the loop thread's own clock (load-stable). Not
    # only the wait outside backward: ranks in lockstep wait at whichever collective the other
    # arrives late to (rank 0 waited 84% of its wait outside backward, rank 1 10%, same run),
    # and without the loop's collective the wait moves to the gradient exchange's.
    host = host_comm(run, analysis, clock=not on_gpu)
    if host is not None and (comm is None or host.share > comm):
        comm, high, on_gpu = host.share, max(host.share, high or 0.0), False
    if comm is None or high is None or severity_of(high, low=COMM, medium=COMM) is None:
        return None
    severity = severity_of(comm, low=COMM, medium=COMM, high=0.20) or "medium"
    read = host if not on_gpu else None
    said = OwnCollectives(
        tuple((c.line, c.text, c.step_loop_line or c.line) for c in every),
        comm,
        on_gpu,
        gain_bound(high, analysis, host_side=False),
        read.in_backward if read is not None else None,
        read.steps if read is not None and read.off_core is not None else None,
        read.traced if read is not None else None,
        gpu.unclocked_events if on_gpu and gpu is not None and gpu.partial else 0,
        high if on_gpu else None,
    )
    return found("distributed.own_collectives", severity, said, phase_share=comm,
                 bound=said.bound, line=every[0].line)  # fmt: skip


TIE = 170  # where its findings tie: the verdict table's order (rules._families)
RULES = (data_parallel, communication, own_collectives)
