"""What the verdict says, before it is worded: one record per answer and per evidence line.

``analysis/verdict.py`` (and ``analysis/elsewhere.py`` for training in child processes) decides
and hands these up on ``Verdict.answer`` and ``Verdict.lines``, their fields the figures it
decided on; ``gpu_notebook.words.verdict`` words each one when the report is built. A record's
class is its message; which variant of a sentence applies is a field, decided here, never read
back from text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.host_waits import HostWaits
from gpu_notebook.analysis.on_cpu import OnCpu
from gpu_notebook.records import (
    GpuTimeline,
    HostOverhead,
    VerdictAnswer,
    VerdictCategory,
    VerdictLine,
)

# A phase whose share of the step is an evidence line ("data wait: 30% of step time").
SharePhase = Literal["data", "sync", "copy", "comm"]

# --------------------------------------------------------------------------------------------
# Answers: the headline and the more-GPUs answer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoStep(VerdictAnswer):
    """No training step was seen: in this cell, or (``from_a_file``) in a trace file."""

    from_a_file: bool


@dataclass(frozen=True)
class NotRepresented(VerdictAnswer):
    """The profiled window is unlike most of the run and no timing covers the rest."""


@dataclass(frozen=True)
class TrainsInChildren(VerdictAnswer):
    """No step here, the cell trains in child processes: ``inner``'s more-GPUs answer kept."""

    inner: VerdictAnswer


@dataclass(frozen=True)
class DefinedNotRun(VerdictAnswer):
    """The cell only defines its training (``names``: its functions and classes)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class ScheduledNotRun(VerdictAnswer):
    """The cell's training is in coroutines it calls and never awaits (``scheduler``: the call
    it hands them to, ``create_task``...; None: a bare call)."""

    names: tuple[str, ...]
    scheduler: str | None


@dataclass(frozen=True)
class MemoryBound(VerdictAnswer):
    peak_share: float  # peak GPU memory over the card's


@dataclass(frozen=True)
class GpuBound(VerdictAnswer):
    busy: float
    inference: bool
    # On a partial GPU timeline ``busy`` is its clocked share (a lower bound) and this the most
    # it can be (None: not bounded); ``partial`` says so.
    busy_high: float | None = None
    partial: bool = False


@dataclass(frozen=True)
class Undecided(VerdictAnswer):
    """A partial GPU timeline (``analysis.gpu_bounds``): the verdict at its busy share's low end
    (``at_low``: the timeline as clocked) and at its top (``at_high``: NVML inside the steps,
    or up to 100% where ``high`` is None) differ, and the host's waits do not decide."""

    at_low: VerdictCategory
    at_high: VerdictCategory
    low: float
    high: float | None


@dataclass(frozen=True)
class GpuIdles(VerdictAnswer):
    """Host-bound on a GPU: the GPU idles ``idle`` of the window (None: not measured), named by
    its largest cause (``cause``; ``host_share``: the host's part where it is one of several)."""

    idle: float | None
    cause: Literal["host", "queued", "partly_host"]
    host_share: float
    inference: bool
    # A partial GPU timeline: ``idle`` is the most it can be, this the least (``gpu_bounds``).
    idle_least: float | None = None


@dataclass(frozen=True)
class HostPaced(VerdictAnswer):
    """Host-bound with no usable GPU timeline: NVML read the GPU busy past the GPU-bound line
    (``nvml_busy``: any time a kernel ran, more than the kernels' own time), and the host never
    waited on it (``waits``)."""

    nvml_busy: float
    waits: HostWaits
    inference: bool


@dataclass(frozen=True)
class NoBusyReading(VerdictAnswer):
    """Neither the GPU's busy time nor the host's overhead was measured."""


@dataclass(frozen=True)
class ExposedComm(VerdictAnswer):
    """Collectives nothing overlaps; the fix follows ``remedy`` (``verdict.comm_remedy``)."""

    exposed: float  # share of the GPU window
    remedy: Literal["straggler", "overlap", "bucket", "accumulate"]
    overlap: float  # share of the collectives' time under computation
    per_step: float  # collectives a step


@dataclass(frozen=True)
class GraphCapture(VerdictAnswer):
    """The trace records a CUDA-graph capture, not a step."""


@dataclass(frozen=True)
class HostComm(VerdictAnswer):
    """The host waits in collectives ``share`` of every step."""

    share: float
    # The traced wait's part inside backward (a gradient exchange's: DDP's); the rest is the
    # loop's own collectives. None: not read.
    in_backward: float | None = None


@dataclass(frozen=True)
class CommClock(VerdictLine):
    """The host's wait in collectives on the loop thread's own clock (analysis/host_comm)."""

    off_core: float  # the loop thread blocked (off a core, not waiting for one), of its own time
    steps: int  # the steps read
    traced: float  # the traced steps' comm phase, as the trace read it


@dataclass(frozen=True)
class InputBound(VerdictAnswer):
    data: float  # the data wait (and the copies, ``copies``) over the step
    gain: float  # the most the step speeds up without it (Amdahl)
    on_cpu: bool
    inference: bool
    copies: bool


@dataclass(frozen=True)
class SyncBound(VerdictAnswer):
    sync: float
    gain: float
    on_cpu: bool


@dataclass(frozen=True)
class OwnPython(VerdictAnswer):
    """A CPU run: the cell's own Python between operators holds ``share`` of the run's step."""

    share: float


@dataclass(frozen=True)
class TinyOps(VerdictAnswer):
    """A CPU run: Python and per-operator overhead set the pace."""


@dataclass(frozen=True)
class CpuCompute(VerdictAnswer):
    """A CPU run computes: a GPU would help."""

    inference: bool


@dataclass(frozen=True)
class Waiting(VerdictAnswer):
    """The loop thread is on a core only ``share`` of its steps' own time."""

    share: float


@dataclass(frozen=True)
class OwnCode(VerdictAnswer):
    """The cell's own code outside torch's operators holds ``share`` of the step."""

    share: float
    on_core_read: bool  # the loop thread's time on a core was read: it computes on the host


@dataclass(frozen=True)
class OwnThreadWait(VerdictAnswer):
    """The steps mostly waited for a core, and a thread of this program held most of that wait
    (``analysis.own_wait_verdict``): host-bound by that thread, not the machine's."""

    function: str  # where the thread stood (its qualname)
    held: float  # its share of the wait (``SideThreads.held``)
    wait_share: float  # the steps' wait for a core over their wall time


@dataclass(frozen=True)
class NoComputeEvidence(VerdictAnswer):
    """No wait or overhead sets the pace, and nothing says the step computes."""

    ops: float | None  # torch's operators over the step (None: not measured)


@dataclass(frozen=True)
class InMemoryHost(VerdictAnswer):
    """Tiny ops fed by batches assembled sample by sample from memory: one host overhead.
    ``whole``: the dataset already builds each batch in one call (cell.whole_batch_fetch): the
    wait is the loader's own per-batch work, and indexing whole batches is not the cut."""

    data: float
    gain: float
    on_cpu: bool
    whole: bool = False


@dataclass(frozen=True)
class ChildrenInput(VerdictAnswer):
    """The training ran in ``processes`` child processes, whose steps wait for data."""

    processes: int
    data: float


@dataclass(frozen=True)
class ChildrenUnknown(VerdictAnswer):
    """The training ran in ``processes`` child processes, mostly in ``phase``; not profiled."""

    processes: int
    phase: str
    share: float


# --------------------------------------------------------------------------------------------
# Evidence lines
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcrossLine(VerdictLine):
    """The deciding share's range over the steps straddles its line: both verdicts possible."""

    phase: Literal["data", "sync"]
    share: float
    low: float
    high: float
    steps: int
    level: float
    found: VerdictCategory
    other: VerdictCategory | None  # None: another verdict


@dataclass(frozen=True)
class GpuAcrossLine(VerdictLine):
    """A share read on the GPU whose range, widened by what two runs of the code differ by,
    holds its line (``analysis.gpu_line_reading``): the verdict is the line's in every such
    run, said as near it. ``figure``: the timeline's busy share, exposed collectives, idle time
    in a data wait or a sync (of the GPU's window); NVML's busy share; the peak memory (of the
    card). ``steps`` 1: one window, its point the range, widened by ``margin``."""

    figure: Literal["busy", "comm", "data", "sync", "nvml", "memory"]
    share: float
    low: float
    high: float
    steps: int
    margin: float
    level: float
    found: VerdictCategory


@dataclass(frozen=True)
class Unrepresentative(VerdictLine):
    """The profiled window's steps are unlike the run's; what the verdict rests on instead."""

    window_median_s: float
    run_median_s: float | None
    own_time: bool
    covers: float  # the share of the run's time in steps like the window's
    rests: Literal["data_split", "windows", "hooks", "none"]


@dataclass(frozen=True)
class UndecidedWindow(VerdictLine):
    """The window's host steps are unlike the run's, and the GPU's pace for them, which would
    decide whether it represents the run, is only known to be at least ``gpu_pace_s`` (a
    partial timeline: ``unclocked_tail`` GPU events may have run past the clocked work)."""

    window_median_s: float
    run_median_s: float | None
    gpu_pace_s: float
    unclocked_tail: int


@dataclass(frozen=True)
class WindowAlone(VerdictLine):
    """What the profiled window alone read."""

    category: VerdictCategory
    answer: VerdictAnswer


@dataclass(frozen=True)
class NoisyWindow(VerdictLine):
    window_median_s: float
    run_median_s: float | None
    recurs: float | None = None  # RunShape.window_noisy_recurs


@dataclass(frozen=True)
class TrainingDefined(VerdictLine):
    names: tuple[str, ...]


@dataclass(frozen=True)
class TrainingScheduled(VerdictLine):
    names: tuple[str, ...]
    scheduler: str | None


@dataclass(frozen=True)
class TrainedUnseen(VerdictLine):
    """The source calls backward() but no step was seen here."""


@dataclass(frozen=True)
class NoHostThread(VerdictLine):
    """A trace file with no host thread running operators."""


@dataclass(frozen=True)
class StepsSeen(VerdictLine):
    steps: int


@dataclass(frozen=True)
class RunDataWait(VerdictLine):
    """The step clock's data wait over the run, which overrules the window's."""

    share: float
    steps: int
    low: float
    high: float
    window_steps: int
    window_share: float | None


@dataclass(frozen=True)
class ShareOfStep(VerdictLine):
    phase: SharePhase
    share: float


@dataclass(frozen=True)
class NotMeasured(VerdictLine):
    why: Literal["unclocked", "no_gpu", "hooks", "no_trace"]
    phases: tuple[str, ...]


@dataclass(frozen=True)
class HostOps(VerdictLine):
    """Ops per step, median op time, Python between ops; ``reach`` where near ``line``."""

    host: HostOverhead
    reach: float | None  # the overhead in a traced step, where it nears the line (else None)
    line: float


@dataclass(frozen=True)
class InMemoryOverhead(VerdictLine):
    share: float  # the overhead with the batches' assembly from memory counted


@dataclass(frozen=True)
class GpuBusy(VerdictLine):
    """GPU busy from NVML (no GPU timeline): its mean over the sampler's ticks inside the steps
    ("steps"), or over the whole run, start-up included, where fewer than ``min_ticks`` fell
    inside them or no step was clocked ("run")."""

    busy: float
    scope: Literal["steps", "run"] = "run"
    ticks: int = 0  # the sampler's ticks inside the steps
    min_ticks: int = 0
    clocked: bool = True  # False: no step clocked, the steps' span is not known


@dataclass(frozen=True)
class HostWaited(VerdictLine):
    """The host thread's waits on the GPU, read where no GPU timeline measured the GPU's busy
    time (``analysis.host_waits``): what confirms or rules out NVML's upper bound."""

    waits: HostWaits


@dataclass(frozen=True)
class GpuWindow(VerdictLine):
    """The timeline's busy share and its window; the span beside it where they differ
    (``span_differs``), and where the host ran ahead (``ran_ahead``)."""

    gpu: GpuTimeline
    span_differs: bool
    ran_ahead: bool


@dataclass(frozen=True)
class BusyBounds(VerdictLine):
    """A partial GPU timeline's busy share as bounds: ``low`` its clocked share, ``high`` the
    most it can be (NVML inside the steps; None: not bounded, ``run_nvml`` the whole run's NVML
    mean where read, which bounds nothing)."""

    low: float
    high: float | None
    events: int
    run_nvml: float | None = None


@dataclass(frozen=True)
class Unclocked(VerdictLine):
    events: int
    busy_from_nvml: bool


@dataclass(frozen=True)
class GpuIdle(VerdictLine):
    """The GPU's idle time by cause, largest first, each a share of the window."""

    causes: tuple[tuple[Literal["host", "data", "sync", "kernel", "other"], float], ...]
    at_most: bool = False  # a partial GPU timeline: each share is the most it can be


@dataclass(frozen=True)
class CommOverlap(VerdictLine):
    busy: float
    overlap: float
    exposed: float
    # A partial GPU timeline: the figures are the clocked kernels' only, neither bound (unclocked
    # computation may hide more of the collectives, unclocked collectives expose more).
    partial: bool = False


@dataclass(frozen=True)
class GraphReplays(VerdictLine):
    launches: int
    gpu_s: float


@dataclass(frozen=True)
class ExposedCollectives(VerdictLine):
    exposed: float


@dataclass(frozen=True)
class PeakMemory(VerdictLine):
    peak_share: float


@dataclass(frozen=True)
class BusyNotMeasured(VerdictLine):
    pass


@dataclass(frozen=True)
class CapturedLaunches(VerdictLine):
    without_work: int
    launches: int


@dataclass(frozen=True)
class NoCuda(VerdictLine):
    """No CUDA device: phases measured on the CPU."""


@dataclass(frozen=True)
class ComputeLine(VerdictLine):
    """The loop thread's (or the process's threads') time on a core; or, not read, the ops'."""

    kind: Literal["process", "loop", "ops"]
    on_cpu: OnCpu | None
    ops: float | None


@dataclass(frozen=True)
class OnCoreAcross(VerdictLine):
    """The on-core share's range straddles its line: compute or waiting."""

    share: float
    low: float
    high: float
    line: float
    found_compute: bool  # found cpu-only (compute), else host-bound (waiting)


@dataclass(frozen=True)
class OutsideOps(VerdictLine):
    share: float


@dataclass(frozen=True)
class DataAsHost(VerdictLine):
    """The data wait counted as host work: batches assembled from memory (``why``)."""

    data: float
    why: str | None  # the loader's reason, as words/input_pipeline gave it


@dataclass(frozen=True)
class ChildrenNote(VerdictLine):
    """Where the training of a cell that starts processes ran, and what of it was measured."""

    launchers: tuple[str, ...]
    trains: bool
    here: int
    in_children: int


@dataclass(frozen=True)
class ChildrenPhases(VerdictLine):
    """The children's steps' time by phase, largest first."""

    processes: int
    steps: int
    shares: tuple[tuple[str, float], ...]
