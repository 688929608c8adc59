"""Typed, frozen records passed from stage to stage: capture -> Run -> analysis -> Report.

These records are the contract between the capture engine, the analysis, the rules and the views.
Every field carries its unit in its name. ``None`` always means "not measured" (no device, the
metric is unsupported, no trace); a measured zero is ``0``/``0.0``. ``Report`` round-trips
through JSON (``Report.to_json`` / ``Report.from_json``) with a schema version.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

import msgspec

# 2: the what-if, the GPU estimate and the before/after carry figures, not sentences (the views
# word them); every profiler window is one ProfileWindow. Schema 1 reports still read (below).
SCHEMA_VERSION = 2

# The phases of one training step, in display order. Shares of a step sum to 1 over these.
Phase = Literal[
    "data",  # waiting for the next batch (DataLoader __next__ in the main thread)
    "copy",  # host-side cost of host<->device copies (cudaMemcpy*, blocking pageable copies)
    "forward",  # top-level module forward passes, the loss module included
    "backward",  # autograd backward
    "optimizer",  # optimizer step and zero_grad
    "comm",  # the host waits on a collective in flight (gloo/NCCL all-reduce...), no op running
    "sync",  # host waits on the device or reads scalars: .item(), .cpu(), synchronize
    "other",  # other host work inside torch operators
    "unattributed",  # Python time outside any operator or marked range
]
PHASES: tuple[Phase, ...] = get_args(Phase)
# Phases that only exist in some runs: a view leaves them out where they were not measured
# (a one-process run has no collective to wait on), instead of printing "not measured".
OPTIONAL_PHASES: tuple[Phase, ...] = ("comm",)

VerdictCategory = Literal[
    "gpu-bound",
    "input-bound",
    "host-bound",
    "sync-bound",
    "memory-bound",
    "comm-bound",
    "cpu-only",
    "unknown",
]

StepAnchor = Literal["optimizer", "dataloader", "forward", "backward", "none"]
CellStatus = Literal["ok", "error", "interrupted"]
WindowStatus = Literal[
    "recorded",  # the window holds at least one complete step
    "partial",  # the cell ended (or failed) before the window was complete
    # steps ended at a lower anchor (closure calls, micro-batches) before a higher one took
    # over: the trace holds no whole step of the run (first_step None, recorded_steps 0)
    "within-step",
    "not-reached",  # fewer steps than the warm-up: nothing recorded
    "disabled",  # --no-profile
    "stepped-aside",  # another torch.profiler was active: ours did not run
    "unavailable",  # torch is not installed
]
Severity = Literal["info", "low", "medium", "high"]
Confidence = Literal["low", "medium", "high"]


# --------------------------------------------------------------------------------------------
# Capture records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuInfo:
    """Static facts about one GPU, read once through NVML (None: not available)."""

    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int | None = None
    compute_capability: str | None = None  # "8.0"
    pcie_generation: int | None = None
    pcie_width: int | None = None
    nvlink_links: int | None = None  # active NVLink links
    power_limit_w: float | None = None
    sm_count: int | None = None  # streaming multiprocessors (a trace's deviceProperties "numSms")


@dataclass(frozen=True)
class Environment:
    """Where the run happened."""

    python_version: str
    platform: str
    cpu_count: int
    torch_version: str | None  # None: torch is not installed
    cuda_available: bool
    nvml_available: bool
    nvml_message: str | None  # why NVML is not available, one line; None when it is
    driver_version: str | None = None
    gpus: tuple[GpuInfo, ...] = ()
    usable_cores: int | None = None  # os.sched_getaffinity: the cores this process may run on
    torch_threads: int | None = None  # torch's intra-op threads when the cell ended
    memory_total_bytes: int | None = None  # the machine's RAM (psutil), None: not read
    # The CPU's bfloat16 flags among avx512_bf16 and amx_bf16 (capture.cpu_bf16_flags; ():
    # neither), None: not read (no /proc/cpuinfo, not x86).
    cpu_bf16_flags: tuple[str, ...] | None = None


@dataclass(frozen=True)
class GpuSample:
    """One NVML reading of one GPU (None: the metric is not available on this device)."""

    index: int
    utilization_pct: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_w: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    temperature_c: float | None = None
    other_processes: int | None = (
        None  # compute processes on the GPU besides ours (None: not listed)
    )


@dataclass(frozen=True)
class Sample:
    """One sampler tick: the process (and its children) and every visible GPU."""

    t_s: float  # seconds since the capture started
    process_cpu_pct: float | None  # this process, 100 = one core
    # Its children (DataLoader workers), 100 = one core; None: not read, never "idle" (no child
    # listed yet, or one listed at this tick: psutil's first look at a process reads nothing).
    children_cpu_pct: float | None
    system_cpu_pct: float | None  # whole machine, mean over cores
    per_core_cpu_pct: tuple[float, ...] = ()
    rss_bytes: int | None = None  # this process plus its children
    gpus: tuple[GpuSample, ...] = ()
    steal_pct: float | None = None  # CPU time the hypervisor gave to other guests, mean over cores
    # processes below ours running this interpreter (DataLoader and multiprocessing workers) at
    # this sample; a shell line's programs are not counted (the cell waits for them)
    children: int | None = None
    # Share of the interval the measured thread was ready to run but waited for a core
    # (Linux schedstat run_delay): the machine's other work, never a sleep or a wait of its own.
    run_wait_pct: float | None = None

    def ours_cpu_pct(self) -> float | None:
        """This process and its children (100 = one core); None where a child was listed but
        not read (its CPU is not known to be 0: the sum would hand it to the other processes)."""
        if self.process_cpu_pct is None:
            return None
        if self.children_cpu_pct is None:
            return None if self.children else self.process_cpu_pct
        return self.process_cpu_pct + self.children_cpu_pct


@dataclass(frozen=True)
class ThreadSpot:
    """Where a sampler tick found a thread: the outermost function of its own (below
    ``threading``'s: the thread's target, ``TrainerMemoryTracker.peak_monitor_func``), the file
    and line that frame stood at, and how many ticks found it there."""

    function: str  # qualname
    file: str
    line: int
    seen: int


@dataclass(frozen=True)
class OwnThread:
    """Another Python thread of the measured process (not the loop's, not ours), read at the
    sampler's ticks (capture/own_threads_spin.py)."""

    name: str
    native_id: int
    # (t_s since the capture started, its time on a core so far in s: schedstat), in order.
    readings: tuple[tuple[float, float], ...] = ()
    spots: tuple[ThreadSpot, ...] = ()  # most seen first


@dataclass(frozen=True)
class SampleSeries:
    """The sampler's bounded buffer. ``interval_s`` is the effective spacing after downsampling."""

    requested_interval_s: float
    interval_s: float
    samples: tuple[Sample, ...] = ()
    downsample_factor: int = 1  # 2**k after k halvings of a full buffer
    notes: tuple[str, ...] = ()  # e.g. "GPU 0 lost at 12.3 s"
    # The process's other Python threads, their CPU time at the ticks (() : none, or not read).
    threads: tuple[OwnThread, ...] = ()


@dataclass(frozen=True)
class StepTiming:
    """One step seen by the step clock (global hooks, no profiler needed)."""

    index: int  # 0-based, over the whole cell
    start_s: float  # seconds since the capture started
    duration_s: float
    data_s: float  # time inside DataLoader __next__
    forward_s: float  # time inside top-level module forwards
    backward_s: float  # time inside torch.autograd.backward
    optimizer_s: float  # time inside Optimizer.step, outside its closure's calls
    forward_calls: int = 0
    backward_calls: int = 0
    batch_size: int | None = None  # leading dimension of the first tensor fed to the model
    timed: bool = True  # False once the clock went lean: only the step's duration is known
    ours_s: float = (
        0.0  # our own work inside the step (a profiler starting/stopping): not the code's
    )
    # The loop thread's wait for a core during the step (schedstat run_delay, read at each step
    # end): the machine's share of its wall time. None: not read (not Linux, a step too short
    # to pay for the read, an older record).
    wait_s: float | None = None
    cpu_s: float | None = None  # its time on a core (schedstat, to a scheduler tick)
    # The loader's calls read apart (the steps the loop thread's CPU clock is read on): their
    # time blocked off a core (neither the loop thread's CPU nor its wait for a core: a sleep,
    # I/O, a worker's queue, the GIL), the part of it no worker's queue explains (an
    # in-process loader's, or a worker's batch already queued), and the part of that while
    # other threads of the process ran (the GIL held by a side thread): host contention, left
    # out of ``data_s``. None: not read.
    data_blocked_s: float | None = None
    data_unqueued_s: float | None = None
    data_contention_s: float | None = None
    # The work the step did, counted lean or timed (a lean step times no phase and counts no
    # forward or backward): the calls of an optimizer's closure inside it (LBFGS's line search:
    # 5 a step, then 1) and the DataLoader batches read in it (an accumulation cycle's
    # micro-batches, a validation pass). None: not counted (an older record). Steps whose counts
    # differ do different work, the same in every run: the run's margin reads its spread between
    # steps of one work (``analysis.analyze._margin_steps``).
    closure_calls: int | None = None
    loader_reads: int | None = None


@dataclass(frozen=True)
class StepMemory:
    """Memory read at the end of one step (every Nth step; None: not read)."""

    index: int  # the step that had just ended
    rss_bytes: int | None  # this process's resident set (not its children)
    gpu_memory_bytes: int | None = None  # device memory in use (NVML), when the sampler had it


@dataclass(frozen=True)
class StepCpu:
    """This process's CPU time (every thread: torch's intra-op pool too), read at the end of one
    step; the step clock reads it at steps spaced a quarter of their index apart (a few dozen
    readings over any run)."""

    index: int  # the step that had just ended
    end_s: float  # its end, seconds since the capture started
    process_cpu_s: float  # this process's CPU time so far (not its children's)


@dataclass(frozen=True)
class ChildProcessSteps:
    """One process the cell started (or one of those started) that ran optimizer steps, counted
    and timed there by hooks: phases from its first optimizer step's end to its last's."""

    pid: int
    parent_pid: int  # the cell's process, or the child that started this one (a grandchild)
    started: Literal["forked", "spawned"]
    steps: int
    span_s: float  # from its first step's end to its last's (steps - 1 steps)
    data_s: float  # in the DataLoader iterator's __next__ over that span
    backward_s: float  # in torch.autograd.backward
    optimizer_s: float  # in optimizer step()s (a closure's forward/backward left out)

    @property
    def rest_s(self) -> float:
        """Forward and the rest (no hook of ours sits on modules)."""
        return max(0.0, self.span_s - self.data_s - self.backward_s - self.optimizer_s)

    def phases_s(self) -> dict[str, float]:
        return {
            "data": self.data_s,
            "forward and the rest": self.rest_s,
            "backward": self.backward_s,
            "optimizer": self.optimizer_s,
        }


@dataclass(frozen=True)
class PaddedBatch:
    """One batch the loop read, as its token field showed its padding (capture/padding.py)."""

    rows: int
    length: int  # the field's padded length (its second dimension)
    longest: int  # the longest row's real tokens: the length padding to the longest would give
    real: int  # real tokens over all its rows
    field: str  # "attention_mask", "input_ids", or "batch[i]" of a tuple batch
    # The value the rows' trailing runs hold, where read from token ids (None: from a mask).
    pad_value: int | None = None


@dataclass(frozen=True)
class PaddingReading:
    """The padding of the first batches the loop read (bounded: a few batches)."""

    batches: tuple[PaddedBatch, ...] = ()  # those with a token field read
    reads: int = 0  # batches looked at
    on_device: int = 0  # ... whose token field was on a device already: not read (a sync)


@dataclass(frozen=True)
class BatchHighsReading:
    """The steps whose batch was larger than every earlier one (capture/batch_highs.py)."""

    steps: tuple[int, ...] = ()  # each step (its index) whose batch set a new largest size
    reads: int = 0  # batches the loader handed the loop
    sized: int = 0  # ... of them with plain tensors to size
    complete: bool = True  # False: the highs outran the bound and were no longer kept


@dataclass(frozen=True)
class StepClockRecord:
    """What the step clock saw over the whole cell (bounded: ``steps`` may be decimated)."""

    anchor: StepAnchor  # which event ends a step
    step_count: int  # all steps, even those decimated out of ``steps``
    steps: tuple[StepTiming, ...] = ()
    decimation: int = 1  # keep-every-Nth applied to ``steps``
    event_counts: Mapping[str, int] = field(default_factory=dict)  # hook name -> calls
    grad_bytes: int | None = None  # bytes of trainable parameters (= gradients all-reduced)
    # Trainable tensors the first optimizer to step updates (None: not read): an unfused
    # update's per-tensor ops (``analysis.fused_update``).
    grad_tensors: int | None = None
    # (tensors, bytes) the first optimizer of each class to step updates, by class name (the
    # trace's names): a fused bound of one class of several (``rules.launch``).
    optimizer_tensors: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # (seconds, steps) each optimizer class's own steps took on the loop thread's CPU clock,
    # outside the profiled windows and the first step (a closure's calls inside a step left out).
    optimizer_cpu: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    # (minor page faults, steps read) inside each class's own steps, over every training step
    # of 1 ms or more (one in eight of shorter ones) up to the end of the first profiled window
    # (its steps included; ``faults_off_step``) (Linux only; empty: not read); the same steps'
    # faults outside every update, its profiled steps left out (faults, steps); and what one fault costs the thread's CPU clock on this machine, measured at the
    # run's end where an update faulted (seconds; None: not measured). A fused update makes
    # no full-size temporaries: the faults they cause are its to remove (``fused_update``).
    optimizer_faults: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    rest_faults: tuple[int, int] = (0, 0)
    # The step from which faults were read no more (None: to the end): the first profiler
    # window stopped there. The heap its buffers leave is ours as much as the program's (the
    # update's temporaries may stop faulting for the rest of the run); the updates of its
    # profiled steps are read (faults only), the steps after it not.
    faults_off_step: int | None = None
    fault_cost_s: float | None = None
    memory: tuple[StepMemory, ...] = ()  # memory at the end of every Nth step (bounded)
    process_cpu: tuple[StepCpu, ...] = ()  # the process's CPU time at spaced step ends
    lean_data: bool = False  # untimed (lean) steps still carry their DataLoader wait
    lean_optimizer: bool = False  # ... and their optimizer step's time (optimizer_s)
    # The DataLoader the loop read most batches from, as its iterator ran (None: no loader).
    loader_num_workers: int | None = None
    loader_pin_memory: bool | None = None
    # ... and it reads an IterableDataset whose code never splits its stream by worker
    # (capture.streams): every worker added would yield all of its items.
    loader_unsplit_stream: bool | None = None
    # Tensors in its first batch: each one a shared-memory storage a worker fills and the main
    # process receives (None: not read).
    loader_batch_tensors: int | None = None
    # Processes below the cell's that stepped (forked, spawned, and their own children).
    children: tuple[ChildProcessSteps, ...] = ()
    # Autograd's anomaly detection as the timed steps' backward calls found it
    # (``torch.is_anomaly_enabled()`` read as each one starts): on while the loop ran, wherever
    # it was set (a helper of an earlier cell, a global switch). ``anomaly_backwards``: the calls
    # that found it on, of ``anomaly_backward_reads`` (None: none read).
    anomaly_backwards: int | None = None
    anomaly_backward_reads: int = 0
    # The function that called the first such backward, below torch's own frames (its
    # qualname; None: the cell's top level, or not read): where the switch is to be found.
    anomaly_caller: str | None = None
    # Other process-wide modes read at the same backward calls (of ``anomaly_backward_reads``):
    # ``torch.are_deterministic_algorithms_enabled()`` (and warn-only),
    # ``torch.backends.cudnn.deterministic``, ``torch.get_default_dtype() is torch.float64``.
    deterministic_backwards: int = 0
    deterministic_warn_only_backwards: int = 0
    cudnn_deterministic_backwards: int = 0
    double_default_backwards: int = 0
    # Bytes of the trainable parameters (``grad_bytes``) that are float64 (None: not read).
    double_grad_bytes: int | None = None
    # The end of the last step counted (seconds since the capture started; None: no step):
    # ``steps`` may have been thinned past it, the cell's time after it is not the steps'.
    last_end_s: float | None = None
    # The steps whose first batch was a DataLoader iterator's first (``iter(loader)`` then its
    # first ``__next__``: a new loader's workers start there), in order; empty: none read (an
    # older record, or no loader).
    loader_starts: tuple[int, ...] = ()
    # The share of real tokens in the first batches the loop read (None: no batch looked at).
    padding: PaddingReading | None = None
    # Where the batches grew: memory rising at a new largest batch is the allocator's, not a leak.
    batch_highs: BatchHighsReading | None = None


@dataclass(frozen=True)
class WithinStep:
    """What a ``within-step`` window recorded: ``recorded`` steps counted at ``counted_at``
    before the first step counted at ``anchor`` (a higher anchor, from then on) ended; or,
    ``regrouped``, steps counted before the loop's cycle of several optimizers' steps was learnt
    and then joined into one. Either way parts of a step, no whole one. ``trained`` False: the
    steps recorded ran no backward (work before training: an evaluation over a DataLoader)."""

    recorded: int
    counted_at: str = ""
    anchor: str = ""
    trained: bool = True
    regrouped: bool = False


@dataclass(frozen=True)
class ProfileWindow:
    """One bounded torch.profiler window: the first (``Run.window``) or a later one, spaced over
    a long cell (``Run.more_windows``); ``Run.windows`` has them all, in order."""

    status: WindowStatus
    warmup_steps: int  # steps the window waited for before it started
    profile_steps: int  # steps it was to record (``-s/--steps``)
    first_step: int | None = None  # index of the first recorded step
    recorded_steps: int = 0
    trace_path: str | None = None  # exported Kineto JSON (may be .json.gz)
    message: str | None = None  # one line for the user when the window did not record
    # What a ``within-step`` window recorded instead of whole steps (its ``message`` is worded
    # from it: words/window.py). None: any other status, an older record.
    within_step: WithinStep | None = None
    # Stepped aside for a torch profiler already recording as the cell started (an earlier
    # cell's, a library's): the step times include what it costs.
    profiler_before_cell: bool = False
    # Stepped aside for a torch profiler the cell itself started (its `with profile(...)`, its
    # `prof.start()`): while it records, the step times include what it costs.
    profiler_in_cell: bool = False
    # Each recorded step's wait for a core (s), from ``first_step`` on: the loop thread's
    # schedstat run_delay read at the step marks the trace holds, so each figure covers the
    # trace's own step, not the step clock's (whose boundaries lie up to a time slice away).
    # None: not read (no /proc schedstat, the marks on another thread, an older record). A
    # ``within-step`` window (no whole step, ``first_step`` None) has its recorded calls' waits
    # here, in the trace's order.
    step_waits_s: tuple[float, ...] | None = None
    # The window stopped before ``profile_steps`` once its steps took this much of the thread's
    # CPU (s): the budget that bounds what profiling costs. None: not stopped by it.
    stopped_at_cpu_s: float | None = None


# ---- the stack sampler's counts (capture/stacks.py fills them; analysis/lines.py reads them)

# The edge sampler's labels (``StackCount.phase``; capture/stacks.py ``segment_provider``): a
# sample taken before the step clock counted any step, one held back inside the steps under an
# anchor that a later one may still supersede (its steps were then before the run's first), and
# one taken after the run's last step ended (the samples since its end, under its anchor).
EDGE_BEFORE = "before"
EDGE_STEPS = "steps:"  # + the anchor
EDGE_AFTER = "after:"  # + the anchor

# The collapsed-stack key of samples past ``RawStacks``'s max_stacks (and of samples with no Python
# frame below the root): analysis writes it, the flame graph draws it as one grey box.
OTHER = "[other]"


@dataclass(frozen=True)
class CodeRef:
    """One Python function (code object) seen in a sample."""

    filename: str  # co_filename: the cell's is the name IPython compiled it under
    function: str  # co_qualname ("Module._call_impl", "<module>")
    first_line: int  # co_firstlineno


@dataclass(frozen=True)
class StackCount:
    """One distinct stack: how many samples caught it and the wall time they stand for."""

    frames: tuple[tuple[int, int], ...]  # (index into RawStacks.functions, line), outermost first
    phase: str | None  # the provider's label, else the phase read from the stack
    count: int
    time_us: int  # sum of the samples' weights (wall time since the previous sample)
    rooted: bool  # the walk stopped at a root frame: frames[0] is the cell's own frame
    # The sampled thread's CPU time and its wait for a core (schedstat run_delay) since the
    # previous sample, summed over the samples (0 where ``RawStacks.cpu_us`` is None).
    cpu_us: int = 0
    wait_us: int = 0


@dataclass(frozen=True)
class LineCount:
    """Samples whose stack was running ``filename:line`` in any frame (inclusive, once a sample)."""

    filename: str
    line: int
    samples: int
    time_us: int
    phase_time_us: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FunctionCount:
    """Samples in one function: innermost (self) and anywhere in the stack (total, once a sample)."""

    function: int  # index into RawStacks.functions
    self_samples: int
    total_samples: int
    self_us: int
    total_us: int


@dataclass(frozen=True)
class RawStacks:
    """What one sampling run counted. ``samples`` counts every kept sample, folded ones included."""

    thread_id: int
    interval_s: float  # requested spacing
    samples: int
    time_us: int  # wall time the kept samples stand for (sum of their weights)
    duration_s: float  # wall time the sampler was active (pauses excluded)
    functions: tuple[CodeRef, ...] = ()
    stacks: tuple[StackCount, ...] = ()  # at most max_stacks
    other_samples: int = 0  # samples past max_stacks, counted under "[other]"
    other_us: int = 0
    lines: tuple[LineCount, ...] = ()  # exact, folded samples included
    function_counts: tuple[FunctionCount, ...] = ()  # exact, folded samples included
    cell_filename: str | None = None  # lines were restricted to this file (None: all files)
    root_filename: str | None = None  # file of the outermost frame of rooted stacks: the cell's
    missed_samples: int = 0  # ticks when the thread ran no Python (not started, or ended)
    # Sum over the samples taken (dropped ones included) of how late each was (oversleep + waiting
    # for the GIL): a mean of several ms says the cell held the GIL for long stretches, where
    # sampling is least exact.
    late_s: float = 0.0
    own_samples: int = 0  # ticks that caught the thread inside the sampler's API: dropped
    # Ticks that caught the thread outside any cell while other ticks were inside one (IPython
    # compiling the cell, the capture starting or ending): not the cell's time, dropped.
    outside_samples: int = 0
    outside_us: int = 0
    sampler_cpu_s: float = 0.0  # CPU time of the sampler thread (its cost on a free core)
    # Taken on a jittered clock with the switch interval lowered just before each sample
    # (StackSampler(brief_switch=True)): when a sample falls does not depend on where the
    # program releases the GIL, so its time split is a share (False: it leans, a count only).
    clocked: bool = False
    # The execution numbers of the other cells whose frames the stacks hold, by compiled name:
    # ipykernel names a cell by a hash of its source ("/tmp/ipykernel_PID/HASH.py"), and only
    # the shell's compiler knows which In[N] that file is (terminal IPython's names hold N).
    cell_numbers: Mapping[str, int] = field(default_factory=dict)
    # The sampled thread's CPU time and wait for a core (Linux schedstat) that the kept samples
    # stand for, folded ones included; None: not read (no schedstat, the thread's clock lost).
    cpu_us: int | None = None
    wait_us: int | None = None

    @property
    def effective_interval_s(self) -> float:
        """Mean wall time a sample stands for (the GIL can stretch the requested interval)."""
        return self.duration_s / self.samples if self.samples else self.interval_s

    @property
    def mean_lateness_s(self) -> float:
        taken = self.samples + self.own_samples + self.outside_samples
        return self.late_s / taken if taken else 0.0


@dataclass(frozen=True)
class RankInfo:
    """Where one process sits in a multi-process job (torchrun / torch.distributed)."""

    rank: int
    world_size: int
    local_rank: int | None = None
    host: str = ""
    source: Literal["env", "process-group", "trace"] = "env"
    backend: str | None = None  # "gloo", "nccl"... when a process group said so


@dataclass(frozen=True)
class Run:
    """Everything one capture produced. Frozen; analysis only reads it."""

    env: Environment
    cell_source: str
    status: CellStatus
    error: str | None  # "ZeroDivisionError: division by zero"
    wall_s: float
    samples: SampleSeries
    steps: StepClockRecord
    window: ProfileWindow
    started_at: str  # ISO 8601
    notes: tuple[str, ...] = ()
    stacks: RawStacks | None = None  # the stack sampler's counts; None: line sampling off
    # A default run's sparse samples over the rest of the run, at the program's own switch
    # interval: read for the framework share only, never for lines (capture/stacks.py).
    framework_stacks: RawStacks | None = None
    # Samples at 20 Hz labelled by where the step clock stood (records.EDGE_*): the lines
    # that took the cell's time before its first step and after its last (None: not sampled).
    edge_stacks: RawStacks | None = None
    first_line: int = 2  # line number of cell_source's first line (2 in a %%gpucheck cell)
    magic_line: str = ""  # the cell's "%%gpucheck ..." line: fixed cells keep it, to measure again
    more_windows: tuple[ProfileWindow, ...] = ()  # profiler windows after the first, spaced out
    rank: RankInfo | None = None  # None: not part of a multi-process job
    # What the user ran: a %%gpucheck cell, or a file under `gpucheck run` (the report names
    # it so: "this script", words/program.py).
    program: Literal["cell", "script"] = "cell"

    @property
    def windows(self) -> tuple[ProfileWindow, ...]:
        """Every profiler window of the run, the first one first."""
        return (self.window, *self.more_windows)

    @property
    def window_ranges(self) -> tuple[tuple[int, int], ...]:
        """(first step, recorded steps) of every window that recorded a step, in order."""
        return tuple(
            (w.first_step, w.recorded_steps)
            for w in self.windows
            if w.first_step is not None and w.recorded_steps > 0
        )


@dataclass(frozen=True)
class LiveStatus:
    """What a live view shows, built by the capture on the sampler thread at each tick."""

    sample: Sample
    step_count: int
    median_step_s: float | None
    recording: bool
    step_times_s: tuple[float, ...] = ()  # step time over the run so far, one value per bucket


# --------------------------------------------------------------------------------------------
# %gpustatus records: the machine now, read by gpu_notebook.status, shown by views/gpustatus.py
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessInfo:
    """One process holding GPU memory (user/command None: the process is not visible here)."""

    pid: int
    user: str | None
    command: str | None
    used_memory_bytes: int | None


@dataclass(frozen=True)
class GpuStatus:
    """One GPU now: its facts, one reading and the processes holding its memory."""

    info: GpuInfo
    reading: GpuSample | None  # None: the GPU is lost
    processes: tuple[ProcessInfo, ...] | None  # None: NVML refuses to list them
    note: str | None = None


@dataclass(frozen=True)
class MachineStatus:
    """Every GPU of the machine now, or why none can be read."""

    available: bool
    message: str | None  # why no GPU can be read
    driver_version: str | None
    gpus: tuple[GpuStatus, ...] = ()


# --------------------------------------------------------------------------------------------
# Analysis records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepPhases:
    """One step split into phases (microseconds); the phases sum to ``duration_us``."""

    index: int
    start_us: float  # trace clock (trace source) or capture clock (hooks source)
    duration_us: float
    phase_us: Mapping[str, float]


@dataclass(frozen=True)
class PhaseBreakdown:
    """Phase split of the recorded steps. Phases not in ``measured`` were not measured."""

    source: Literal["trace", "hooks"]
    steps: tuple[StepPhases, ...]
    total_us: float
    phase_total_us: Mapping[str, float]
    measured: tuple[str, ...]  # phases this source can see (others: not measured)
    # "inference": no backward and no optimizer anywhere in what was measured; None: unknown.
    workload: Literal["training", "inference"] | None = None
    # The share of the steps' wall time their thread waited for a core, taken out of the phases
    # (analysis.interference.own_time_phases); 0: none was.
    waited_share: float = 0.0
    # The same steps' phases with that wait left in, as the phases' wall times hold it (the
    # wait spread over the phases in proportion to their time); None: no wait was taken out.
    # Beside the own split (the wait taken where the steps ran long) it says how far where the
    # wait went moves a share (analysis.too_busy).
    wall_phase_total_us: Mapping[str, float] | None = None
    wall_total_us: float | None = None
    # The part of the "comm" phase's time that lay inside a backward call (a gradient
    # exchange's wait: DDP's reducer waits at the end of backward), 0..1; the rest is the
    # loop's own collectives. None: no comm time, or not read (hooks, older records).
    comm_in_backward: float | None = None

    def wall_share(self, phase: str) -> float | None:
        """``phase``'s share of the steps' wall time, the wait left in; None: not measured, or
        no wait was taken out."""
        if phase not in self.measured or self.wall_phase_total_us is None:
            return None
        if not self.wall_total_us or self.wall_total_us <= 0:
            return None
        return self.wall_phase_total_us.get(phase, 0.0) / self.wall_total_us

    def share(self, phase: str) -> float | None:
        """Fraction of the recorded step time spent in ``phase``; None when not measured."""
        if phase not in self.measured or self.total_us <= 0:
            return None
        return self.phase_total_us.get(phase, 0.0) / self.total_us


@dataclass(frozen=True)
class CopyStats:
    """Device copies of one kind, e.g. ``HtoD (Pageable -> Device)``."""

    kind: str
    count: int
    duration_us: float
    bytes: int | None


@dataclass(frozen=True)
class GpuStepFigures:
    """One profiled step's part of the GPU timeline's window (``analysis.gpu_line_steps``): its
    GPU window (the time the GPU ran the step's work, or the host's step where the GPU ran
    ahead of nothing) and, inside it, busy time, exposed collectives, and idle time while the
    host thread was in a data wait or copy, or in a sync."""

    window_us: float
    busy_us: float
    comm_exposed_us: float = 0.0
    idle_data_wait_us: float = 0.0
    idle_sync_wait_us: float = 0.0


@dataclass(frozen=True)
class GpuTimeline:
    """GPU activity in the window, from kernel/memcpy/memset events of the trace."""

    window_us: float
    busy_us: float  # union of all GPU activity
    idle_us: float
    idle_host_wait_us: float  # the GPU waited for the host to launch work
    idle_kernel_wait_us: float  # short gaps between back-to-back work (launch latency)
    idle_other_us: float
    kernel_us: float  # sum of kernel durations (may overlap across streams)
    comm_us: float  # collective kernels (nccl / rccl)
    memset_us: float
    copies: tuple[CopyStats, ...] = ()
    # GPU time (kernels, copies, memsets) by the host phase of the op that launched it.
    gpu_phase_us: Mapping[str, float] = field(default_factory=dict)
    tensor_core_kernel_us: float | None = None
    devices: tuple[int, ...] = ()
    # Which window the figures above describe: the profiled steps' host span, the GPU span
    # (first to last activity launched inside the trace: HTA's and TraceLens's), or the caller's.
    window_source: Literal["steps", "gpu_span", "caller"] = "gpu_span"
    window_start_us: float | None = None  # trace clock
    span_us: float | None = None  # the GPU span, and its busy time (both on the same activity)
    span_busy_us: float | None = None
    before_trace_us: float = 0.0  # activity in the window whose launch precedes the trace
    # Busy time no event shows: the window's first recorded work waited this long after its
    # launch, queued behind work launched before the profiler started (a host running ahead).
    queued_before_trace_us: float = 0.0
    # How long after the host's last profiled step the GPU finished the work launched in the
    # steps; the window (source "steps") runs to that end.
    host_ahead_us: float = 0.0
    # GPU events the trace holds without timestamps (CUPTI wrote ts 0, dur 0): left out.
    unclocked_events: int = 0
    # ... of which launched after the last clocked event on their stream (or not placed at all):
    # they may have run past the clocked work's end. 0: a stream's order puts every unclocked
    # event before a clocked one, so the window's end (``host_ahead_us``) is measured.
    unclocked_tail: int = 0
    # ... of which collectives: they may have run exposed in any idle gap, so the exposed
    # collectives (``comm_exposed_us``) are then no upper bound (0: they are one).
    unclocked_collectives: int = 0
    # ... of which kernels that are tensor-core by name, and the other kernels; and the most
    # time (µs, in the window) each kind can have run: the room their streams' clocked events
    # leave free (None: a stream not known). ``analysis.tc_share`` reads the share's range.
    unclocked_tensor_core_kernels: int = 0
    unclocked_other_kernels: int = 0
    unclocked_tensor_core_room_us: float | None = 0.0
    unclocked_other_room_us: float | None = 0.0
    # Parts of the host wait: the host thread was in a data wait / host copy, or in a sync.
    idle_data_wait_us: float = 0.0
    idle_sync_wait_us: float = 0.0
    # The host and launch waits (host wait, kernel wait) while the host thread was in the
    # model's forward or backward: what compiling the model can reach (not the optimizer's
    # launches, nor Python outside the model). None: phases not located on the host thread.
    idle_model_wait_us: float | None = None
    compute_us: float = 0.0  # union of the non-collective kernels
    comm_busy_us: float = 0.0  # union of the collective kernels
    comm_exposed_us: float = 0.0  # ... where no computation runs (HTA's / TraceLens's exposed)
    memcpy_exposed_us: float = 0.0  # copies and memsets where no kernel runs
    collectives: int = 0  # collective kernels in the window
    graph_launches: int = 0  # cudaGraphLaunch / hipGraphLaunch calls in the trace
    graph_us: float = 0.0  # GPU time of the work those launches replayed
    kernel_launches: int = 0  # kernel launch calls in the trace
    launches_without_work: int = 0  # ... whose kernel never ran (recorded into a graph)
    capture: bool = False  # the trace is a CUDA/HIP graph capture, not a step
    # The window cut into its profiled steps (they tile it: their sums are the figures above);
    # () where the window is not the steps' (a GPU span, a caller's window) or holds one step.
    steps: tuple[GpuStepFigures, ...] = ()

    @property
    def comm_overlap_share(self) -> float | None:
        """Share of the collective time overlapped by computation; None without collectives."""
        if self.comm_busy_us <= 0:
            return None
        return 1.0 - self.comm_exposed_us / self.comm_busy_us

    @property
    def busy_share(self) -> float:
        return self.busy_us / self.window_us if self.window_us > 0 else 0.0

    @property
    def partial(self) -> bool:
        """A timeline some of whose GPU events carry no timestamps (``unclocked_events``): its
        busy share is a lower bound, not the GPU's measured share."""
        return self.window_us > 0 and self.unclocked_events > 0


@dataclass(frozen=True)
class OpStat:
    """A top operator in the window by self time."""

    name: str
    calls: int
    total_us: float
    self_us: float
    device: Literal["cpu", "gpu"] = "cpu"
    median_self_us: float | None = None  # the typical call's self time (None: older records)


@dataclass(frozen=True)
class StepStats:
    """Step time over every step the step clock saw (the warm-up excluded where possible)."""

    count: int
    median_s: float | None
    p90_s: float | None
    batch_size: int | None = None
    samples_per_s: float | None = None


@dataclass(frozen=True)
class UtilizationStats:
    """Summary of the sampler's series (None: not measured)."""

    gpu_util_mean_pct: float | None
    gpu_util_p5_pct: float | None
    gpu_util_p95_pct: float | None
    gpu_memory_peak_bytes: int | None
    gpu_memory_total_bytes: int | None
    process_cpu_mean_pct: float | None
    children_cpu_mean_pct: float | None
    system_cpu_mean_pct: float | None
    rss_peak_bytes: int | None
    # The same ticks inside the steps only (None: no step clocked): the figures of the training
    # steps, the imports, the model's build and the start-up left out.
    in_steps: InSteps | None = None

    @property
    def nvml_busy(self) -> float | None:
        """The GPU's busy share on NVML (0..1): the mean inside the steps where enough ticks
        fell there, else the whole run's (start-up included: ``InSteps.read`` says which);
        None: no NVML utilization read."""
        steps = self.in_steps
        if steps is not None and steps.read and steps.gpu_util_mean_pct is not None:
            return steps.gpu_util_mean_pct / 100.0
        mean = self.gpu_util_mean_pct
        return mean / 100.0 if mean is not None else None


@dataclass(frozen=True)
class InSteps:
    """The sampler's ticks whose interval lies inside the steps (from the first step's start to
    the last one's end): what the loop itself used. The whole run's means hold the imports and
    set-up too (one core busy, the GPU idle): the H100's input-bound script read 831% CPU over
    its run and 1588% inside its steps, its GPU-bound one 33% NVML over its run, 94% inside."""

    ticks: int  # ticks inside the steps
    min_ticks: int  # fewer than this: nothing below is read (None)
    gpu_util_mean_pct: float | None  # NVML utilization, mean over those ticks (every GPU)
    ours_cores: float | None  # this process and its workers, median over those ticks, in cores
    # The steps' wait for a core (schedstat, the step clock's loop thread) over their wall time;
    # None: not read on any step.
    wait_share: float | None = None
    # The cores the loop would keep busy on a quiet host (assumption: the same CPU work per step,
    # each step shorter by its wait for a core, as the steps' own time is read): ``ours_cores``
    # over ``1 - wait_share``, at most the host's cores. ``ours_cores`` where no wait was read.
    quiet_cores: float | None = None
    # Over the same ticks: other processes' cores (median; ``interference.others_cores``), and
    # the share of a tick's interval the loop's thread waited for a core (the sampler's
    # schedstat reading, median; None: not read). ``MachineFacts``' loop figures are these.
    others_cores: float | None = None
    run_wait: float | None = None

    @property
    def read(self) -> bool:
        """Enough ticks fell inside the steps to read the loop's figures."""
        return self.ticks >= self.min_ticks


@dataclass(frozen=True)
class VerdictAnswer:
    """What the verdict answers, before it is worded: its headline and its more-GPUs answer.

    One subclass per answer (``analysis/verdict_said.py``), its fields the figures the verdict
    decided on; ``gpu_notebook.words.verdict`` words it when the report is built. Analysis
    never writes the sentence.
    """


@dataclass(frozen=True)
class VerdictLine:
    """One line of the verdict's evidence, before it is worded (``analysis/verdict_said.py``;
    worded by ``gpu_notebook.words.verdict``)."""


@dataclass(frozen=True)
class Verdict:
    """The one-line answer, its evidence and whether more GPUs would help.

    Analysis hands it up with ``answer`` and ``lines`` (its figures) and the text fields empty;
    ``gpu_notebook.words.verdict.word_verdict`` words them when the report is built, so the
    report's verdict, its JSON and every view hold the text (``answer`` None, ``lines`` ()).
    """

    category: VerdictCategory
    headline: str
    more_gpus: str
    evidence: tuple[str, ...]
    confidence: Confidence
    # The data wait this host-bound verdict counts as host work, as a share of the step: batches
    # assembled sample by sample from memory (input.in_memory_batches) are per-sample Python,
    # the same overhead as tiny ops, not input starvation. None: no data wait was so counted.
    data_as_host: float | None = None
    # The steps waited for a core (other programs held the CPU) at least half their time: how far
    # that wait moves the share that decides (analysis.too_busy). Where it moves it across its
    # line no bound is named: category "unknown", "too busy to judge" (words/verdict.py).
    core_wait: CoreWait | None = None
    # (steps, warm-up): the run ended after that many steps, within the profiler's warm-up, so no
    # step was profiled and the verdict rests on the step clock's timings of its first steps
    # (analysis.verdict._ended_in_warmup; said by words/verdict.py). None: a step was profiled.
    warmup_only: tuple[int, int] | None = None
    # Not yet worded (the report's verdict is): never in the JSON.
    answer: VerdictAnswer | None = None
    lines: tuple[VerdictLine, ...] = ()


@dataclass(frozen=True)
class CoreWait:
    """The steps a verdict rests on waited for a core (schedstat run_delay: ready to run while
    other programs held the CPU) this much of their time, and the share nearest its line read
    with that wait put elsewhere (``analysis.too_busy``)."""

    wait_share: float  # the steps' wait for a core over their wall time
    steps: int  # how many steps the share was read from
    # The phase whose share is nearest its line ("data", "sync"); "batch": a step's data wait
    # against the in-memory line (``BatchAtLine``), its share, low, high and line in seconds.
    phase: str
    share: float  # as the verdict read it: each step less its wait, taken where it ran long
    # The least and the most the share reads with the wait spread over the phases as their
    # wall times hold it, left in where it was not read, or over the steps' 90% range.
    low: float
    high: float
    line: float  # the share at which the verdict changes
    found: VerdictCategory  # the verdict the share as read gives
    other: VerdictCategory | None  # the verdict across the line (None: another, not read)
    judged: bool  # False: the range holds the line, no bound is named (too busy to judge)
    # The share of that wait a thread of this process held (``SideThreads.held``) and where that
    # thread stood (its target's qualname); None: none read.
    own_held: float | None = None
    own_function: str | None = None
    # ``own_held`` is most of the wait (``analysis.own_wait_verdict.OWN_WAIT_MOST``): the wait is
    # the thread's, not the machine's; where it moved the share across its line the verdict is
    # host-bound by that thread, not too busy to judge.
    own_mostly: bool = False


@dataclass(frozen=True)
class BatchAtLine:
    """The loop's batches load near the in-memory line (``rules.input_pipeline``: a batch under
    a worker's handoff is assembled from memory) and the steps mostly waited for a core: with
    that wait all in the data wait or none of it, a batch reads from ``low_s`` to ``high_s``,
    either side of ``line_s``. ``other`` is the in-memory reason when the batch as read is over
    the line (None: as read it is under it, in memory, and the other side is not)."""

    batch_s: float  # a step's data wait as read (each step less its wait)
    low_s: float
    high_s: float
    line_s: float
    wait_share: float  # the steps' wait for a core over their wall time
    steps: int
    other: str | None


@dataclass(frozen=True)
class FixProposal:
    """A fix made concrete for this cell: the patched source, or why it could not be made."""

    fix_id: str
    title: str
    why: tuple[str, ...]  # two short lines
    doc_url: str
    source_after: str | None  # the whole patched cell; None when refused
    diff: str | None  # unified diff of the cell
    refusal: str | None = None  # why no patch could be made


@dataclass(frozen=True)
class Said:
    """What a finding says, before it is worded: the figures a rule measured and decided on.

    Each rule family subclasses it, one record per message (its class is the message's id, its
    fields the figures, typed); ``gpu_notebook.words`` words it into the finding's title,
    evidence, fix and source when the report is built. Rules never write sentences.
    """


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem with its evidence and the most a fix can gain (Amdahl).

    A rule hands it up with ``said`` (its figures) and the text fields empty, or holding only
    what the rules' own notes add (``gpu_notebook.words.word_finding`` puts the worded text
    first); the report's findings are worded (``said`` None) and their JSON holds the text.
    """

    rule_id: str
    title: str
    severity: Severity
    evidence: tuple[str, ...]
    phase_share: float | None  # share of the step the fix can remove
    gain_bound: float | None  # at most 1/(1 - phase_share) times faster: the range's high end
    fix: str  # one line: what to change
    source: str = ""  # where the threshold comes from
    line: int | None = None  # line of the cell the finding points at
    fix_id: str | None = None  # gpu_notebook.fixes catalog id
    fix_params: Mapping[str, Any] = field(default_factory=dict)
    proposal: FixProposal | None = None
    # The range's low end (rules.common.gain_range): what the fix gains when it removes only the
    # least of what it removes that the measurement supports (for a phase timed over the run,
    # its share's 90% interval's low end). None: not estimated, the range is 1x to the bound.
    gain_low: float | None = None
    # What a measurement of the fix may read off the model's range by on this machine
    # (``analysis.compare_samples.run_margin``): the range the user reads is widened by it on
    # both sides (``stated_low``, ``stated_high``). 0: not widened (no run to read it from).
    gain_margin: float = 0.0
    # The least the model's bound reads within the 90% interval of the shares it was computed
    # from (the window's steps resampled: ``rules.common.bigger_batch_bound_low``): the
    # small-gain gate judges the bound with its own uncertainty, so a bound at the 5% line does
    # not change class between two runs of the same code (``compare_samples.measurable``).
    # None: no interval (the bound itself is judged).
    bound_low: float | None = None
    # The most the change can physically give, whatever the noise and whatever any share read:
    # a bigger batch xk at most k per sample. The stated high end never exceeds it. None: no
    # such ceiling; a bound that rests on a measured share (removing it: 1 / (1 - share)) is
    # that measurement's, and a quiet ledger read workers at 2.13x over their 2.09x Amdahl
    # bound at the window's share: the margin widens such a bound on both sides.
    gain_ceiling: float | None = None
    said: Said | None = None  # not yet worded (the report's findings are): never in the JSON
    notes: tuple[Said, ...] = ()  # what the rules add to every finding, not yet worded: neither
    # The level another run of this code may read the finding at, where higher than
    # ``severity``: its share's interval's high end widened by what two runs differ by here
    # (``analysis.level_range``). ``severity`` is what this run has shown, and ranks; None: the
    # level read is the only one (read through ``level_range``).
    severity_reach: Severity | None = None

    @property
    def level_range(self) -> tuple[Severity, Severity]:
        """The finding's levels, lowest first: ``severity``, and the level another run may read
        it at (``severity_reach``) where higher. A finding said at info (a small or unsized
        gain, a note) has no range: its level is no share's."""
        reach = self.severity_reach
        if self.severity == "info" or reach is None:
            return self.severity, self.severity
        order = ("info", "low", "medium", "high")
        return self.severity, max(self.severity, reach, key=order.index)

    @property
    def stated_high(self) -> float | None:
        """The range's high end as said: ``gain_bound`` widened by ``gain_margin``, never past
        what the change can physically give (``gain_ceiling``)."""
        if self.gain_bound is None:
            return None
        widened = self.gain_bound * (1.0 + self.gain_margin)
        if self.gain_ceiling is None:
            return widened
        return max(self.gain_bound, min(widened, self.gain_ceiling))

    @property
    def stated_low(self) -> float | None:
        """The range's low end as said: ``gain_low`` narrowed by ``gain_margin`` (None: 1x)."""
        return None if self.gain_low is None else self.gain_low / (1.0 + self.gain_margin)


@dataclass(frozen=True)
class SampleComparison:
    """Two runs' step-time distributions compared (analysis.compare_samples)."""

    # Throughput after / before (> 1: faster), from each run's step figure: the median of its
    # fifths' mean steps, its mean step in a short run (analysis.compare_samples.run_step).
    speedup: float
    low: float  # the range it lies in (seeded block bootstrap, widened by run-to-run spread)
    high: float
    # "undecided": either run's steps waited ``too_busy`` of their time for a core (below).
    outcome: Literal["faster", "no measurable change", "slower", "undecided"]
    before_steps: int
    after_steps: int
    plain_speedup: float  # every step of both runs, whatever the machine's load
    load_before_cores: float | None = None  # other processes' load (cores), median over steps
    load_after_cores: float | None = None
    load_changed: bool = False
    load_matched: bool = False  # the speedup compares steps taken under similar load only
    # When the load changed, what was made of it (the views word it): "matched" (only steps taken
    # under similar load compared, ``similar_steps`` of each run), "same-direction" (the change
    # cannot be told from the load's: no measurable change is claimed), "against" (the change is
    # at least this large).
    load_note: Literal["matched", "same-direction", "against"] | None = None
    similar_steps: tuple[int, int] | None = None
    # Each step counted as its own time: its wall time less its thread's wait for a core
    # (report/compare.measured_samples); False: wall times.
    own_time: bool = False
    # (before, after): each run's compared steps' wait for a core over their wall time, where
    # either waited ``analysis.too_busy.TOO_BUSY_WAIT`` or more and that wait is not all out of
    # the count (torch's other intra-op threads wait too, and the loop thread waits for them):
    # the runs measured the machine more than the code, the outcome is "undecided" whatever
    # the range reads (issue 26, unseen notebook 24: an lr-only change read 0.44x "slower").
    too_busy: tuple[float | None, float | None] | None = None


@dataclass(frozen=True)
class Comparison:
    """This run against the previous comparable one: measured gain beside the predicted bound."""

    baseline_started_at: str
    baseline_step_median_s: float | None
    step_median_s: float | None
    speedup: float | None  # throughput ratio from the mean steady step time (> 1: faster)
    baseline_samples_per_s: float | None
    samples_per_s: float | None
    baseline_phase_share: Mapping[str, float]
    phase_share: Mapping[str, float]
    baseline_gpu_util_pct: float | None
    gpu_util_pct: float | None
    fix_id: str | None = None  # the fix that produced this cell, when known
    predicted_bound: float | None = None  # that fix's gain bound in the baseline report
    predicted_low: float | None = None  # its range's low end (None: 1x)
    # The bound as the baseline's model gave it (``Finding.gain_bound``); ``predicted_bound`` is
    # it widened by that run's margin (``stated_high``), what the measurement is read against.
    # "Predicted" says this one: a widening is no gain promised. None: an older report's.
    predicted_model_bound: float | None = None
    # Its low end as the model gave it (``Finding.gain_low``): what the before/after's "no
    # measurable effect" must leave out, as ``--try-fixes``' (``compare_samples.fix_outcome``).
    # None: an "up to" range, or an older report's (``predicted_low`` is read then).
    predicted_model_low: float | None = None
    gpu_equivalent: float | None = None  # "the throughput of N more GPUs of this kind"
    cost_saved_per_1000_steps: float | None = None  # in the user's currency, when priced
    samples: SampleComparison | None = None  # the distributions compared: range and outcome
    # How each run ended (``Run.status``, ``Run.error``) and the steps it took: a run that failed
    # or was interrupted partway is compared over the steps it took, which the views say.
    baseline_status: CellStatus = "ok"
    baseline_error: str | None = None
    baseline_steps: int | None = None
    status: CellStatus = "ok"
    error: str | None = None
    steps: int | None = None


# What a before/after says of the fix the user ran (report/compare.py decides; words/compare.py
# words them): the comparison's own findings, and a fix run before with no measurable effect.


@dataclass(frozen=True)
class SlowerAfterFix(Said):
    """The fix the user ran made the loop slower: go back to the earlier cell."""

    fix_id: str | None
    baseline_started_at: str
    proposing_title: str  # the finding that proposed the fix, as worded in the earlier report
    speedup: float
    predicted_high: float | None  # the proposing finding's gain bound and its range's low end
    predicted_low: float | None
    # (phase, share before, share after) of each phase that grew by more than 5 points.
    grown: tuple[tuple[str, float, float], ...]


@dataclass(frozen=True)
class NoStepAfter(Said):
    """This run took no step where the earlier one took ``before_steps``: nothing measured."""

    fix_id: str | None  # None: the same cell ran again
    baseline_started_at: str
    before_steps: int


@dataclass(frozen=True)
class FixRunBefore:
    """A fix the user ran earned ``earned`` against its predicted range (``fix_outcome``)."""

    fix_id: str
    speedup: float
    low: float
    high: float
    earned: str
    predicted_high: float | None
    predicted_low: float | None


@dataclass(frozen=True)
class LineStat:
    """Time attributed to one line of the cell by the stack sampler."""

    line: int  # 1-based, the %%gpucheck line is line 1
    text: str
    samples: int
    share: float  # of all samples in the sampled span
    phase_samples: Mapping[str, int] = field(default_factory=dict)
    # None: a line of the cell. Else the file of the user's code the cell called, whose line
    # ``line`` this is (analysis.lines.stack_profile): a file it ran whole (``%run script.py``),
    # a user's module (``from utils import train_epoch``), or another cell (a function defined
    # there: ``other_cell``, ``filename`` its compiled name, ``cell_number`` its execution number
    # when that name holds it, as terminal IPython's "<ipython-input-3-...>" does).
    filename: str | None = None
    other_cell: bool = False
    cell_number: int | None = None


@dataclass(frozen=True)
class FunctionStat:
    """Time attributed to one function (user module, torch Python layer, DataLoader...)."""

    function: str
    filename: str
    first_line: int
    self_samples: int
    total_samples: int


@dataclass(frozen=True)
class StackProfile:
    """What the in-process stack sampler saw of the thread that ran the cell."""

    interval_s: float
    samples: int
    duration_s: float
    lines: tuple[LineStat, ...] = ()
    functions: tuple[FunctionStat, ...] = ()
    collapsed: Mapping[str, int] = field(default_factory=dict)  # "a;b;c" -> samples
    # Lines of the user's code below the cell's deepest frame: files the cell ran whole (``%run
    # script.py``: a module body run under a cell line, from a file outside the installed
    # packages) and functions of other cells or of the user's own files; and the cell lines that
    # ran a file whole (those give way to its lines; a cell line that called a function stays).
    script_lines: tuple[LineStat, ...] = ()
    script_callers: tuple[int, ...] = ()


@dataclass(frozen=True)
class HostOverhead:
    """How the host thread spends a typical traced step: many small operators, Python between.

    Medians over the traced steps. "Operators" are the top-level host ops (``cpu_op`` not nested
    in another), the units Python dispatches one by one.
    """

    ops_per_step: float
    median_op_us: float
    between_ops_share: float  # step time on the host thread outside any operator (Python)
    small_op_share: float  # step time inside operators shorter than the tiny-op threshold
    small_op_us: float  # that threshold
    # The steps' model side (all but the data wait) in operators whose work grows with the batch
    # (analysis.host.model_work_share); None: not read.
    model_work_share: float | None = None
    # The heaviest host matmul/convolution's typical self time a call by call floors (the least
    # of one call's repeats over the steps: load only adds time); None: not read.
    heaviest_matmul_us: float | None = None
    # The most any traced step read of ``between_ops_share + small_op_share`` (each step's own
    # figure, at call floors); None: not read (the median stands alone).
    overhead_share_high: float | None = None
    # The model side's matmul/convolution calls a traced step by their floors (the innermost
    # where one nests another; analysis.host._matmul_floor_us): what compiling the model leaves
    # of its work. None: not read.
    matmul_floor_us: float | None = None
    # The share of the traced steps' wall time the host thread waited for a core (schedstat
    # run_delay at the window's step marks): other processes' load, taken out of the shares
    # above. None: not measured (no Linux schedstat, an older record).
    core_wait_share: float | None = None
    # The part of ``small_op_share`` that runs inside the step's data wait (a TensorDataset's
    # per-sample indexing, collate's stack of small tensors): the loader's, not the model's.
    # None: not read (no phase to place the operators in, an older record).
    data_small_share: float | None = None
    # The time between the model's own operators a traced step (us, each gap at its floor):
    # the forward's Python between operators and the autograd engine's own time between
    # backward nodes (analysis.host._model_floors_us), what a compiled graph surely removes.
    # None: not read (no phase to place the gaps in, an older record).
    model_gaps_us: float | None = None
    # The model's forward and backward a traced step at floors: its top-level operators and
    # the gaps between them, each at its least over the steps (us; the figures above are
    # parts of it, read in the same steps). None: not read.
    model_floor_us: float | None = None
    # This machine's cost of a small operator: the median call floor of the traced steps'
    # top-level operators under ``small_op_us`` (the least of them where none is under it;
    # us). What an operator's call is measured against (analysis.large_elementwise_ops), so a
    # faster or slower CPU reads the same program the same way. None: not read (older record).
    op_floor_us: float | None = None
    # ``op_floor_us`` in the reference machine's small-operator floors (analysis.floor_lines):
    # on a CPU-only run the per-call host lines (``small_op_us``, a compiled graph's own cost)
    # are their reference values times this, and ``small_op_us`` and ``op_floor_us`` read each
    # other. None: a GPU run (its small line is the device's launch gap) or not read (an older
    # record): the reference values stand.
    floor_scale: float | None = None


@dataclass(frozen=True)
class OptimizerTime:
    """One optimizer class's time in the traced steps (``OptimizerSplit``)."""

    cls: str  # the class name the trace gives (``Optimizer.step#<cls>.step``)
    step_us: float  # inside its ``Optimizer.step`` ranges, less other optimizers' inside them
    zero_grad_us: float  # inside its ``Optimizer.zero_grad`` ranges
    step_calls: int


@dataclass(frozen=True)
class OptimizerSplit:
    """The traced steps' optimizer time by optimizer class (analysis.optimizer_split): what the
    step clock times together when a loop steps several optimizers (a GAN's two, SparseAdam
    beside a dense Adam), told apart by the trace's per-optimizer ranges."""

    classes: tuple[OptimizerTime, ...]  # most time first
    steps: int  # traced steps they were read over (``source`` "clock": the steps timed)
    # "trace": the traced steps' ranges (wall time); "clock": each class's steps on the loop
    # thread's CPU clock over the run (``analysis.optimizer_split.clock_split``, no zero_grad).
    source: Literal["trace", "clock"] = "trace"

    def step_part(self, reached: Iterable[str]) -> float | None:
        """The part of the optimizers' ``step`` time that the ``reached`` classes take (the
        step clock's optimizer phase is ``step`` alone). None: none of them in the trace, or no
        step time at all (nothing to split)."""
        return self._part(reached, zero_grad=False)

    def phase_part(self, reached: Iterable[str]) -> float | None:
        """``step_part`` over the trace's optimizer phase, which holds ``zero_grad`` too."""
        return self._part(reached, zero_grad=True)

    def _part(self, reached: Iterable[str], *, zero_grad: bool) -> float | None:
        wanted = set(reached)
        if not any(c.cls in wanted for c in self.classes):
            return None

        def time(c: OptimizerTime) -> float:
            return c.step_us + (c.zero_grad_us if zero_grad else 0.0)

        total = sum(time(c) for c in self.classes)
        if total <= 0:
            return None
        return sum(time(c) for c in self.classes if c.cls in wanted) / total


@dataclass(frozen=True)
class ScalerOps:
    """A GradScaler's own operators in the traced steps (analysis.amp_scaler): the inf/nan check
    that unscales the gradients and the scale update, against the steps' time."""

    calls: int  # aten::_amp_foreach_non_finite_check_and_unscale_ / aten::_amp_update_scale_
    scaler_us: float  # their time: host spans on a CPU run, their kernels' on a GPU one
    steps_us: float  # the traced steps' time
    steps: int  # traced steps
    on_device: bool = False

    @property
    def share(self) -> float:
        return self.scaler_us / self.steps_us if self.steps_us > 0 else 0.0


@dataclass(frozen=True)
class ParamKindOps:
    """One kind of torch's parametrizations in the traced steps (analysis.param_cached): the
    operator each read of a parametrized tensor of that kind calls once, and the backward nodes
    named for it."""

    kind: str  # "weight_norm", "spectral_norm", "orthogonal"
    calls: int  # outermost calls of its operator in the traced steps (one a read)
    forward_us: float  # their host time summed
    backward_us: float  # its named backward nodes' host time summed (0: none named)


@dataclass(frozen=True)
class ParamOps:
    """Parametrizations recomputed in the traced steps: per kind, against the steps, the
    backward calls in them, and the sampled time under ``parametrize``'s property."""

    kinds: tuple[ParamKindOps, ...]
    steps: int  # traced steps
    backwards: int  # backward calls in them (gpucheck::backward ranges)
    steps_us: float  # the traced steps' wall time
    # The share of the sampled time under a parametrized tensor's read (parametrize.py's
    # ``get_parametrized``: the parametrization's forward, its Python in); None: not sampled.
    sampled_share: float | None = None
    samples: int = 0

    def kind(self, name: str) -> ParamKindOps | None:
        return next((k for k in self.kinds if k.kind == name), None)


@dataclass(frozen=True)
class Bf16OpTime:
    """One operator a CPU bfloat16 autocast runs in bfloat16, in the traced steps
    (analysis.cpu_bf16_casts): its time there, and how much slower in bfloat16 than in float32
    it measured on an avx512_bf16 CPU without AMX."""

    name: str  # e.g. aten::mm
    calls: int  # outermost calls in the traced steps
    us: float  # their host time summed
    slowdown: float  # bfloat16 time over float32's (benchmarks/cpu_bf16_op_factors.py)
    floored_us: float = 0.0  # their host time floored over the steps, as the casts' is


@dataclass(frozen=True)
class CpuBf16Casts:
    """A CPU run's dtype casts and matmuls in the traced steps (analysis.cpu_bf16_casts): under a
    bfloat16 autocast each matmul casts its float32 weights and inputs first, and the backward
    casts their gradients back (``aten::to`` -> ``aten::_to_copy`` -> ``aten::copy_``).

    Two readings of the casts' share, each over one clock: summed against the steps' wall time
    (both hold the waits for a core alike), and floored against every operator floored alike
    (both without them); the share is a range between the two."""

    casts: int  # outermost aten::_to_copy calls in the traced steps
    casts_us: float  # their host time floored over the steps (the k-th longest at its least)
    casts_sum_us: float  # their host time summed
    matmuls: int  # outermost aten::mm / addmm / bmm / baddbmm calls beside them
    matmul_us: float  # their host time summed
    steps_us: float  # the traced steps' wall time
    steps: int
    # Every outermost operator of the steps, floored as the casts are (None: not read).
    ops_us: float | None = None
    # The operators the autocast runs in bfloat16 (matmuls, convolutions, activations), each
    # with its measured slowdown; only those with a bfloat16 input where the trace recorded
    # input types (``dtypes_read``).
    bf16_ops: tuple[Bf16OpTime, ...] = ()
    dtypes_read: bool = False

    def _shares(self) -> tuple[float, ...]:
        summed = self.casts_sum_us / self.steps_us if self.steps_us > 0 else 0.0
        floored = (self.casts_us / self.ops_us,) if self.ops_us else ()
        return (summed, *floored)

    @property
    def share(self) -> float:
        """The casts' share of the steps: the lesser reading."""
        return min(self._shares())

    @property
    def share_high(self) -> float:
        """The casts' share of the steps: the greater reading."""
        return max(self._shares())

    @property
    def matmul_share(self) -> float:
        """The matmuls' share of the steps' wall time (summed over summed)."""
        return self.matmul_us / self.steps_us if self.steps_us > 0 else 0.0

    @property
    def bf16_share(self) -> float:
        """The bfloat16 operators' share of the steps' wall time (summed over summed)."""
        us = sum(op.us for op in self.bf16_ops)
        return us / self.steps_us if self.steps_us > 0 else 0.0

    @property
    def slower_share(self) -> float:
        """The share of the steps float32 saves on the bfloat16 operators: each one's time
        less its time at float32's speed (its time over its slowdown), over the steps' wall
        time (summed over summed)."""
        return self._saved(summed=True) / self.steps_us if self.steps_us > 0 else 0.0

    @property
    def top_share(self) -> float:
        """The most of the steps float32 saves, read on each clock as the casts are: the casts
        and what the bfloat16 operators lose, summed against the wall time, or floored against
        every operator floored alike; the greater reading."""
        readings = [self.casts_sum_us / self.steps_us + self.slower_share] if self.steps_us else []
        if self.ops_us:
            readings.append((self.casts_us + self._saved(summed=False)) / self.ops_us)
        return min(1.0, max(readings, default=0.0))

    def _saved(self, *, summed: bool) -> float:
        return sum(
            (op.us if summed else op.floored_us) * (1.0 - 1.0 / op.slowdown)
            for op in self.bf16_ops
            if op.slowdown > 1
        )


@dataclass(frozen=True)
class Recompute:
    """Activation checkpointing's recomputed forward inside the traced steps' backward
    (analysis.recompute): its operators, and their time against the steps' own."""

    ops: int  # recomputed operators found (top-level ones of each recompute)
    recompute_us: float  # their time: host spans on a CPU run, their kernels' on a GPU one
    steps_us: float  # the traced steps' time
    reentrant_nodes: int  # CheckpointFunctionBackward nodes (use_reentrant=True) among them
    steps: int  # the traced steps it read (a later window's steps are not in its trace)
    on_device: bool = False  # timed by the device kernels they launched
    # The checkpoint's own host time, which turning it off removes with the recompute: around
    # each checkpointed block's forward (its wrapper: RNG state, saved inputs, the autograd
    # Function or the saved-tensor hooks) and in the backward node beside the recompute (RNG
    # restored, inputs detached, the nested backward's call). None: not read (a trace with
    # device activity, timed by kernels, which the wrapper launches none of).
    forward_overhead_us: float | None = None
    backward_overhead_us: float | None = None
    forward_blocks: int = 0  # checkpointed blocks whose forward was found in the traced steps
    # The host times above are each piece's least over the traced steps, times the steps
    # (``analysis.recompute._floor_us``), not their sum: a time slice lost to another process
    # is not the checkpoint's. False: summed (one step, or steps that did not repeat).
    floored: bool = False
    # Non-reentrant: the checkpoint's pack hook inside each forward operator that saves a tensor
    # (Python called by autograd per saved tensor, inside that operator's record: no record of
    # its own), read as its unpack hook's time in the backward, the same kind of call per saved
    # tensor (``analysis.recompute``). None: not read (reentrant: its forward saves nothing).
    pack_us: float | None = None
    # The traced steps' time had they run as the run's unprofiled steps did (their median own
    # time, times the traced steps; ``analysis.analyze``). The profiler's cost per operator
    # record lifts the many small operators around the checkpoint (the optimizer's per
    # parameter, AccumulateGrad) more than the checkpoint's own cost, mostly Python it does not
    # record; the gain is measured on unprofiled steps. None: not read (a device run, or too few
    # unprofiled steps).
    unprofiled_steps_us: float | None = None
    # The traced steps' time floored as the checkpoint's pieces are (each top-level operator and
    # gap of the loop thread at its least over the steps, times the steps): a piece's least
    # leaves out what sharing the cores slowed between the slices, which the steps' own time
    # keeps; the shares compare like with like (``analysis.recompute``). None: not read (one
    # step, steps that do not repeat, a device run).
    floor_steps_us: float | None = None

    @property
    def overhead_us(self) -> float:
        return (
            (self.forward_overhead_us or 0.0)
            + (self.backward_overhead_us or 0.0)
            + (self.pack_us or 0.0)
        )

    @property
    def base_us(self) -> float:
        """The steps' time the shares are of: the unprofiled steps' where read and shorter (the
        profiler only adds time), else the traced steps' own; in the floors' terms where the
        whole step was floored too (``floor_steps_us``: the traced steps' own time is to it as
        the base is to its floored self)."""
        unprofiled = self.unprofiled_steps_us
        read = self.recompute_us + self.overhead_us
        # Shorter than what the trace read of the checkpoint: not these steps' (another shape).
        base = self.steps_us
        if unprofiled is not None and read < unprofiled < self.steps_us:
            base = unprofiled
        return base * self.floor_ratio

    @property
    def unprofiled_base(self) -> bool:
        """The shares are of the unprofiled steps (``unprofiled_steps_us``), not the traced."""
        unprofiled = self.unprofiled_steps_us
        read = self.recompute_us + self.overhead_us
        return unprofiled is not None and read < unprofiled < self.steps_us

    @property
    def floor_ratio(self) -> float:
        """What flooring the whole step as the pieces are leaves of it (1: not floored): one
        ratio for every base, so each is in the pieces' terms (``base_us``,
        ``traced_base_us``)."""
        floor = self.floor_steps_us
        read = self.recompute_us + self.overhead_us
        if floor is None or not self.floored or not read < floor < self.steps_us:
            return 1.0
        base = self.unprofiled_steps_us if self.unprofiled_base else self.steps_us
        assert base is not None
        return floor / self.steps_us if base * floor / self.steps_us > read else 1.0

    @property
    def traced_base_us(self) -> float:
        """The traced steps' own time in the same terms as ``base_us`` (floored where it is):
        the longer base, which the least gain reads (the recompute alone over it)."""
        return self.steps_us * self.floor_ratio

    @property
    def recompute_share(self) -> float:
        return self.recompute_us / self.base_us if self.base_us > 0 else 0.0

    @property
    def overhead_share(self) -> float:
        return self.overhead_us / self.base_us if self.base_us > 0 else 0.0

    @property
    def share(self) -> float:
        """What turning checkpointing off removes: the recompute and the checkpoint's own cost."""
        return self.recompute_share + self.overhead_share


@dataclass(frozen=True)
class RunSegment:
    """A stretch of consecutive steps of the run (a tenth of it, or a profiler window's steps)."""

    first_step: int
    last_step: int  # inclusive
    median_s: float
    total_s: float  # step time these steps stand for (decimated steps counted)


@dataclass(frozen=True)
class StallPattern:
    """Steps far above the run's median: when, how long, what ran in them, what they cost."""

    steps: tuple[int, ...]  # indices of the stalled steps (at most 64 kept)
    count: int
    period_steps: int | None  # every N steps, when they recur regularly
    median_stall_s: float
    excess_s: float  # time above the median step in the stalled steps
    share: float  # of the run's step time
    phase: str | None  # where their extra time went (hook timings), None: not timed
    phase_share: float | None = None  # of their extra time


@dataclass(frozen=True)
class StartUpBursts:
    """A loader's start-ups read from the steps (analysis.loader_starts): at each start (an
    iterator's first batch, ``StepClockRecord.loader_starts``) the first ``burst_steps`` steps
    (one first batch a worker) against the same loader's steady steps after them. The machine's
    stalls elsewhere in the epoch are not the start-up's; a burst step's time over its loader's
    median steady step is."""

    starts: int  # loader starts read (each with steady steps after it)
    burst_steps: int  # steps of each start's burst
    excess_s: float  # the bursts' time over their loader's median steady step, summed
    share: float  # of the run's step time
    # The 90% interval (seeded bootstrap over the starts): low end of ``share``, high end of
    # ``reach_share`` (the bursts with the slower steps after them, ``_with_tail``).
    share_low: float
    share_high: float
    steady_median_s: float  # the loaders' median steady step (median over the starts)
    steady_steps: int
    # The steady steps' data wait (the bursts left out): its share of their time with the
    # share's 90% interval (seeded bootstrap over the steps), and the median step's wait as
    # read and less the step's wait for a core (the least it can be: the too-busy reading).
    steady_data_share: float | None = None
    steady_data_share_low: float | None = None
    steady_data_share_high: float | None = None
    steady_data_s: float | None = None
    steady_data_least_s: float | None = None
    # The bursts and the steps after them in the first half of each loader's pass, over the
    # second half's median step (those steps less their wait for a core: the machine's): what
    # the start-up costs with its tail, of the run's step time.
    reach_share: float | None = None
    # The bursts' excess outside their data wait (making the iterator forks the workers: the
    # step's "other"), of the run's step time: what the run's data share does not hold of the
    # start-ups. None: a step of a start did not time its data wait.
    outside_data_share: float | None = None
    # The bursts' share with every step less its wait for a core (the clock a trial compares
    # on where the fix keeps the process count): ``share_low``/``share_high`` span both clocks.
    # None: no step's wait for a core was read (the clocks are one).
    ran_share: float | None = None


@dataclass(frozen=True)
class PeriodicCost:
    """Work that runs every ``period`` steps read from the step clock alone: the steps on its
    schedule against the others of the same run, a natural A/B (analysis.run_trend.periodic_cost).
    ``share`` = (on - off) x ``on_steps`` / the steps' total time; no sampler behind it."""

    period: int
    phase: int  # step index mod period of the steps that ran it
    on_steps: int  # steps on the schedule (weighted by the clock's decimation)
    off_steps: int
    on_median_s: float
    off_median_s: float
    share: float  # of the run's step time
    total_s: float
    own_time: bool = False  # the steps' own time (each less its wait for a core) throughout


@dataclass(frozen=True)
class OwnTime:
    """The steps less the time their thread waited for a core, read step by step (the step
    clock's schedstat reading at each step end): the part of each step the machine did not
    take. Drift and stalls are judged on it when every step read carries its wait."""

    median_s: float
    first_median_s: float  # the first fifth of the run
    last_median_s: float  # the last fifth
    drift: float | None  # last fifth's median over the first's (None: first is 0)
    drift_low: float | None  # its seeded bootstrap range's low end (analysis.compare_samples)
    stalls: StallPattern | None  # steps over STALL_FACTOR x the median own time, their excess
    wait_share: float  # share of the steps' time the thread waited for a core
    # The thread's time on a core, last fifth's median over the first's (None: not read on
    # every step): own time that grew while this did not is time off a core (blocked).
    cpu_drift: float | None = None
    # The own time's work in a pool of threads that wait for a core as this one does, last
    # fifth's median over the first's: each step's own time times the share of it not waited
    # (``own**2 / wall``). The loop thread, done with its part of a parallel region, waits for
    # the pool's preempted threads (asleep or spinning on a core), so its own time is the work
    # over ``1 - w`` where the pool waits ``w`` of its time (rules/run_shape.py reads it only
    # for a pool that wants more threads than the free cores).
    pool_drift: float | None = None
    # The steps no other process delayed (their wait for a core under ``QUIET_WAIT_SHARE`` of
    # them), last fifth's median over the first's; None: fewer than ``QUIET_STEPS`` such steps
    # at either end. Their own time is the code's pace, the pool's waits included in none.
    quiet_drift: float | None = None
    # Every step carried its wait (read at each step end); False: only the slow ones did (steps
    # too short to read at each end, read after any step over the clock's read level), and the
    # others count their wall time.
    every_step: bool = True


@dataclass(frozen=True)
class MemoryTrend:
    """A straight-line fit of memory against the step index (least squares)."""

    kind: Literal["rss", "gpu"]
    first_step: int
    last_step: int
    start_bytes: int
    end_bytes: int
    bytes_per_step: float
    r2: float  # how straight the growth is (1: a perfect line)
    capacity_bytes: int | None = None  # the card (gpu) or the machine (rss), when known
    full_at_step: int | None = None  # where the line reaches the capacity
    # The same fit over the later half of the fitted steps alone: a leak keeps its rate there;
    # growth that stops (caches, the allocator meeting bigger batches) has little left. None
    # when that half holds too few readings to fit.
    late_bytes_per_step: float | None = None
    # The growth between readings whose steps brought no new largest batch, per step: a leak
    # grows there at its rate; the allocator meeting bigger batches does not. None when the
    # batches were not sized, or such stretches hold under half of the fitted steps.
    between_highs_bytes_per_step: float | None = None
    # The growth per step over the run's last epoch, its first readings to its last (where the
    # fit crosses an epoch start and that epoch holds readings enough; None otherwise): a leak
    # grows there at its rate, growth that slows each epoch has little left.
    last_epoch_bytes_per_step: float | None = None


@dataclass(frozen=True)
class RunShape:
    """The whole run from the step clock: drift, jitter, stalls, memory, and the window's place."""

    steps: int  # steps in the analysis (after the warm-up; decimated steps weigh more)
    total_s: float
    median_s: float
    p90_s: float
    # p90 / median of each step's time over its own kind of work's median (analysis.work_spread:
    # a run of one work, the plain p90 / median; 1.0 when no kind has steps enough to read)
    jitter: float
    first_median_s: float  # the first fifth of the run
    last_median_s: float  # the last fifth
    slope_s_per_step: float  # least-squares slope of step time (stalls left out)
    segments: tuple[RunSegment, ...] = ()
    windows: tuple[RunSegment, ...] = ()  # the profiled steps, each window
    window_median_s: float | None = None
    window_covers: float | None = None  # share of the run's time in steps like the window's
    represents: bool | None = None  # None: no window
    # The window's neighbours read unlike the run, their fastest like it: the window represents
    # the run within the machine's noise (analysis.run_trend), the verdict says so.
    window_noisy: bool = False
    # ... and the share of the later half's stretches of as many steps that ran at the
    # neighbours' pace, where that recurrence (not their fastest step) was what told it
    # (analysis.run_trend: a busy machine's slower stretches show no wait for a core).
    window_noisy_recurs: float | None = None
    # The window was compared with the run on the steps' own time (each less its wait for a
    # core): ``window_median_s`` and ``window_covers`` are own time, set against ``own.median_s``.
    window_own_time: bool = False
    # The host ran ahead of the GPU in the window: ``window_median_s`` is the GPU's time for the
    # window's steps (analysis.analyze), not the host's.
    window_gpu_paced: bool = False
    # The window's host steps read unlike the run, and the GPU's pace for them, which would
    # decide it, is only bounded below (a partial GPU timeline whose unclocked work may have run
    # past the clocked work's end): whether the window represents the run is not known
    # (``represents`` None).
    window_undecided: bool = False
    stalls: StallPattern | None = None
    memory: tuple[MemoryTrend, ...] = ()
    # The kinds of work (model calls, a closure's calls, loader reads, batch size) the jitter
    # and ``above_median_share`` were read within; 0: none had steps enough (no jitter read).
    work_kinds: int = 1
    # Steps that ran while other processes were busier than the run's quiet level
    # (analysis.interference): left out of median, jitter, drift and stalls, named apart.
    busy_steps: int = 0
    busy_slowdown: float | None = None  # their median step over the quiet steps' median
    busy_load_cores: float | None = None  # other processes' load during them (cores)
    quiet_load_cores: float | None = None  # and during the rest of the run
    # Stalls among those busy steps (in ``stalls`` too: a periodic block of the cell keeps
    # them the code's; else they are the machine's), and their time
    # above the median step as a share of the run's step time.
    busy_stalls: int = 0
    busy_stall_share: float | None = None
    quiet_stalls: StallPattern | None = None  # the stalls outside those steps (None: fewer than 2)
    run_wait_share: float | None = None  # median share of a step the thread waited for a core
    # The same over the stalled steps (the readings they fall in): stalls that crowd into the
    # busy part of a run are read against that part's wait, not the quiet part's.
    stall_wait_share: float | None = None
    own_drift: float | None = None  # last/first fifth over the most the wait per fifth explains
    own: OwnTime | None = None  # the steps less their per-step wait (None: not read every step)
    # The low end of the last fifth's slowdown over the first (a seeded block-bootstrap range,
    # analysis.compare_samples): a drift is measured only when it is above 1.
    drift_low: float | None = None
    drift: float | None = None  # last fifth's median step over the first's (None: first is 0)
    # The run's time above the first fifth's pace (had every step kept it), and above the
    # median step of its own kind of work (had every step taken it; ``work_kinds``; None: no
    # kind read): the shares a drift and a jitter stand for.
    drift_share: float | None = None
    above_median_share: float | None = None
    # The hook-timed phase that grew most from the first fifth to the last: (phase, its
    # median in the first fifth, in the last); None when none grew or too few steps were timed.
    grown_phase: tuple[str, float, float] | None = None

    @property
    def window_run_median_s(self) -> float:
        """The run's median step on the clock the window was compared with it."""
        return self.own.median_s if self.window_own_time and self.own is not None else self.median_s


@dataclass(frozen=True)
class SpanLine:
    """One cell line the edge sampler caught in a span outside the steps (``CellTime``)."""

    line: int
    text: str
    share: float  # of the span's sampled time (inclusive: a call line holds its callee's)
    samples: int


@dataclass(frozen=True)
class CellTime:
    """Where the cell's wall time went: before the first step, the steps, after the last
    (``analysis.cell_time``: the step clock's first start and last end)."""

    wall_s: float
    before_s: float  # the cell's start to the first step's start
    steps_s: float  # the first step's start to the last one's end
    after_s: float  # the last step's end to the cell's end
    steps: int
    before_lines: tuple[SpanLine, ...] = ()  # the most sampled cell lines, most first
    after_lines: tuple[SpanLine, ...] = ()
    before_samples: int = 0  # the edge sampler's samples in each span (0: none caught it)
    after_samples: int = 0
    # Of after_s, about the time IPython took to show the cell's exception (its traceback is
    # formatted inside the cell's run): not the cell's code (the span's sampled share).
    after_error_s: float = 0.0

    @property
    def outside_s(self) -> float:
        return self.before_s + self.after_s

    def share(self, seconds: float) -> float:
        """``seconds`` as a share of the cell's wall time."""
        return seconds / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class RunPhase:
    """One phase over the run as the step clock timed it (``analysis.steps.run_phase``)."""

    share: float  # of the steps' time (our own work taken out)
    steps: int  # the steps it rests on
    phase_s: float  # mean a step
    step_s: float  # mean step
    # The share's 90% interval (a seeded block bootstrap over the same steps, read off by order
    # statistics: ``analysis.steps.share_interval``): a fix's gain range starts at what removing
    # ``low_share`` gives (``rules.common.gain_range``).
    low_share: float = 0.0
    high_share: float = 0.0
    # The steps' wait for a core over their time (schedstat, 0: none read), and the phase's share
    # with that wait left where it fell (spread over the phases as their wall times hold it).
    wait_share: float = 0.0
    wall_share: float | None = None
    # The least and the most the share reads over each fifth of the same steps, in order: what a
    # load that changed over the run moved it by (None: no own time in a fifth).
    fifths_low: float | None = None
    fifths_high: float | None = None
    # The optimizer on the CPU: the optimizers' own steps on the loop thread's CPU clock (the
    # step clock's ``optimizer_cpu``, a step) over the same steps' own time (wall less the
    # thread's wait for a core, schedstat), with its 90% interval; None: not so read (a GPU,
    # the data phase, too few steps with a wait read). The update is the loop thread computing:
    # its CPU time is its own time whatever the load, where the wait spread over the phases
    # by their excess is not (save_every_step at load 25: 4.6% that way, 21% this way).
    cpu_share: float | None = None
    cpu_low_share: float | None = None
    cpu_high_share: float | None = None
    cpu_fifths_low: float | None = None  # the least and the most it reads over each fifth
    cpu_fifths_high: float | None = None


@dataclass(frozen=True)
class MachineFacts:
    """Interference over one run (``analysis.machine.machine_facts``)."""

    cores: int  # cores this process may use
    others_median_cores: float | None  # other processes' load, cores
    others_p90_cores: float | None
    steal_pct: float | None  # mean hypervisor steal over the cores
    gpu_other_processes: int | None  # the most other compute processes seen on a GPU
    torch_threads: int | None
    workers: int  # the most child processes seen (DataLoader workers)
    ours_median_cores: float | None  # this process and its children, cores
    # The same medians over the ticks inside the steps (not the imports and set-up before
    # them): ``UtilizationStats.in_steps``' ``ours_cores``, ``others_cores`` and ``run_wait``,
    # where enough ticks fell there (``InSteps.read``; None otherwise): this process and its
    # children, the others (cores), and the share of a sampling interval the loop's thread
    # waited for a core (schedstat; None: not read).
    loop_ours_cores: float | None = None
    loop_others_cores: float | None = None
    loop_run_wait: float | None = None
    # This process's own threads while the steady steps ran, from the step clock's spaced CPU
    # readings (``StepClockRecord.process_cpu``): exact however short the loop. None: not read.
    loop_process_cores: float | None = None

    @property
    def threads_wanted(self) -> int | None:
        """Runnable threads this process asks for: torch's intra-op pool plus its workers."""
        if self.torch_threads is None:
            return None
        return self.torch_threads + self.workers

    @property
    def session_cores(self) -> float | None:
        """The CPU this process's session can count on (cores): the cores the others leave,
        or, where its thread waited for a core, the rate that thread got while it could run
        (``ours / (ours + wait)``), whichever is more, while the steps ran. Linux shares the cores between sessions
        (autogroup) before threads, so worker processes forked from this one share it rather
        than add to it. None: not sampled."""
        if self.loop_ours_cores is None or self.loop_others_cores is None:
            return None
        left = max(0.0, self.cores - self.loop_others_cores)
        ours, wait = self.loop_ours_cores, self.loop_run_wait or 0.0
        got = ours / (ours + wait) if ours + wait > 0 else 0.0
        return min(float(self.cores), max(left, got))

    @property
    def free_cores(self) -> float:
        """Cores left for us by the others (their median load), at least 1."""
        return max(1.0, self.cores - (self.others_median_cores or 0.0))


@dataclass(frozen=True)
class LoopPython:
    """The loop body's own host work before each traced step's model (analysis.python_work):
    Python between operators and operators outside the model, the batch's wait left out."""

    outside_us: tuple[float, ...]  # each traced step's (that holds a model), every window's
    step_us: tuple[float, ...]  # the same steps' durations
    wait_us: tuple[float, ...] = ()  # the same steps' waits for a core (empty: not read)

    def _waits(self) -> tuple[float, ...]:
        return (
            self.wait_us if len(self.wait_us) == len(self.step_us) else (0.0,) * len(self.step_us)
        )

    def _own(self) -> list[tuple[float, float, float]]:
        return [(o, d - w, w) for o, d, w in zip(self.outside_us, self.step_us, self._waits(),
                strict=True) if d - w > 0]  # fmt: skip

    @property
    def steps(self) -> int:
        return len(self._own())

    @property
    def share(self) -> float:
        """Of the steps' own time (their waits for a core out), all steps together, the wait
        taken out of this time in proportion to its share of the step."""
        own = self._own()
        total = sum(d for _, d, _ in own)
        return sum(o * d / (d + w) for o, d, w in own) / total if total > 0 else 0.0

    @property
    def low_share(self) -> float:
        """The lower quartile of the steps' shares, each as if its whole wait fell here."""
        return _quartile([max(0.0, o - w) / d for o, d, w in self._own()], 0.25)

    @property
    def high_share(self) -> float:
        """The upper quartile of the steps' shares, each as if none of its wait fell here."""
        return _quartile([min(1.0, o / d) for o, d, _ in self._own()], 0.75)


def _quartile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    below = int(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


@dataclass(frozen=True)
class SideThread:
    """A thread of the measured process besides the loop's that held a core while the steps ran
    (``analysis.own_threads_spin``)."""

    name: str
    function: str  # where it stood most: its target's qualname, file and line
    file: str
    line: int
    cpu_s: float  # its time on a core over ``span_s`` of the steps
    span_s: float

    @property
    def cores(self) -> float:
        return self.cpu_s / self.span_s if self.span_s > 0 else 0.0


@dataclass(frozen=True)
class SideThreads:
    """The process's own threads on a core beside the loop while the steps ran, and what of the
    loop thread's wait for a core they account for (``analysis.own_threads_spin``)."""

    threads: tuple[SideThread, ...]  # busiest first
    loop_cores: float | None  # the loop thread's own time on a core over the steps' wall time
    others_cores: float | None  # other processes' cores while the steps ran (the sampler's)
    wait_share: float | None  # the loop thread's wait for a core over the steps' wall time
    # The share of that wait the threads account for: their cores over theirs and the other
    # processes' (the runnable work the loop thread queued behind), or where more, the part of
    # the step the loop would not need with their cores added to its own, over the wait.
    held: float
    # At most how much faster the steps run without the threads: the larger of each step its
    # own time on a core plus the part of its wait the other processes account for (the time
    # off a core, the GIL's wait among it, all given back), and the loop thread's rate with the
    # threads' cores added (at most one core). None: the steps' clocks not read.
    bound: float | None = None

    @property
    def cores(self) -> float:
        return sum(t.cores for t in self.threads)


@dataclass(frozen=True)
class Analysis:
    """All figures computed from one Run."""

    step_stats: StepStats
    phases: PhaseBreakdown | None
    gpu: GpuTimeline | None
    utilization: UtilizationStats
    top_ops: tuple[OpStat, ...] = ()
    stacks: StackProfile | None = None  # line-level attribution, when sampled
    host: HostOverhead | None = None  # per-step host activity, from the trace
    shape: RunShape | None = None  # the whole run: drift, jitter, stalls, memory, window's place
    # The profiled windows' own phase split, when ``phases`` holds the whole-run estimate.
    window_phases: PhaseBreakdown | None = None
    # The data wait and the optimizer step over the run, outside the profiled windows (the
    # step clock's timed steps); None where not timed over enough steps.
    run_data: RunPhase | None = None
    run_optimizer: RunPhase | None = None
    # The step clock's forward span over the run (from the data's end to the backward: the
    # model's forward and what the loop does before it, a host-to-device copy among them);
    # None where not timed over enough steps (lean steps, no backward).
    run_forward: RunPhase | None = None
    machine: MachineFacts | None = None  # the rest of the machine over the run (the sampler's)
    # How much longer a profiled step took than an unprofiled one (analysis.own_cost); None
    # without unprofiled steps or when they were no faster.
    profiling_factor: float | None = None
    # What two runs of this code may differ by on this machine, read from this run
    # (``compare_samples.run_margin``); None where the run has too few steady steps.
    run_margin: float | None = None
    # Activation checkpointing's recomputed forward in the traced steps (None: not read).
    recompute: Recompute | None = None
    # A GradScaler's own operators in the traced steps (None: not read).
    scaler: ScalerOps | None = None
    # A CPU run's casts and matmuls in the traced steps (None: no trace, or a GPU trace).
    cpu_casts: CpuBf16Casts | None = None
    # The traced steps' optimizer time by optimizer class (None: no trace, or no optimizer
    # range in its steps).
    optimizers: OptimizerSplit | None = None
    # Work the cell schedules every N steps (logging_steps=N, log_every_n_steps=N) read from
    # the step clock alone, one per period whose steps are slower (analysis.run_trend).
    periodic: tuple[PeriodicCost, ...] = ()
    # The cell's wall time before the first step and after the last (None: no step counted).
    cell_time: CellTime | None = None
    # The loop body's own host work before each traced step's model (None: no trace, or no
    # traced step holds a model).
    loop_python: LoopPython | None = None
    # Parametrized tensors read in the traced steps (None: no trace, or none read).
    param_ops: ParamOps | None = None
    # The process's own threads on a core beside the loop while the steps ran (None: none read).
    side_threads: SideThreads | None = None


@dataclass(frozen=True)
class ScalingPoint:
    """Predicted data-parallel (DDP) step on ``gpus`` GPUs of this kind."""

    gpus: int
    allreduce_s: float  # ring all-reduce of all gradients, per step
    exposed_comm_s: float  # the part not hidden behind backward
    step_s: float
    speedup: float  # throughput vs the job as it runs now (one GPU, or WhatIf.world_size GPUs)
    efficiency: float  # speedup / (gpus / world_size)
    speedup_with_fixes: float | None  # throughput vs the job today, with the fixes applied
    cost_per_1000_steps: float | None = None  # N GPUs x step time x price, when priced
    # ``speedup`` with all N ranks on this host, sharing its cores: each rank keeps the cores the
    # measured process kept busy (``WhatIf.rank_cores``); None where that was not measured.
    speedup_this_host: float | None = None
    # On a partial GPU timeline (backward's GPU time a lower bound): the speedup at backward's
    # clocked time (``speedup``) and at the most it can be; None: measured, ``speedup`` stands.
    speedup_low: float | None = None
    speedup_high: float | None = None


@dataclass(frozen=True)
class Interconnect:
    """The link one GPU's ring all-reduce runs over: NVML's NVLink links or PCIe link, or the bus
    bandwidth measured in a multi-rank trace of the same job."""

    kind: Literal["nvlink", "pcie", "measured"]
    bytes_per_s: float  # nominal per direction (nvlink, pcie), or the measured bus bandwidth
    nvlink_links: int | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None


# What the what-if could not know; no guess is made for it (views/wording says each in words).
WhatIfMissing = Literal[
    "no-step",  # no step was measured
    "world-size-unknown",  # NCCL communication in the trace, no world size recorded
    "link-not-recorded",  # a trace file: how its GPUs are linked is not in it
    "no-gpu",  # no GPU visible here
    "no-link-from-nvml",  # NVML reports neither NVLink links nor the PCIe link
    "grad-size-unknown-trace",  # a trace file with no all-reduce to size the gradients
    "grad-size-unknown-run",  # no optimizer or model parameters were seen
    "step-shorter-than-allreduce",  # the model's exposed all-reduce at world_size exceeds the step
]


@dataclass(frozen=True)
class WhatIf:
    """Fixes versus more GPUs, side by side: the model's figures and the facts its assumptions
    depend on (the views write the assumptions out)."""

    step_s: float | None  # one rank's step, as measured (one GPU, or one rank of world_size)
    fixes_speedup: float | None  # at most, applying the fixes for the measured waste phases
    fixed_phases: tuple[str, ...]  # which phases those fixes remove
    grad_bytes: int | None
    interconnect: Interconnect | None
    bus_bandwidth_bytes_per_s: float | None  # what the ring all-reduce is assumed to reach
    points: tuple[ScalingPoint, ...] = ()
    missing: tuple[WhatIfMissing, ...] = ()
    price_per_gpu_hour: float | None = None
    # GPUs the measured job already ran on: 1 for one GPU; >1 for one rank of a data-parallel
    # trace (speedups are then relative to that job); None: distributed, size not recorded.
    world_size: int | None = 1
    replicas: bool = False  # inference: each added GPU is a replica, nothing is exchanged
    grads_measured: bool = False  # grad_bytes are the all-reduce message sizes of the trace
    # The measured bus bandwidth is the best of the clocked all-reduce kernels only (a partial
    # timeline left others unclocked): a lower bound; the points' ``speedup_high`` reach past it.
    bus_low: bool = False
    # The model's exposed all-reduce at world_size, when it exceeds the step ("step-shorter-...").
    exposed_now_s: float | None = None
    # Cores this process and its workers would keep busy on a quiet host while the steps run
    # (``InSteps.quiet_cores``), and the host's cores: N ranks on this host need N x rank_cores.
    rank_cores: float | None = None
    host_cores: int | None = None
    # What that rests on: the cores they kept busy (median of the sampler's ticks inside the
    # steps) and the steps' wait for a core (None: not read).
    rank_busy_cores: float | None = None
    rank_wait_share: float | None = None


# What limits a step estimated on a GPU: the data wait, the host (Python between ops, dispatch
# and launch), the GPU's kernels, or the loop's own time off a core (a sleep, I/O, a lock).
EstimateLimit = Literal["data", "host", "compute", "off_core"]


@dataclass(frozen=True)
class GpuEstimate:
    """One step of a loop measured without a GPU, estimated on a named GPU (analysis.gpu_estimate)."""

    key: str  # table key: "a100"
    gpu: str  # "NVIDIA A100-SXM4-80GB"
    measured_step_s: float  # mean profiled step on this machine
    step_s: float  # estimated step on that GPU
    speedup: float  # measured_step_s / step_s
    limited_by: str  # what limits the step, worded from ``limits`` (words.gpu_estimate)
    data_s: float  # data wait a GPU does not remove
    host_s: float  # Python between ops + dispatch and launch of every op, per step
    device_s: float  # estimated kernel time per step
    kernels_per_step: float
    flops_per_step: float | None  # from recorded shapes; None: sized from CPU time
    overlapped: bool  # host and GPU work overlap (no per-step read of device values)
    # The facts the estimate's assumptions depend on (the views write them out; the card's
    # datasheet figures are analysis.gpu_estimate.GPUS[key]).
    precision: str = "fp32"  # the matmul precision the peak is read at: fp32, tf32, bf16
    peak_tflops: float = 0.0  # that peak
    reads_per_step: float = 0.0  # reads of device values a step (.item(): host and GPU take turns)
    # Of them, the cell's reads under a test for CUDA, which the CPU run skipped (not traced).
    skipped_reads_per_step: float = 0.0
    # Of them, the cell's per-step ``.cpu()``/``.numpy()``/``.tolist()`` reads: on the CPU they
    # copy nothing and record no operator, so only the source counts them.
    untraced_reads_per_step: float = 0.0
    cores: int = 1  # CPU cores that sized the operators' work when no shapes were recorded
    cores_assumed: bool = False  # a trace file does not say its machine's cores: 1 assumed
    # Per step, the part the loop thread spent off a core and not waiting for one (a sleep, I/O,
    # a lock; schedstat over the run), in measured seconds: a GPU shortens none of it, so the
    # estimated step is never shorter. None: not read.
    off_core_s: float | None = None
    # What limits the estimated step, not yet worded (the report's estimate is, into
    # ``limited_by``): never in the JSON.
    limits: EstimateLimit | None = None


# `gpucheck run --try-fixes` measures each offered fix (gpu_notebook.tryfix).
@dataclass(frozen=True)
class TrialSaid:
    """What the trials say, before it is worded (``tryfix/said.py`` holds one subclass per
    message; ``views/tryfix_text`` words them). Never in the JSON: it holds the worded text."""


# Where a trial's margin comes from: what its runs of the script as it is differ by, or the
# profiled run's (``tryfix.base_margin``).
TrialMarginSource = Literal["base runs", "profiled run"]

FixTrialVerdict = Literal[
    "verified",
    "no measurable effect",
    "slower",
    "undecided",
    # Undecided, and the model's high end is within what this trial's runs of the script
    # differed by (``tryfix.trials.too_small_here``): no gain the fix can give is told from none
    # here; said with both numbers, never recommended.
    "too small to measure",
    "broke the script",
    "skipped",
    "not measured",
]
# The verdict a trial too small for its own runs' spread is given (``tryfix.trials``).
TOO_SMALL_TO_MEASURE: FixTrialVerdict = "too small to measure"


@dataclass(frozen=True)
class FixTrial:
    """One offered fix run against the script as it is, in interleaved runs."""

    fix_id: str
    rule_id: str
    title: str
    predicted_bound: float | None  # the finding's range's high end ("up to")
    verdict: FixTrialVerdict
    recommended: bool  # only a verified fix keeps "recommended"
    # The median of the rounds' ratios (each the baseline run's mean step / the fix run's):
    # one disturbed round does not move it (tryfix.samples.median_of_rounds).
    speedup: float | None = None
    speedup_low: float | None = None  # the median's interval, run-to-run margin included
    speedup_high: float | None = None
    per_round: tuple[float, ...] = ()
    # Per run, warm-up left out, as compared: own times where ``own_time`` (below).
    baseline_steps_s: tuple[tuple[float, ...], ...] = ()
    variant_steps_s: tuple[tuple[float, ...], ...] = ()
    error_lines: tuple[str, ...] = ()  # a broken variant's error, first lines
    note: str = ""  # ``said`` worded (views/tryfix_text.word_trials), joined by "; "
    predicted_low: float | None = None  # the range's low end (None: 1x)
    # The two ends above are the finding's stated range: its model's, widened on each side by
    # this margin, the high end no further than a physical ceiling. A measured trial's margin is
    # what its runs of the script as it is differed by (``margin_source`` "base runs",
    # ``margin_runs`` of them: ``tryfix.base_margin``), its planned look's interval widened by
    # it too; else the profiled run's (``Finding.gain_margin``: too few base runs, a fix not
    # measured, an older report).
    predicted_margin: float = 0.0
    margin_source: TrialMarginSource = "profiled run"
    margin_runs: int = 0  # the script's runs it was read from (0: none read)
    profiled_margin: float | None = None  # the profiled run's (None: an older report's)
    predicted_model_bound: float | None = None  # the model's high end (``Finding.gain_bound``)
    # The model's low end (``Finding.gain_low``; None: "up to", or an older report's): what "no
    # measurable effect" must leave out (``compare_samples.ruled_out``).
    predicted_model_low: float | None = None
    rounds: int = 0  # rounds read (pairs of runs); 0: not measured
    added_rounds: int = (
        0  # of them, added after the planned rounds to decide it (tryfix.sequential)
    )
    # None: speedup_low/high are the planned look's interval of the median (run-to-run margin
    # included); else the two-sided level of the rounds' interval an added look read (trimmed t from 5 rounds).
    interval_level: float | None = None
    # The steps above (and compared) are each step's own time: its wall time less its thread's
    # wait for a core (analysis.interference.counted_step_times, as SampleComparison.own_time);
    # False: wall times.
    own_time: bool = False
    said: tuple[TrialSaid, ...] = ()  # what ``note`` words; () once worded


@dataclass(frozen=True)
class TrialRun:
    """One run of ``--try-fixes``, as it went: enough to tell a fix that is slow from a run
    lost to its start-up, its warm-up, its limit, the budget or its exit (times in seconds from
    the run's start; None: not reached, or not read)."""

    arm: str  # "" the script as it is, else the fix's fix_id
    # "stopped" at its step boundary with its steps; "finished" on its own (the script's end);
    # "error"; "limit": stopped at its time limit, how far it got said; "killed": stopped at its
    # limit, nothing written; "no result": it exited with none.
    ended: str
    limit_s: float  # the time it was given to end its steps
    budget_limited: bool  # that limit was what was left of the budget, under the usual one
    wall_s: float  # from its start to its exit (or its kill)
    first_step_s: float | None  # to its first step's end (interpreter, imports, CUDA, workers)
    warm_s: float | None  # to its warm-up's end
    steps_asked: int  # timed steps it was asked for
    steps_timed: int  # timed steps it ended (compared only where it "stopped" or "finished")
    step_median_s: float | None  # of those steps
    exit_s: float | None  # from its result written to its process's end (its teardown)
    exit_killed: bool = False  # its teardown outlasted the grace and was killed (steps kept)
    exit_code: int | None = None  # its process's (negative: the signal that ended it)
    # Where its threads were when its limit came (faulthandler, from the signal handler: a
    # thread blocked in C says where too), one line per thread, innermost frames first; ()
    # where no limit came.
    stacks: tuple[str, ...] = ()
    # The last lines of its output (the script's and the child's), where it did not end as
    # planned (any end but "stopped" with its exit on time).
    output_tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class TryFixes:
    """What `--try-fixes` ran: steps per run, rounds, budget, and each fix's trial."""

    warmup_steps: int
    steps: int
    rounds: int
    budget_s: float
    spent_s: float
    trials: tuple[FixTrial, ...] = ()
    notes: tuple[str, ...] = ()  # ``said`` worded (views/tryfix_text.word_trials)
    said: tuple[TrialSaid, ...] = ()  # () once worded
    runs: tuple[TrialRun, ...] = ()  # every run, in the order they ran


@dataclass(frozen=True)
class Report:
    """What the user gets: the run's facts, the analysis, the verdict and the findings."""

    run: Run
    analysis: Analysis
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    comparison: Comparison | None = None
    whatif: WhatIf | None = None
    gpu_estimate: GpuEstimate | None = None  # "would a GPU help?" from a run without one
    try_fixes: TryFixes | None = None  # gpucheck run --try-fixes: the offered fixes, measured
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = to_jsonable(self)
        for finding in data["findings"]:
            finding.pop("said", None)  # the worded text is in the finding
            finding.pop("notes", None)
        data["verdict"].pop("answer", None)  # the worded text is in the verdict
        data["verdict"].pop("lines", None)
        if data["gpu_estimate"] is not None:
            data["gpu_estimate"].pop("limits", None)  # worded in limited_by
        if data["try_fixes"] is not None:  # worded in notes / note
            data["try_fixes"].pop("said", None)
            for trial in data["try_fixes"]["trials"]:
                trial.pop("said", None)
        return data

    def to_json(self, indent: int | None = None) -> str:
        text = msgspec.json.encode(self.to_dict())
        if indent is not None:
            text = msgspec.json.format(text, indent=indent)
        return text.decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Report:
        """Read ``to_json`` output (ValueError: another schema version; msgspec.ValidationError)."""
        version = msgspec.json.decode(text, type=_Header).schema_version
        if version == 1:
            old = from_jsonable(cls, _from_schema1(msgspec.json.decode(text)))
            return dataclasses.replace(old, run=workers_unread_as_none(old.run))
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"report schema version {version!r} is not supported (expected {SCHEMA_VERSION})"
            )
        # strict=False: "Infinity" becomes a float where a float is declared (see the codec).
        report = msgspec.json.decode(text, type=cls, strict=False)
        return dataclasses.replace(report, run=workers_unread_as_none(report.run))

    # Text for ``repr`` (``%%gpucheck -o r`` then ``r``; ``print(r)``) comes from the views,
    # which install it on import (gpu_notebook.views): records never import a view.
    def __repr__(self) -> str:
        if _text_view is not None:
            return _text_view(self)
        return (
            f"<Report {self.verdict.category}: {len(self.findings)} findings"
            " (gpu_notebook.views.text.render_text(report) for the text report)>"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


# --------------------------------------------------------------------------------------------
# Job records: one small summary per rank, and the job report rank 0 builds from them
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankShape:
    """One rank's run over time in a few numbers (from its ``RunShape``), for the job report.

    Kept to what comparing ranks needs, so the summary stays a few hundred bytes: the single-rank
    report keeps the segments, the stalled steps and the memory fits. Memory growth is carried
    only where it is a creep by the single-rank rule's level (rules/run_shape.py ``creeps``):
    the fit's R^2 and span stay on the rank.
    """

    first_s: float  # median step of the first fifth of the run
    last_s: float  # median step of the last fifth
    jitter: float  # p90 / median step, within like work (RunShape.jitter)
    stalls: int = 0  # steps over STALL_FACTOR x the median (0: no stall pattern)
    stall_period_steps: int | None = None  # every N steps, when they recur regularly
    stall_share: float = 0.0  # their time above the median step, of the run's step time
    stall_phase: str | None = None  # where that extra time went (hook timings); None: not timed
    rss_bytes_per_step: float | None = None  # None: no creep (or not measured)
    gpu_bytes_per_step: float | None = None
    # Where the creeping memory (GPU first, as the rule reports it) fills the card or machine.
    full_at_step: int | None = None
    represents: bool | None = (
        None  # the profiled window's steps are like the run's; None: no window
    )


@dataclass(frozen=True)
class RankFacts:
    """What one rank sends to rank 0: a few hundred bytes, whatever the size of its trace."""

    rank: int
    world_size: int
    local_rank: int | None
    host: str
    status: CellStatus
    error: str | None
    steps: int
    step_s: float | None  # median step
    # Per step: the host waiting on collectives (the "comm" phase), or NCCL/RCCL kernel time on
    # the GPU, whichever is larger. None: no trace, so not measured.
    comm_s: float | None
    phase_s: Mapping[str, float] = field(default_factory=dict)  # per step, measured phases only
    verdict: VerdictCategory = "unknown"
    headline: str = ""
    hot_line: str | None = None  # the stack sampler's top line of the script, when sampled
    grad_bytes: int | None = None
    files: tuple[str, ...] = ()  # this rank's own report / trace files
    shape: RankShape | None = None  # None: too few steps for a shape, or an older gpucheck
    # The spread of this rank's own steps when nothing differs between ranks (10th and 90th
    # percentile: the comm wait over its profiled steps, the step time over every step its step
    # clock timed): a gap between ranks inside it is noise.
    comm_p10_s: float | None = None
    comm_p90_s: float | None = None
    step_p10_s: float | None = None
    step_p90_s: float | None = None
    host_busy_share: float | None = None  # the host's CPU busy share over the run (all processes)
    # Median step of the step clock over the run (every step but the warm-up and the ones our
    # own work disturbed); None: too few such steps, or an older gpucheck.
    run_step_s: float | None = None
    run_wait_share: float | None = None  # share of a step its thread waited for a core (schedstat)
    # The step clock's split of every step over the run (report/job.py ``run_split``): per phase
    # ("data", "forward", "backward", "optimizer", "rest"), the median per step and half its
    # 10th-90th percentile range. In lockstep the ranks' steps last alike and their splits
    # differ only where one rank's own work makes the others wait. Empty: too few fully timed
    # steps (a lean clock), or an older gpucheck.
    run_split_s: Mapping[str, float] = field(default_factory=dict)
    run_split_spread_s: Mapping[str, float] = field(default_factory=dict)
    # Median per step of the loop thread's wait for a core over those steps (schedstat, read at
    # every step end); None: not read on every one of them.
    run_core_wait_s: float | None = None
    # A partial GPU timeline: its exposed collectives are an upper bound, so ``comm_s`` is the
    # most the rank waited a step and this the least (analysis.gpu_bounds); None: measured.
    comm_low_s: float | None = None


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for, and what its own step spends the time on."""

    rank: int
    reason: Literal["waits-least", "slowest-step"]
    phase: str | None  # its phase furthest above the other ranks'
    phase_share: float | None  # of its own step
    phase_s: float | None  # per step, on the straggler
    others_phase_s: float | None  # the same phase per step, median of the other ranks
    waiting_ranks: tuple[int, ...] = ()
    wait_s: float | None = None  # median per-step wait in collectives of the waiting ranks
    hot_line: str | None = None
    # Partial GPU timelines (``RankFacts.comm_low_s``): ``wait_s`` read at the ranks' most
    # comm wait, this at their least; None: measured.
    wait_low_s: float | None = None


@dataclass(frozen=True)
class JobShape:
    """A pattern of the run's shape seen on some or all ranks: drift, stalls or memory creep.

    Whether it is every rank or a few decides the reading: in lockstep a rank's slowdown or stall
    shows on every rank, so one rank alone means the ranks do not wait for each other there, and
    every rank means work all of them do or one rank's delay that the others wait through.
    """

    kind: Literal["drift", "stall", "memory"]
    ranks: tuple[int, ...]  # the ranks that show it
    of_ranks: int  # ranks whose run has a shape: "every rank" when ``len(ranks)`` equals it
    period_steps: int | None = None  # stalls: the period every one of ``ranks`` shares
    # Stalls on every rank: the ranks whose stalled time is their own work while the others'
    # goes to backward (where DDP waits for a peer in the gradient all-reduce). Empty: not told.
    origin: tuple[int, ...] = ()


@dataclass(frozen=True)
class SaturatedHost:
    """Ranks that shared a machine whose CPUs were saturated over the run (report/job.py)."""

    host: str
    ranks: tuple[int, ...]
    busy_share: float  # median over those ranks of the host's CPU busy share


@dataclass(frozen=True)
class JobReport:
    """One report for a multi-rank job (rank 0 writes it; ``gpucheck analyze DIR`` too)."""

    kind: Literal["gpucheck-job"]
    world_size: int
    ranks: tuple[RankFacts, ...]
    missing: tuple[int, ...]  # ranks whose summary never arrived
    source: Literal["run", "traces"]
    comm_share: float | None  # mean over the ranks of comm_s / step_s
    step_s: float | None  # median of the ranks' median steps
    straggler: Straggler | None = None
    roles: Mapping[str, str] = field(default_factory=dict)  # str(rank) -> what it does in the job
    whatif: WhatIf | None = None
    notes: tuple[str, ...] = ()
    shapes: tuple[JobShape, ...] = ()  # the run's shape across the ranks, one per pattern seen
    # Their differences may be the machine's, not the code's (the views say so after the notes).
    saturated_hosts: tuple[SaturatedHost, ...] = ()
    # Partial GPU timelines on some ranks: ``comm_share`` read at their most comm wait, this at
    # their least (None: measured); and the rank named straggler at one end of their waits and
    # not at the other (None: both ends agree, ``straggler`` stands).
    comm_share_low: float | None = None
    straggler_undecided: int | None = None
    schema_version: int = SCHEMA_VERSION


_text_view: Callable[[Report], str] | None = None


def install_text_view(render: Callable[[Report], str]) -> None:
    """Make ``repr(report)`` the text report (gpu_notebook.views calls it on import)."""
    global _text_view
    _text_view = render


# --------------------------------------------------------------------------------------------
# JSON codec: msgspec, driven by the type hints above. Decoding checks every field against its
# declared type (a bad Literal, a string where a number goes, a missing required field: a
# msgspec.ValidationError naming the path); unknown fields are ignored so that a report written
# by a newer version with an extra field still reads.
#
# An unbounded gain (a phase taking the whole step: 1/(1 - 1)) is a float ``inf``. JSON has no
# infinity (json.dumps writes ``Infinity``, which strict parsers reject; msgspec writes ``null``,
# which here means "not measured"), so a non-finite float is written as the JSON string
# "Infinity" / "-Infinity" (what JavaScript's ``Number("Infinity")`` also reads) and decoding
# turns such a string back into the float where the field is a number.
# --------------------------------------------------------------------------------------------

T = TypeVar("T")


def to_jsonable(value: Any) -> Any:
    """JSON-ready builtins of a record (dicts, lists, str, numbers; non-finite floats as strings)."""
    return _finite(msgspec.to_builtins(value))


def from_jsonable(cls: type[T], data: Any) -> T:
    """Rebuild a record of type ``cls`` from ``to_jsonable`` output (msgspec.ValidationError if bad)."""
    # strict=False: lets "Infinity" become a float where a float is declared (see above).
    return msgspec.convert(data, type=cls, strict=False)


def workers_unread_as_none(run: Run) -> Run:
    """``run`` with the worker CPU its sampler did not read as None, as the sampler writes it
    since 2026-12-06 (faultsmisc): a report written before then has 0.0 there (the same schema
    version: the field was ``float | None`` already). A sample read no worker where it listed
    none, or more than the sample before it (psutil's first look at a process is a baseline;
    the first sample's children were listed at the sampler's start, and read). A report
    written since reads unchanged."""
    samples = run.samples.samples
    fixed: list[Sample] = []
    before: int | None = None
    changed = False
    for sample in samples:
        listed = sample.children
        if (
            sample.children_cpu_pct is not None
            and listed is not None  # a report older than the listing count: as it was written
            and (not listed or (before is not None and (not before or listed > before)))
        ):
            sample = dataclasses.replace(sample, children_cpu_pct=None)
            changed = True
        fixed.append(sample)
        before = listed or 0
    if not changed:
        return run
    series = dataclasses.replace(run.samples, samples=tuple(fixed))
    return dataclasses.replace(run, samples=series)


def _from_schema1(data: Any) -> Any:
    """A schema 1 report (written before 2026-12-02) as schema 2 reads it: its windows as one
    record each; its what-if, GPU estimate and before/after are dropped, since they held
    sentences where schema 2 holds figures, and the next run computes them again. What a
    comparison needs (the run, its steps, the findings) reads as it was written."""
    data = _one_window_record(data)
    if isinstance(data, dict):
        data.update(whatif=None, gpu_estimate=None, comparison=None, schema_version=SCHEMA_VERSION)
    return data


def _one_window_record(data: Any) -> Any:
    """A schema 1 report, written before every profiler window was one ``ProfileWindow``, as
    written now: the first window's ``requested_steps`` is its ``profile_steps``;
    a later window (``first_step``, ``recorded_steps``, ``trace_path`` only) recorded, from
    its first step, the steps it holds."""
    run = data.get("run") if isinstance(data, dict) else None
    if not isinstance(run, dict):
        return data
    window = run.get("window")
    if isinstance(window, dict) and "requested_steps" in window:
        window["profile_steps"] = window.pop("requested_steps")
    later = run.get("more_windows")
    if isinstance(later, list):
        run["more_windows"] = [
            {
                "status": "recorded",
                "warmup_steps": w.get("first_step"),
                "profile_steps": w.get("recorded_steps"),
                **w,
            }
            if isinstance(w, dict) and "status" not in w
            else w
            for w in later
        ]
    return data


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value).replace("inf", "Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # to_builtins keeps tuples: lists here, as in JSON
        return [_finite(v) for v in value]
    return value


class _Header(msgspec.Struct):
    """The one field read before the rest, so an unknown version fails with a clear message."""

    schema_version: int | None = None
