"""Input pipeline rules: the step waits for the DataLoader (too few workers, slow dataset, busy CPUs).

Thresholds:
- data wait > 5% of the step suggests workers (PyTorch TensorBoard profiler plugin,
  ``profiler/data.py``); 10% warn, 20% critical (TraceML ``diagnostics/step_time/policy.py``);
- workers between 70% and 200% of the CPU cores (SageMaker Debugger ``Dataloader`` rule);
- CPU bottleneck: GPU < 10% while CPU > 90% in more than half of the samples (SageMaker
  Debugger ``CPUBottleneck``), unless the cores are this process's own threads with the loader
  in its main process: then the loading is serial in one process (torch's intra-op pool spread
  over tiny per-sample tensors: 15.8 of 16 cores on an H200 host for one core of loading), and
  workers, not more cores, are the first fix (``loader_workers`` speaks).
The gain of workers is what they can reach on this machine, not only Amdahl over the data-wait
share (``workers_reach``; its low end ``workers_low``, which also counts what a worker pays that
the main process did not). Where a worker costs more than it saves (a batch that loads faster
than its handoff; an in-memory ``TensorDataset``) no workers are proposed: indexing whole batches
removes the per-sample work instead (``in_memory_batches``). Where the step workers leave may be
longer than today's, no core is spare: said at severity info without a fix (``no_spare_core``).

The workers rule reads the data wait over the run where the step clock timed it (every step
outside the profiled windows, ``analysis.steps.run_phase``): in the window the profiler's cost on
the model's many small ops shrinks the data share (an HF Trainer's workers fix measured 2.3x
against a window's bound of 1.57x). The window's share only where the run has no such figure.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.analysis.floor_lines import host_floors
from gpu_notebook.analysis.level_range import Level
from gpu_notebook.analysis.uncertainty import sampled_share_low
from gpu_notebook.cell.facts import LoaderCall, RemadeLoaderAt, SourceFacts
from gpu_notebook.cell.live import LiveDataHook, LiveLoader
from gpu_notebook.cell.loops import remade_loaders
from gpu_notebook.cell.names import dotted
from gpu_notebook.cell.tree import CellTree
from gpu_notebook.cell.whole_batch_fetch import fetches_whole_batches
from gpu_notebook.cell.whole_loads import same_file_loads
from gpu_notebook.cell.words import IN_MEMORY_DATASETS
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import (
    Analysis,
    BatchAtLine,
    Finding,
    PhaseBreakdown,
    Run,
    RunPhase,
    Said,
    Sample,
    Severity,
    StallPattern,
    StartUpBursts,
)
from gpu_notebook.rules.common import (
    SUGGEST,
    WARN,
    LoaderInUse,
    PerStartCost,
    data_wait,
    found,
    gain_bound,
    gain_range,
    has_gpu,
    level_in,
    loader_in_use,
    severity_of,
    share,
)

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

WORKERS_MIN_SHARE_OF_CORES = 0.70  # SageMaker Debugger Dataloader rule: 70%..200% of cores
# Each worker holds a copy of the dataset object and prefetches 2 batches; past ~16 the memory
# grows faster than the wait shrinks on typical notebook machines (our choice, not a published rule).
WORKERS_CAP = 16
CPU_BUSY_PCT = 90.0  # SageMaker Debugger CPUBottleneck: CPU > 90%
GPU_IDLE_PCT = 10.0  # ... while GPU < 10%
BOTTLENECK_SAMPLE_SHARE = 0.5  # ... for more than 50% of the run
# A busy sample is this process's own when its threads (not its workers) hold more than this
# share of the busy cores (our choice: most of them).
OWN_BUSY_SHARE = 0.5

# What a worker costs the main process per batch: the batch comes back through a queue and shared
# memory (pickled storage handles, an unpickle, a wake-up). We measured an in-memory
# TensorDataset with num_workers=2 at 0.68x on 2 cores; torch's own DataLoader benchmarks put the
# handoff at a few hundred microseconds for small batches. 0.5 ms is our round figure.
WORKER_HANDOFF_US = 500.0
# What a worker pays per batch that the main process did not (the low end only): the items'
# Python runs slower in a forked worker (the GAN's per-item loader: 82 us an item against 75 us
# in the main process, 2 cores, 2026-12-04), and the worker collates into shared memory, hands
# the storages' file descriptors over and puts the batch on the queue (0.6-1.3 ms a 32-item
# batch there; 0.3-0.6 ms of worker CPU a batch read with /proc on the same loader).
WORKER_CPU_FACTOR = 1.1
WORKER_BATCH_US = 600.0
# A bound this close to 1 is no reason to add processes.
MIN_WORKER_GAIN = 1.05


@dataclass(frozen=True)
class NoWorkerGain:
    """Why workers would not pay: an in-memory dataset (its class), or a batch that loads
    faster than a worker's handoff (its ms)."""

    dataset: str | None = None
    batch_ms: float | None = None
    # This machine's host calls in the reference machine's (``HostOverhead.floor_scale``): the
    # handoff ``batch_ms`` is read against is ``WORKER_HANDOFF_US`` times this.
    floors: float = 1.0
    # The dataset already builds each batch in one call (cell.whole_batch_fetch): the wait is
    # the loader's own per-batch work, and whole-batch indexing is what the code does now.
    whole_batches: bool = False


@dataclass(frozen=True)
class Reach:
    """What ``wanted`` workers can reach on this machine, and from what."""

    wanted: int
    cores: int  # the cores this process may use (its affinity)
    bound: float | None
    load_us: float | None = None  # per step, in the main process (None: Amdahl alone)
    cpu_us: float | None = None  # the least of it that is CPU work (None: workers already load)
    batches: float = 1.0  # batches a step reads (the handoff and a worker's own cost are per batch)
    # per step, the main process's waits for a core in its loading's waiting part, which workers
    # take off its step (``loading_core_wait_us``; 0: none read)
    wait_us: float = 0.0
    floors: float = 1.0  # the worker costs in this machine's host calls (``LoopCores.floors``)


@dataclass(frozen=True)
class LoopCores:
    """What the workers share: the cores this process may use (its affinity, else the
    machine's), the cores the rest of the step keeps busy (torch's intra-op threads on a run
    without a GPU; one, the Python driving it, with one), the batches a step reads, and the
    tensors a batch holds (1 where not read)."""

    cores: int
    model_cores: int
    batches: float
    tensors: int = 1
    # This machine's host calls in the reference machine's (``HostOverhead.floor_scale``,
    # analysis.floor_lines): the main process's handoff and a worker's own cost of a batch
    # are their reference values times this.
    floors: float = 1.0


def loop_cores(run: Run, analysis: Analysis | None = None) -> LoopCores:
    """The loop's ``LoopCores`` from the run (the step clock's ``DataLoader.__next__`` calls
    against its steps, the tensors of the loader's first batch) and the analysis's host
    figures (its small-operator floor)."""
    cores = max(1, run.env.usable_cores or run.env.cpu_count)
    threads = run.env.torch_threads
    model = 1 if has_gpu(run) else min(cores, threads) if threads else cores
    steps, nexts = run.steps.step_count, run.steps.event_counts.get("dataloader", 0)
    batches = max(1.0, nexts / steps) if steps > 0 else 1.0
    tensors = max(1, run.steps.loader_batch_tensors or 1)
    floors = host_floors(analysis.host) if analysis is not None else 1.0
    return LoopCores(cores, max(1, model), batches, tensors, floors)


def handoff_us(analysis: Analysis) -> float:
    """A worker's handoff of a batch to the main process on this machine: ``WORKER_HANDOFF_US``
    in its host calls (``HostOverhead.floor_scale``)."""
    return WORKER_HANDOFF_US * host_floors(analysis.host)


@dataclass(frozen=True)
class InMemoryBatches(Said):
    data: float
    phases: PhaseBreakdown | None
    reason: NoWorkerGain | None  # None: workers may pay, but the sampler holds the wait
    bound: float | None
    batch: int | None
    shuffle: bool | None = None  # the loader's, where known (None: not a literal)
    drop_last: bool | None = None
    dataset: str | None = None  # the name the loader's dataset is bound to, where it is one
    whole: RunPhase | None = None  # the data wait over the run, where the step clock timed it
    profiled: float | None = None  # the profiled window's data share
    # The user's sampler= / batch_sampler= (source text): the advice keeps it (issue 26).
    sampler: str | None = None
    batch_sampler: str | None = None
    in_sampler: SamplerTime | None = None  # the wait is the sampler's own __iter__
    # The stacks cannot tell the sampler's __iter__ from the dataset's reads (too few samples).
    unsure: SamplerUnsure | None = None


@dataclass(frozen=True)
class SamplerTime:
    """The data wait spent in the user's sampler's ``__iter__`` (the stack sampler's
    ``function``, ``filename`` and ``first_line``): ``samples`` of the ``data_samples`` the
    DataLoader's ``__next__`` held, and its hottest line of the cell (None: not in the cell)."""

    function: str
    filename: str
    first_line: int
    samples: int
    data_samples: int
    hot_line: int | None = None
    hot_text: str | None = None

    @property
    def fraction(self) -> float:
        return self.samples / self.data_samples


@dataclass(frozen=True)
class SamplerUnsure:
    """The user's sampler's ``__iter__`` (``function``) held ``samples`` of the
    ``data_samples`` stack samples of the data wait: too few to tell whether it or the
    dataset's reads hold most of the wait (0 of 0: the wait was not sampled)."""

    function: str
    samples: int
    data_samples: int


@dataclass(frozen=True)
class DatasetTime:
    """The data wait's samples in the dataset's own code (``samples`` of ``data_samples``):
    the methods of the cell's dataset class that make its items, ``__getitem__`` or a
    generator ``__iter__`` alike, and the hottest of their lines (``line``, ``text``)."""

    function: str  # "LineStream.__iter__": the method holding the hottest line
    line: int
    text: str
    samples: int
    data_samples: int
    line_samples: int  # the hottest line's own
    # The file the hottest line loads whole on every call though its path does not depend on
    # the index (``pickle.load`` of ``self.path`` in ``__getitem__``), as written; None: not so.
    same_file: str | None = None


@dataclass(frozen=True)
class LoaderWorkers(Said):
    data: float  # the data wait's share of the step (over the run where the clock timed it)
    profiled: float | None  # the profiled window's reading
    whole: RunPhase | None
    phases: PhaseBreakdown | None
    static: LoaderCall | None  # the loader as the cell builds it
    live: LiveLoader | None  # or as an earlier cell built it
    hook: LiveDataHook | None  # or where a framework builds it
    as_iterated: bool  # num_workers read from the loop's iterator
    workers: int | None
    cores: int
    wanted: int
    pin: bool  # pin_memory=True advised
    gpu: bool
    reach: Reach
    low: float | None
    session: SessionCap | None = None  # the session's CPU set the low end
    # The loop reads an IterableDataset that never splits its stream by worker: each worker
    # added would yield every item (no patch is offered until the stream is split).
    unsplit_stream: bool = False
    # Workers may make the step slower here: no fix is offered (None: they may pay).
    no_spare: NoSpareCore | None = None
    # The dataset's own lines the wait was sampled in (None: not sampled there).
    in_dataset: DatasetTime | None = None
    # Offered, but with no overlap the step workers leave is longer than today's: the figures
    # of the low end under 1x (None: it is not).
    slower: NoSpareCore | None = None
    # The CPU this process's session got while the steps ran, shared with the workers: not
    # offered where it leaves a step no shorter than today's (``session_share``; None: not read).
    share: SessionShare | None = None
    busy: bool = False  # ``share`` leaves no shorter step: said, not offered
    # Not offered (``no_spare`` or ``busy``): the share of the step cheaper loading can remove
    # (the dataset's own code's part of the wait where the sampler placed it there, else the
    # whole wait) and its Amdahl bound, what it gives with no core more (None: offered).
    item_share: float | None = None
    item_bound: float | None = None
    item_located: bool = False  # True: ``item_share`` is the dataset code's part of the wait


@dataclass(frozen=True)
class SessionCap:
    """The workers' low end as the CPU this process's session gets caps it
    (``session_reach``): ``reach``; this process's cores while the steps ran (``ours``), what
    its session can count on (``session``), the others' cores, the machine's, and the share of
    the time the loop's thread waited for a core."""

    reach: float
    ours: float
    session: float
    others: float
    cores: int
    wait: float
    torch_threads: int | None = None  # torch's intra-op pool in this process (a worker runs 1)


@dataclass(frozen=True)
class SessionShare:
    """The step ``workers`` workers leave where they get only the CPU this process's session
    can count on while the steps ran (``session_share``): today's step by the wall clock
    (``wall_us``), the CPU a step then needs (``cpu_us``: the main process's part, its own CPU
    use today less the loading's CPU work plus each tensor's handoff, and the workers' CPU
    work), and ``capacity`` cores: the rate its thread ran at while it could run, or this
    process's cores plus the idle cores the workers could take, whichever is more. The figures
    it is read from: this process's cores (``ours``), the machine's idle cores, its cores, and
    the share of the time the loop's thread waited for a core."""

    wall_us: float
    cpu_us: float
    capacity: float
    ours: float
    idle: float
    cores: int
    wait: float
    workers: int

    @property
    def step_us(self) -> float:
        """The shortest step that CPU allows."""
        return self.cpu_us / self.capacity

    @property
    def gain(self) -> float:
        return self.wall_us / self.step_us if self.step_us > 0 else math.inf


@dataclass(frozen=True)
class SlowDataset(Said):
    data: float
    phases: PhaseBreakdown | None
    workers: int
    cores: int
    live: LiveLoader | None
    persistent_off: bool  # persistent_workers=False
    # The workers' CPU (100 = one core) when it shows them waiting, not computing (None: they
    # compute, or it was not read).
    waiting_cpu_pct: float | None = None
    # What the idle workers' CPU does not show: "io" (they wait for their samples: the step
    # waits longer than a batch's handoff on a machine with spare cores), "ahead" (the wait is
    # no longer than receiving a batch they have ready: the loader is not the bound), "busy"
    # (the machine's cores were busy: not computing may be not getting a core). None: not idle.
    idle: Literal["io", "ahead", "busy"] | None = None
    wait_us: float | None = None  # the step's data wait, per step (the window's mean)
    machine_pct: float | None = None  # the machine's CPU, mean over its cores
    # A loader made anew every epoch whose start-ups input.remade_loader names: ``data`` is the
    # steady steps' share (its bursts left out), read from these figures.
    steady: StartUpBursts | None = None
    handoff_line_us: float | None = None  # the handoff widened by the run's margin
    floors: float = 1.0  # the handoff in this machine's host calls (``HostOverhead.floor_scale``)


@dataclass(frozen=True)
class CpuSaturated(Said):
    fraction: float  # of the samples, CPUs busy while the GPU idled
    samples: int
    children_cpu: float | None  # DataLoader workers' CPU (100 = one core)
    data: float | None


def suggested_workers(cpu_count: int) -> int:
    """70% of the cores, rounded up (SageMaker's lower bound), at least 1, at most 16."""
    return max(1, min(WORKERS_CAP, math.ceil(WORKERS_MIN_SHARE_OF_CORES * cpu_count)))


def per_step_us(analysis: Analysis, phase: str) -> tuple[float, float] | None:
    """(mean ``phase`` time, mean step time) over the profiled steps, in microseconds."""
    phases = analysis.phases
    if phases is None or not phases.steps or phase not in phases.measured:
        return None
    n = len(phases.steps)
    return phases.phase_total_us.get(phase, 0.0) / n, phases.total_us / n


def dataset_type(facts: SourceFacts, loader: LoaderInUse) -> str | None:
    """Class name of the loader's dataset: from the live loader, the live object or the cell."""
    if loader.live is not None:
        return loader.live.dataset_type
    if loader.static is None:
        return None
    return facts.dataset_class(loader.static)


def workers_reach(
    run: Run,
    analysis: Analysis,
    data: float,
    wanted: int,
    current: int | None,
    whole: RunPhase | None = None,
) -> Reach:
    """What ``wanted`` workers can give on this machine, and from what (per step: the run's mean
    data wait and step when ``whole`` has them, else the window's)."""
    amdahl = gain_bound(data, analysis)
    timing = (
        (whole.phase_s * 1e6, whole.step_s * 1e6)
        if whole is not None
        else per_step_us(analysis, "data")
    )
    loop = loop_cores(run, analysis)
    if amdahl is None or timing is None or timing[1] <= 0:
        return Reach(wanted, loop.cores, amdahl, batches=loop.batches, floors=loop.floors)
    load_us, step_us = timing
    rest_us = step_us - load_us
    cpu_us = None
    if current == 0:
        # The main process loads: the wait is the whole per-batch loading cost. Its CPU part
        # moves to the workers and must share the cores with the rest of the step; its waiting
        # part (reads, sleeps) overlaps, but ``wanted`` workers that each take the loading's
        # time deliver no faster than ``load / wanted`` (plain_input's 2 workers on a loader
        # sleeping 2 ms an item: 2.04x-2.10x measured, ~2.1x by this term). The main process
        # still receives every batch.
        # The process's CPU use read as the loop ran (``loop_stretch``), as ``no_spare_core``
        # reads it: over the wall clock a loaded machine's waits for a core read a numpy
        # augmentation as "none of it CPU work" (zip_two_loaders at load 21: 0.11 of a core,
        # its thread waiting 90% of the time), and the same report's two readings disagreed.
        cpu_us = load_us * loading_cpu_fraction(run, analysis, data, loop_stretch(analysis))
        floor_us = max(
            _workers_floor(loop, rest_us, cpu_us, WORKER_HANDOFF_US * loop.floors), load_us / wanted
        )
    else:
        floor_us = rest_us
    # The fix's trial times the steps by the wall clock (it adds processes), so today's step
    # counts the main process's waits for a core that the workers take off it; the floor stays
    # the workers' own time (their waits overlap one another's sleeps).
    # The loading's CPU share read with the whole stretch (none of the cap that keeps
    # ``cpu_us`` an upper bound's reading): a CPU loader whose thread ran under a tenth of the
    # time (python_items at load 20: 6% of a core, waiting 91%) is not read as waiting.
    most_cpu = load_us * loading_cpu_fraction(run, analysis, data, loop_stretch(analysis, math.inf))
    wait_us = loading_core_wait_us(whole, load_us, most_cpu) if current == 0 else 0.0
    if wait_us > 0:
        amdahl *= (step_us + wait_us) / step_us
    bound = min(amdahl, (step_us + wait_us) / floor_us) if floor_us > 0 else amdahl
    return Reach(wanted, loop.cores, bound, load_us, cpu_us, loop.batches, wait_us, loop.floors)


def loading_core_wait_us(whole: RunPhase | None, load_us: float, cpu_us: float | None) -> float:
    """The main process's waits for a core a step in its loading's waiting part (microseconds):
    the data phase's wall time less its own (``RunPhase.wall_share``, ``wait_share``), for the
    share of the loading that is not CPU work (``cpu_us`` of ``load_us``, the least the
    process's CPU use allows: an upper bound's reading). A loader that sleeps or reads wakes
    the main process once an item, and on a busy machine each wake-up waits for a core; with
    workers the main process wakes once a batch and the workers' waits overlap one another's
    sleeps (accelerate_loop, 8 sleeps of 2 ms a batch, load 10-15: 31.8-34.9 ms a step by the
    wall clock for 18.4 ms of its own, 9.7-10.2 ms with 2 workers: 3.1x-3.5x, where its own
    time bounds 2 workers at 2.1x; the ledger at load 3-5 measured 2.49x over a 2.31x high
    end). A CPU loader keeps its waits: its work moves, it does not stop waiting. 0: not read."""
    if whole is None or whole.wall_share is None or load_us <= 0 or not 0 <= whole.wait_share < 1:
        return 0.0
    wall_step_us = whole.step_s * 1e6 / (1.0 - whole.wait_share)
    waits_us = whole.wall_share * wall_step_us - whole.phase_s * 1e6
    waiting = 1.0 - min(1.0, (cpu_us or 0.0) / load_us)
    return max(0.0, waits_us) * waiting


def _workers_floor(loop: LoopCores, rest: float, cpu: float, handoff: float) -> float:
    """The shortest step workers leave (in the unit of ``rest``): the rest of the step and the
    main process's ``handoff`` of each batch, or the rest (on the cores it keeps busy) and the
    loading's ``cpu`` work shared over the cores this process may use. Where torch's intra-op
    threads may use every core for the model, the workers' CPU work only runs beside it."""
    return max(rest + handoff * loop.batches, (rest * loop.model_cores + cpu) / loop.cores)


def workers_cpu_us(loop: LoopCores, cpu_us: float) -> float:
    """The workers' CPU work a step at most: the loading's ``cpu_us`` at a forked worker's
    pace and each batch's collate into shared memory and queueing (``WORKER_CPU_FACTOR``,
    ``WORKER_BATCH_US`` in this machine's host calls), for each tensor the batch holds: each
    is a storage of its own."""
    return cpu_us * WORKER_CPU_FACTOR + WORKER_BATCH_US * loop.floors * loop.batches * loop.tensors


def main_handoff_us(loop: LoopCores) -> float:
    """The main process's receiving of a step's batches at most: ``WORKER_HANDOFF_US`` (in
    this machine's host calls) for each tensor of each batch (each storage's file descriptor is fetched from the worker and
    mapped on its own)."""
    return WORKER_HANDOFF_US * loop.floors * loop.batches * loop.tensors


def _workers_floor_low(loop: LoopCores, wanted: int, rest: float, load: float) -> float:
    """The longest step workers may leave (microseconds): all of the ``load`` CPU work, done
    at a worker's cost (``workers_cpu_us``) by ``wanted`` workers on at most every core, after
    the main process's own part (the rest of the step and the handoff of each batch's tensors,
    ``main_handoff_us``), not beside it. Sharing the cores without loss is no low end: the GAN's
    per-item Python loader (one tensor a batch) stepped 3.15 -> 2.87 ms with 2 workers on 2
    cores (1.10x), where packing its CPU work over them predicted 2.0-2.5 ms; this floor reads
    2.87 ms from its figures (0.75 ms rest, 2.4 ms load)."""
    parallel = max(1, min(wanted, loop.cores))
    return rest + main_handoff_us(loop) + workers_cpu_us(loop, load) / parallel


# A stretch past this (the loop's thread ran under 10% of the time) is not extrapolated.
MAX_STRETCH = 10.0


def loop_stretch(analysis: Analysis, most: float = MAX_STRETCH) -> float:
    """How much longer than the time it ran the loop's thread took while the steps ran: 1 / the
    share of the time it ran (``MachineFacts.loop_run_wait``), at most ``MAX_STRETCH``; 1 where
    not read. This process's CPU use over the wall clock reads low by that much on a loaded
    machine (python_items at load 10: 0.35 of a core, its thread waiting for a core 64% of the
    time), while the run's step and loading are its own time (``analysis.steps.run_phase``).
    ``most``: the cap (``MAX_STRETCH``; ``math.inf`` for the whole stretch)."""
    m = analysis.machine
    wait = m.loop_run_wait if m is not None else None
    if wait is None or wait <= 0:
        return 1.0
    return most if wait >= 1 else min(most, 1.0 / (1.0 - wait))


@dataclass(frozen=True)
class NoSpareCore:
    """The step ``wanted`` workers leave (``workers_steps``, microseconds): ``slowest_us`` with
    their CPU work after the main process's part (``main_us``), not beside it, ``fastest_us``
    with all of it packed on the cores beside it."""

    step_us: float
    slowest_us: float
    main_us: float
    workers_us: float
    parallel: int
    cores: int
    tensors: int
    batches: float
    fastest_us: float
    floors: float = 1.0  # the worker costs in this machine's host calls (``LoopCores.floors``)

    @property
    def expected_us(self) -> float:
        """The step the offer is decided on: the middle of no overlap and full overlap."""
        return (self.slowest_us + self.fastest_us) / 2

    @property
    def pays(self) -> bool:
        """Whether the middle is shorter than today's step by more than two runs of the same
        code differ (``RUN_TO_RUN``): a middle within it is no decided gain, and a line at
        today's step flipped the offer with the load. iterable_text_stream at load 17-28 read
        its middle at 1.030, 0.989, 0.967 and 0.997 of today's step in four runs: "no core is
        spare" in the first, offered in the three others (unseen round 11, at e78d0f4 too);
        now "no core is spare" in all four. zip_two_loaders' 0.84-0.88 stays offered."""
        return self.expected_us < self.step_us * (1.0 - RUN_TO_RUN)


def workers_low(
    run: Run,
    analysis: Analysis,
    whole: RunPhase | None,
    current: int | None,
    bound: float | None,
    wanted: int = 1,
) -> float | None:
    """The low end of the workers fix's range: the least data wait the run supports, all of it
    CPU work done at a worker's cost after the main process's part (``_workers_floor_low``).
    Amdahl over the wait alone is no low end: plain_input's wait read 11.7x-12.0x and 2 workers
    on 2 busy cores measured 1.86x; a loader of Python items measured 1.04x-1.16x where sharing
    the cores without loss predicted 1.53x-2.07x. None: no run-wide wait, or workers already
    load (what more of them reach is not modelled)."""
    if whole is None or bound is None or current != 0 or whole.step_s <= 0:
        return None
    amdahl = gain_bound(min(whole.low_share, whole.share), analysis)
    if amdahl is None:
        return None
    load_us = whole.step_s * min(whole.low_share, whole.share) * 1e6
    rest_us = (whole.step_s - whole.share * whole.step_s) * 1e6  # the rest as the run had it
    floor_us = _workers_floor_low(loop_cores(run, analysis), wanted, rest_us, load_us)
    reach = (rest_us + load_us) / floor_us if floor_us > 0 else amdahl
    return max(1.0, min(amdahl, reach, bound, session_reach(analysis)))


def _workers_floor_high(loop: LoopCores, wanted: int, rest: float, cpu: float) -> float:
    """The shortest step workers may leave with their costs paid (microseconds): the main
    process's own part (the rest and each tensor's handoff), the workers' CPU work
    (``workers_cpu_us``) on at most ``wanted`` cores, and both together with the rest on the
    cores it keeps busy, packed on the cores this process may use without loss."""
    main, work = rest + main_handoff_us(loop), workers_cpu_us(loop, cpu)
    parallel = max(1, min(wanted, loop.cores))
    packed = (rest * loop.model_cores + main_handoff_us(loop) + work) / loop.cores
    return max(main, work / parallel, packed)


def workers_steps(
    run: Run, analysis: Analysis, whole: RunPhase | None, current: int | None, wanted: int
) -> NoSpareCore | None:
    """The step ``wanted`` workers leave, both ways (``NoSpareCore``), over the least data wait
    the run supports, as much of it CPU work as this process's CPU use says at least
    (``loading_cpu_fraction``, read as the loop ran: ``loop_stretch``). None: the wait is not
    run-wide, or workers already load."""
    if whole is None or current != 0 or whole.step_s <= 0:
        return None
    loop = loop_cores(run, analysis)
    step_us = whole.step_s * 1e6
    load_us = step_us * min(whole.low_share, whole.share)
    rest_us = step_us * (1.0 - whole.share)
    cpu_us = load_us * loading_cpu_fraction(run, analysis, whole.share, loop_stretch(analysis))
    return NoSpareCore(rest_us + load_us, _workers_floor_low(loop, wanted, rest_us, cpu_us),
                       rest_us + main_handoff_us(loop), workers_cpu_us(loop, cpu_us),
                       max(1, min(wanted, loop.cores)), loop.cores, loop.tensors, loop.batches,
                       _workers_floor_high(loop, wanted, rest_us, cpu_us), loop.floors)  # fmt: skip


def no_spare_core(
    run: Run, analysis: Analysis, whole: RunPhase | None, current: int | None, wanted: int
) -> NoSpareCore | None:
    """Why ``wanted`` workers may make the step slower, from the program's own figures
    (``workers_steps``): the middle of the step they leave with no overlap (their CPU work
    after the main process's part, ``_workers_floor_low``) and with full overlap (packed on the
    cores beside it, ``_workers_floor_high``) is not shorter than today's by more than two runs
    of the same code differ (``NoSpareCore.pays``). The cores are not
    spare then: the main process's own part and the workers' CPU work, which a worker pays
    beyond the main process's (the items' Python in a forked process, each tensor's
    shared-memory storage and its handoff), do not fit in today's step on the cores this
    process may use. A loader that sleeps or reads files keeps its fix: its wait overlaps.

    The offer is decided on the middle, not on either end: where in between the step falls is
    the machine's load of the moment (python_items, 2 workers on 2 cores: 0.70x by hand quiet,
    its no-overlap end; ~1.4x at load 13 with its processes first in line for the cores, near
    the packed end), and a line at one end flips the offer with it. zip_two_loaders' no-overlap
    end sat within 2% of today's step at load 10-25 and the offer flipped run to run (offered
    at load 21-25, refused at 10 and 13; by hand 1.25x, 1.47x, 0.93x at load 7-9); its middle
    reads 0.84-0.88 of today's step at load 12. The no-overlap end stays the range's low end,
    under 1x where it says so (``loader_workers``): the load's caveat, not the offer's.
    python_items quiet (two tensors a batch, 2.15 ms steps, 1.85 ms of Python loading, 2 cores)
    reads 2.9 ms and 2.3 ms, a middle of 2.6 ms (0.83x): no core is spare. None: workers may
    pay (or the wait is not run-wide, or workers already load)."""
    steps = workers_steps(run, analysis, whole, current, wanted)
    if steps is None or steps.pays:
        return None
    return steps


# The loop's thread ran at least this share of the time it was not waiting for a core: it
# computes, not sleeps, most steps, so the CPU it got while it could run is its session's share
# (our choice: between the two kinds measured). A thread that sleeps between short bursts waits
# for a core after each wake-up and reads less: accelerate_loop's (a loader sleeping 2 ms an
# item) ran 9-24% of that time at load 12-28 (4% of the time running, 84% waiting at load 28:
# 0.04 of a core) where 2 workers measured 1.47x at load 21-24; python_items' and
# zip_two_loaders' ran 64-105% of it at the same loads.
COMPUTING_SHARE = 0.4


# Fewer data-phase samples than this with the thread's clock read: no reading of the loading.
LOADING_SAMPLES = 10


def loading_on_core(run: Run) -> float | None:
    """The loop thread's time on a core over its own time (wall less its wait for a core) in
    the stack samples taken while it waited for data (both samplers' ``phase == "data"``
    stacks, summed). The process's CPU, which ``session_share``'s first test reads, holds
    torch's other intra-op threads spinning at each parallel region's end: unseen round 16's
    islice_remote_latency (a store's 1.5 ms round trip an item, ``time.sleep``, no workers,
    load 14) read its loop as computing (0.18 of a core, its thread waiting 81%: 0.92 of the
    time it could run), while the samples in its data wait were on a core 7% (framework
    sampler, 31 samples: 0.42 of 1.08 s own) and 10% (line sampler, 38: 8 of 82 ms) of their own time: a
    loader that sleeps, whose workers sleep beside one another and need next to no CPU.
    None: fewer than ``LOADING_SAMPLES`` such samples, or no thread clock read."""
    cpu_us = own_us = samples = 0
    for raw in (run.stacks, run.framework_stacks):
        if raw is None or raw.cpu_us is None or raw.wait_us is None:
            continue
        for stack in raw.stacks:
            if stack.phase == "data":
                cpu_us += stack.cpu_us
                own_us += max(0, stack.time_us - stack.wait_us)
                samples += stack.count
    if samples < LOADING_SAMPLES or own_us <= 0:
        return None
    return min(1.0, cpu_us / own_us)


def session_share(
    run: Run, analysis: Analysis, whole: RunPhase | None, current: int | None, wanted: int
) -> SessionShare | None:
    """The step ``wanted`` workers leave with the CPU this process's session could count on while
    the steps ran (``SessionShare``). Linux shares the cores between sessions (autogroup)
    before threads, so workers forked from this process take their CPU from its session's
    share; only cores the machine left idle add to it, at most one a worker. The loading's CPU
    work moves to the workers at a worker's cost (``workers_cpu_us``) and the main process
    receives each batch's tensors (``main_handoff_us``): on a busy machine that CPU, at today's
    rate, takes longer than today's step. Read only where the loop's thread runs, not sleeps,
    much of the time it does not wait for a core (``COMPUTING_SHARE``), and where the samples
    of its data wait were on a core as much (``loading_on_core``). python_items and
    zip_two_loaders (a per-item Python loader, a numpy augmentation; 2 cores, load 8-28, no
    core idle, their threads waiting for a core 68-93% of the time) measured 0.70x-1.40x and
    0.84x-1.63x with 2 workers (by hand at load 24, python_items: 0.80x-1.62x), where this step
    reads 0.57x-0.70x and 0.66x-0.74x. accelerate_loop's loader sleeps: not read, its fix
    stays. The trial times the steps by the wall clock, so today's step is its own time with
    its waits for a core (``RunPhase.wait_share``). None: the loop's CPU use or its thread's
    wait for a core was not read, no run-wide wait, or workers already load."""
    m = analysis.machine
    if whole is None or current != 0 or whole.step_s <= 0 or m is None or whole.wait_share >= 1:
        return None
    ours, others, wait, process = (m.loop_ours_cores, m.loop_others_cores, m.loop_run_wait,
                                   m.loop_process_cores)  # fmt: skip
    if ours is None or others is None or wait is None or ours <= 0:
        return None
    if wait < 1.0 and min(1.0, ours) / (1.0 - wait) < COMPUTING_SHARE:
        return None  # the loop's thread sleeps: what it got is not its session's share
    on_core = loading_on_core(run)
    if on_core is not None and on_core < COMPUTING_SHARE:
        return None  # the loading sleeps or blocks: workers wait beside one another, not compute
    if process is None:
        process = ours  # the sampler's reading: no workers yet, so all of it this process's
    loop = loop_cores(run, analysis)
    wall_us = whole.step_s * 1e6 / (1.0 - whole.wait_share)
    load_us = whole.step_s * 1e6 * min(whole.low_share, whole.share)
    loading_cpu_us = load_us * loading_cpu_fraction(run, analysis, whole.share,
                                                    loop_stretch(analysis))  # fmt: skip
    # The main process's part: its CPU use less the loading's, at most the rest of the step on
    # the cores it keeps busy (torch's intra-op threads spinning over per-sample tensors, 15.9
    # of 16 cores on an H200 host, do not follow the loading into a worker of one thread).
    rest_us = whole.step_s * 1e6 * (1.0 - whole.share) * loop.model_cores
    main_us = min(max(0.0, process * wall_us - loading_cpu_us), rest_us) + main_handoff_us(loop)
    cpu_us = main_us + workers_cpu_us(loop, loading_cpu_us)
    idle = max(0.0, m.cores - others - ours)
    got = ours / (ours + wait)
    capacity = min(float(m.cores), max(got, ours + min(float(wanted), idle)))
    return SessionShare(wall_us, cpu_us, capacity, ours, idle, m.cores, wait, wanted)


def session_reach(analysis: Analysis) -> float:
    """The most workers can shorten the step with the CPU this process's session can count
    on (``MachineFacts.session_cores``): the process's CPU time per step stays (the workers
    take the loading's, the main process the rest), and it cannot run faster than that
    capacity, so the step is at least ``ours / capacity`` of today's. A loader that sleeps
    (little CPU) is not capped; on a busy machine a CPU-heavy one may gain nothing (2 workers on
    2 cores shared with 5 other sessions: 1.03x). inf: not sampled."""
    m = analysis.machine
    capacity = m.session_cores if m is not None else None
    if m is None or capacity is None or not m.loop_ours_cores:
        return math.inf
    return max(1.0, capacity / m.loop_ours_cores)


def loading_cpu_fraction(run: Run, analysis: Analysis, data: float, stretch: float = 1.0) -> float:
    """The least share of the loading that was CPU work, from this process's mean CPU use
    while the steady steps ran (``MachineFacts.loop_process_cores``: the imports and set-up
    before the loop, one core busy, read a sleeping loader's 18 ms as 6 ms of CPU work), else
    over the whole capture.

    Mean CPU ``p`` (100 = one core) = ``d * load + (1 - d) * rest``, the rest on at most
    ``loop_cores``' model cores. The least ``load`` consistent with ``p`` keeps the workers'
    bound an upper bound: a loader that sleeps or reads files is not capped by the cores. Not
    measured: 0 (no cap).

    ``stretch`` (``loop_stretch``): ``p`` read as the loop ran, not as the wall clock went, up to
    the one core its thread can use (a loop thread waiting for a core 64% of the time at 35% of
    a core was CPU-bound while it ran).
    """
    m = analysis.machine
    steady = m.loop_process_cores if m is not None else None
    p = steady * 100.0 if steady is not None else analysis.utilization.process_cpu_mean_pct
    if p is None or data <= 0:
        return 0.0
    p = max(p, min(100.0, p * stretch))
    rest_max_pct = 100.0 * loop_cores(run).model_cores
    return min(1.0, max(0.0, (p - (1.0 - data) * rest_max_pct) / (100.0 * data)))


def in_memory_batches(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step waits for data that is already in memory: index whole batches, add no workers;
    or (any dataset) it waits for the user's own sampler's ``__iter__``: name it."""
    data = data_wait(analysis)
    severity = level_in(analysis, "data", data, low=SUGGEST)
    if data is None or severity is None:
        return None
    loader = loader_in_use(facts)
    reason = _workers_do_not_pay(analysis, facts, loader)
    # The user's sampler holding the wait is said whatever the dataset: workers never run it.
    in_sampler = sampler_time(analysis, facts, loader)
    if in_sampler is None and (reason is None or reason.whole_batches):
        return None  # nothing per-sample to remove: the dataset already builds whole batches
    # Batched indexing removes the per-sample reads, not the sampler's own time.
    removed = data if in_sampler is None else data * in_sampler.fraction
    bound = gain_bound(removed, analysis)
    held = loader.static.dataset if loader.static is not None else None
    said = InMemoryBatches(
        data, analysis.phases, reason, bound, loader.setting("batch_size"),
        shuffle=loader.setting("shuffle"), drop_last=loader.setting("drop_last"),
        dataset=held if held is not None and held.isidentifier() else None,
        whole=analysis.run_data, profiled=share(analysis, "data"),
        sampler=given_sampler(loader, "sampler"),
        batch_sampler=given_sampler(loader, "batch_sampler"), in_sampler=in_sampler,
        unsure=sampler_unsure(analysis, facts, loader) if in_sampler is None else None,
    )  # fmt: skip
    return found("input.in_memory_batches", severity, said, phase_share=data, bound=bound,
                 line=loader.line)  # fmt: skip


# The sampler's __iter__ speaks for the data wait when it holds most of the DataLoader's
# __next__ samples (our choice: over this share) as far as its samples show: the low end of its
# share (Wilson, one-sided 95%, ``sampled_share_low``) is over it (the unseen python_sampler's
# windows held 7 of 8: at least 59%; 6 of 7: 55%; 3 of 3: 53%; 2 of 2, 43%, show too little).
# A hard count and a hard share (5 samples, half of them) answered 4 of 4 no, 5 of 5 yes, 9 of
# 19 no, 10 of 19 yes: two answers for one program on either side.
SAMPLER_SHARE = 0.5
ONE_SIDED_95 = 1.645
_NEXT = ("_BaseDataLoaderIter.__next__", "torch/utils/data/dataloader.py")


def sampler_time(analysis: Analysis, facts: SourceFacts, loader: LoaderInUse) -> SamplerTime | None:
    """The data wait as the user's own sampler's ``__iter__`` (a class the cell's loader is
    given as ``sampler=``/``batch_sampler=``, not torch's) holds it in the sampled stacks: it
    runs in the main process whatever ``num_workers`` is. None: not sampled, or not shown to
    hold most of it (``sampler_unsure`` tells "too few samples to say" from "not most")."""
    read = _sampler_read(analysis, facts, loader)
    if read is None or not read.shown:
        return None
    return read.time


def sampler_unsure(
    analysis: Analysis, facts: SourceFacts, loader: LoaderInUse
) -> SamplerUnsure | None:
    """The user's sampler was given, but the stacks show neither that its ``__iter__`` holds
    most of the data wait nor that it does not: the share's one-sided 95% interval (Wilson)
    straddles ``SAMPLER_SHARE`` (4 of 5 samples: 42% to 97%), or the wait was not sampled at
    all. The finding then says it cannot tell, not that the dataset's reads hold the wait
    (python_sampler named the sampler at 5 of 5 samples and the dataset's reads at 4 of 5)."""
    cls = facts.sampler_class(loader.static) if loader.static is not None else None
    if cls is None:
        return None
    read = _sampler_read(analysis, facts, loader)
    if read is None:
        return SamplerUnsure(f"{cls}.__iter__", 0, 0)
    if read.shown or read.high < SAMPLER_SHARE:
        return None
    return SamplerUnsure(read.time.function, read.time.samples, read.time.data_samples)


@dataclass(frozen=True)
class _SamplerRead:
    time: SamplerTime
    shown: bool  # the share's low end is over SAMPLER_SHARE
    high: float  # the share's high end


def _sampler_read(
    analysis: Analysis, facts: SourceFacts, loader: LoaderInUse
) -> _SamplerRead | None:
    """The sampler's samples of the data wait (see ``sampler_time``). None: no sampler of the
    user's, no stacks, or no sample of the data wait.

    The wait's samples are the most any sampled line holds in the data phase (the loop's own
    ``for x in loader`` line holds them all) or under the DataLoader's ``__next__``; the
    sampler's, those of its ``__iter__``'s lines in the cell or of the function itself. Both
    are read both ways because the functions kept are the top ones by self time: a
    ``__next__`` (or an ``__iter__`` whose time is all in ``random.choices``) with no self
    samples of its own may be left out (a whole-cell sampling kept neither)."""
    stacks = analysis.stacks
    cls = facts.sampler_class(loader.static) if loader.static is not None else None
    if stacks is None or cls is None:
        return None
    lines = (*stacks.lines, *stacks.script_lines)
    total = max([s.phase_samples.get("data", 0) for s in lines]
                + [f.total_samples for f in stacks.functions
                   if (f.function, f.filename.replace("\\", "/")[-len(_NEXT[1]):]) == _NEXT])  # fmt: skip
    name = f"{cls}.__iter__"
    stat = max((f for f in stacks.functions
                if f.function == name and "torch/utils/data" not in f.filename),
               key=lambda f: f.total_samples, default=None)  # fmt: skip
    at, held = _iter_lines(facts, cls)
    inside = [s for s in stacks.lines if s.filename is None and s.line in held]
    from_lines = sum(s.phase_samples.get("data", 0) for s in inside)
    samples = min(max(stat.total_samples if stat else 0, from_lines), total)
    if total <= 0:
        return None
    share = samples / total
    low = sampled_share_low(share, total, z=ONE_SIDED_95)
    high = 1.0 - sampled_share_low(1.0 - share, total, z=ONE_SIDED_95)
    hot = max(inside, key=lambda s: s.samples, default=None)
    filename, first = (stat.filename, stat.first_line) if stat else ("cell", at)
    time = SamplerTime(name, filename, first if first is not None else 0, samples, total,
                       hot.line if hot else None, hot.text.strip() if hot else None)  # fmt: skip
    return _SamplerRead(time, low >= SAMPLER_SHARE and first is not None, high)


# Methods of a dataset class that run once, when it is made or asked its length.
_NOT_ITEMS = frozenset({"__init__", "__len__", "__repr__", "__post_init__"})


def dataset_time(analysis: Analysis, facts: SourceFacts, loader: LoaderInUse) -> DatasetTime | None:
    """Where in the dataset's own code the main process's data wait was sampled: the lines of
    the methods of the cell's dataset class (the loader's, or each class the cell derives from
    a Dataset) other than its constructor, ``__getitem__`` and a generator ``__iter__`` alike
    (the sampler's stack walk passes through a generator's frame as through a call's). None:
    no sample of the data wait there."""
    stacks, tree = analysis.stacks, facts.tree
    if stacks is None or tree is None:
        return None
    wanted = dataset_type(facts, loader)
    methods: dict[int, str] = {}
    loads: dict[int, str] = {}
    for node in ast.walk(tree.tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = " ".join(dotted(b) or "" for b in node.bases)
        if node.name != wanted and "Dataset" not in bases:
            continue
        for fn in node.body:
            if (
                isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                and fn.name not in _NOT_ITEMS
            ):
                loads.update(same_file_loads(tree, fn))
                for n in ast.walk(fn):
                    if hasattr(n, "lineno") and not isinstance(n, ast.FunctionDef):
                        methods.setdefault(tree.line_of(n), f"{node.name}.{fn.name}")
    total = max((s.phase_samples.get("data", 0) for s in stacks.lines), default=0)
    inside = [s for s in stacks.lines if s.filename is None and s.line in methods
              and s.phase_samples.get("data", 0) > 0]  # fmt: skip
    if not inside:
        return None
    # The lines are inclusive (a call line holds its callee's samples), and one frame's lines
    # hold disjoint samples: a method's samples are its lines' sum (a method another calls is
    # inside the caller's call line: the most of the sums), the data wait's the loop line's
    # that holds them all. (The hottest line alone read 15 of stft_per_item_ctc's 24 where
    # its __getitem__'s three lines held more, and bounded caching its items under by hand.)
    hot = max(inside, key=lambda s: (s.phase_samples.get("data", 0), -s.line))
    by_method: dict[str, int] = {}
    for s in inside:
        by_method[methods[s.line]] = by_method.get(methods[s.line], 0) + s.phase_samples["data"]
    held = max(by_method.values())
    return DatasetTime(methods[hot.line], hot.line, hot.text.strip(), held, max(total, held),
                       hot.phase_samples.get("data", 0), loads.get(hot.line))  # fmt: skip


def _iter_lines(facts: SourceFacts, cls: str) -> tuple[int | None, set[int]]:
    """The cell's ``cls.__iter__``: its ``def`` line and every line of it (None, empty: the
    cell does not define it)."""
    tree = facts.tree
    if tree is None:
        return None, set()
    found = [fn for node in ast.walk(tree.tree)
             if isinstance(node, ast.ClassDef) and node.name == cls
             for fn in node.body
             if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "__iter__"]  # fmt: skip
    if not found:
        return None, set()
    held = {tree.line_of(n) for fn in found for n in ast.walk(fn) if hasattr(n, "lineno")}
    return tree.line_of(found[0]), held


def given_sampler(loader: LoaderInUse, which: Literal["sampler", "batch_sampler"]) -> str | None:
    """The user's own ``sampler=``/``batch_sampler=`` as code that names it: the cell's text,
    or the live loader's attribute (``loader.sampler``) where one not torch's default is set."""
    if loader.static is not None:
        return loader.static.sampler if which == "sampler" else loader.static.batch_sampler
    live = loader.live
    if live is None:
        return None
    custom = live.custom_batch_sampler if which == "batch_sampler" else live.shuffle is None
    return f"{live.name}.{which}" if custom else None


def data_in_memory(run: Run, analysis: Analysis, facts: SourceFacts) -> NoWorkerGain | None:
    """Why the data wait is per-sample assembly of batches already in memory (the class
    ``in_memory_batches`` names), or None. The verdict counts such a wait as host overhead."""
    return _workers_do_not_pay(analysis, facts, loader_in_use(facts))


def _workers_do_not_pay(
    analysis: Analysis, facts: SourceFacts, loader: LoaderInUse
) -> NoWorkerGain | None:
    """Why workers would not pay here (None: they may)."""
    current = loader.setting("num_workers")
    if current not in (0, None):
        return None
    kind = dataset_type(facts, loader)
    name = loader.static.name if loader.static is not None else None
    live = loader.live if loader.live is not None or name is None else facts.live.loader(name)
    batched = fetches_whole_batches(loader.static, live)
    if kind in IN_MEMORY_DATASETS:
        return NoWorkerGain(dataset=kind, whole_batches=batched)
    whole = analysis.run_data
    timing = per_step_us(analysis, "data")
    batch_us = whole.phase_s * 1e6 if whole is not None else timing[0] if timing else None
    if current == 0 and batch_us is not None and 0 < batch_us <= handoff_us(analysis):
        return NoWorkerGain(batch_ms=batch_us / 1000, whole_batches=batched,
                            floors=host_floors(analysis.host))  # fmt: skip
    return None


def batch_at_line(analysis: Analysis, facts: SourceFacts) -> BatchAtLine | None:
    """The batches' load time lies either side of a worker's handoff (the in-memory line of
    ``_workers_do_not_pay``) with the steps' wait for a core all in the data wait or none of it,
    where they waited half their time or more (``analysis.too_busy``): whether the data wait is
    host work or input starvation is then the machine's, not the code's. A loader that reads a
    class known to hold its data in memory is in memory at any load; one with workers is not
    judged by this line. ``other`` is filled by the report (words), as read over the line."""
    from gpu_notebook.analysis.too_busy import data_time_range

    loader = loader_in_use(facts)
    if loader.setting("num_workers") != 0 or dataset_type(facts, loader) in IN_MEMORY_DATASETS:
        return None
    read = data_time_range(analysis)
    if read is None:
        return None
    batch_s, low_s, high_s, wait, steps = read
    line_s = handoff_us(analysis) / 1e6
    if not (low_s <= line_s < high_s):
        return None
    return BatchAtLine(batch_s, low_s, high_s, line_s, wait, steps, None)


def workers_in_use(
    run: Run, loader: LoaderInUse, hook: LiveDataHook | None = None
) -> tuple[int | None, bool]:
    """The loop's loader's num_workers: as a framework's hook, the cell or a live object sets it,
    else as the loop's iterator had it (``num_workers=cfg["workers"]`` is no literal, but the
    iterator passed through the step clock); and whether it was read from the iterator."""
    workers = hook.num_workers if hook is not None else loader.setting("num_workers")
    if workers is None and run.steps.loader_num_workers is not None:
        return run.steps.loader_num_workers, True
    return workers, False


def loader_workers(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step waits for data and the DataLoader has no (or too few) worker processes."""
    profiled, whole = share(analysis, "data"), analysis.run_data
    data = data_wait(analysis)
    severity = level_in(analysis, "data", data, low=SUGGEST)
    if data is None or severity is None:
        return None
    cores = run.env.cpu_count
    wanted = suggested_workers(cores)
    loader = loader_in_use(facts)
    hook = facts.live.data_hooks[0] if not loader.known and facts.live.data_hooks else None
    workers, as_iterated = workers_in_use(run, loader, hook)
    if workers is not None and workers >= wanted:
        return None  # enough workers: slow_dataset explains the wait
    if _workers_do_not_pay(analysis, facts, loader) is not None:
        return None  # in_memory_batches speaks instead
    pinned = loader.setting("pin_memory") or run.steps.loader_pin_memory
    pin = has_gpu(run) and not pinned  # never advise a setting that already holds
    reach = workers_reach(run, analysis, data, wanted, workers, whole)
    in_sampler = sampler_time(analysis, facts, loader)
    if in_sampler is not None and reach.bound is not None:
        # Workers read the samples; the sampler's share of the wait stays in the main process
        # (in_memory_batches names it).
        rest = gain_bound(data * (1.0 - in_sampler.fraction), analysis)
        if rest is not None and rest < reach.bound:
            reach = dataclasses.replace(reach, bound=rest)
    bound = reach.bound
    if bound is not None and bound < MIN_WORKER_GAIN:
        return None  # workers cannot pay here; nothing to propose
    steps = workers_steps(run, analysis, whole, workers, wanted)
    no_spare = steps if steps is not None and not steps.pays else None
    said = LoaderWorkers(data, profiled, whole, analysis.phases, loader.static, loader.live, hook,
                         as_iterated, workers, cores, wanted, pin, has_gpu(run), reach,
                         None, in_dataset=dataset_time(analysis, facts, loader))  # fmt: skip
    if no_spare is not None:
        # The step workers leave is longer than today's: said, not offered (the fix would be
        # tried and kept only where it helps, but a recommendation must not be a slowdown).
        said = dataclasses.replace(said, no_spare=no_spare)
        return _not_offered(analysis, data, said, loader.line)
    shared = session_share(run, analysis, whole, workers, wanted)
    if shared is not None and shared.gain < 1.0:
        # The workers' CPU work comes out of the CPU this process's session got while the
        # steps ran, and with it the step is no shorter: said, not offered. A figure of this
        # machine now, not of the program (``loader_workers``' words say to measure again
        # where cores are free).
        said = dataclasses.replace(said, share=shared, busy=True)
        return _not_offered(analysis, data, said, loader.line)
    low = workers_low(run, analysis, whole, workers, bound, wanted)
    if low is not None and shared is not None and shared.gain < low:
        low = shared.gain
    # Where the workers' CPU work after the main process's part, not beside it, is a longer
    # step than today's, the low end says so (under 1x): how much of it overlaps is the
    # machine's load of the moment, a caveat of the range, not a reason to withdraw the offer.
    slower = steps if steps is not None and steps.slowest_us > steps.step_us else None
    if low is not None and slower is not None:
        low = min(low, slower.step_us / slower.slowest_us)
    unsplit = _unsplit_stream(run, loader)
    capped = shared if shared is not None and low is not None and shared.gain <= low else None
    said = dataclasses.replace(said, low=low, session=_session_cap(analysis, low),
                               unsplit_stream=unsplit, slower=slower, share=capped)  # fmt: skip
    return found("input.loader_workers", severity, said, phase_share=data, bound=bound,
                 line=loader.line, fix_id=None if unsplit else "dataloader_workers",
                 fix_params={"num_workers": wanted, "pin_memory": pin, "persistent_workers": True}
                 | ({"running_workers": workers} if as_iterated else {}),
                 low=low)  # fmt: skip


def _not_offered(analysis: Analysis, data: float, said: LoaderWorkers, line: int | None) -> Finding:
    """Workers not offered (no spare core, or a session too busy to give them CPU): what the
    advice left, making the loading cheaper in the main process, needs no core, so the finding
    is levelled and bounded by the part of the step it can remove: where the wait was sampled
    in the dataset's own code (``LOADING_SAMPLES`` at least), that code's part of it; else the
    whole wait, the most any cheaper loading gives. An unbounded info line ranked under every
    bounded finding, and an input-bound verdict had no finding above info (unseen round 21's
    stft_per_item_ctc, 1.44x by hand from caching its items; round 23's hf_tokenize_getitem,
    59% data wait, two of its samples in ``__getitem__``)."""
    d = said.in_dataset
    located = d is not None and d.data_samples >= LOADING_SAMPLES
    part = min(1.0, d.samples / d.data_samples) if d is not None and located else 1.0
    item = data * part
    bound = gain_bound(item, analysis)
    said = dataclasses.replace(said, item_share=item, item_bound=bound, item_located=located)
    level = level_in(analysis, "data", data, low=SUGGEST, part=part)
    return found("input.loader_workers", level or "info", said, phase_share=data,
                 bound=bound if level is not None else None, line=line)  # fmt: skip


def _unsplit_stream(run: Run, loader: LoaderInUse) -> bool:
    """The loop's loader streams an IterableDataset that no code splits by worker: its own
    code never asks ``get_worker_info`` (the step clock read it) and no ``worker_init_fn`` is
    given (the cell's call or the live loader), so each worker would yield every item."""
    if not run.steps.loader_unsplit_stream:
        return False
    given = loader.setting("worker_init_fn")
    return given is not True


def _session_cap(analysis: Analysis, low: float | None) -> SessionCap | None:
    """The session's figures when they set the workers' low end (None: they did not)."""
    m, capped = analysis.machine, session_reach(analysis)
    if low is None or m is None or m.session_cores is None or capped > low + 1e-9:
        return None
    return SessionCap(capped, m.loop_ours_cores or 0.0, m.session_cores,
                      m.loop_others_cores or 0.0, m.cores, m.loop_run_wait or 0.0,
                      m.torch_threads)  # fmt: skip


# Workers that use less than this share of a core each, while the step waits for them, spend
# their time waiting (I/O, a remote store, a sleep), not computing.
WAITING_WORKER_PCT = 25.0
MIN_WORKER_READS = 3  # samples that read the workers' CPU before it says they wait


def slow_dataset(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Enough workers, and the step still waits: the dataset's __getitem__ or transform is slow.

    A loader made anew every epoch whose start-ups ``remade_loader`` reads (``loader_start_ups``)
    is judged on its steady steps only, the bursts left to that finding: their data wait's share
    by its 90% interval (as ``severity_in``), and where the median steady step's wait, less its
    wait for a core, is within a batch's handoff widened by the run's margin (``run_margin``),
    the workers keep up (info). Over the whole run the bursts put the share over the lines, and
    which side of the machine-busy line a run fell on flipped a [high] finding between runs
    (quiet: [high]; loaded: [info])."""
    steady = _steady_waits(run, facts)
    severity: Severity | Level | None
    if steady is not None:
        data, severity = steady.steady_data_share, _steady_severity(steady)
    else:
        data = share(analysis, "data")
        severity = level_in(analysis, "data", data, low=WARN)
    if data is None or severity is None:
        return None
    cores = run.env.cpu_count
    loader = loader_in_use(facts)
    workers, _ = workers_in_use(run, loader)
    if workers is None or workers < suggested_workers(cores):
        return None  # loader_workers speaks first
    persistent_off = loader.setting("persistent_workers") is False
    if steady is not None and steady.steady_data_least_s is not None:
        line_us = handoff_us(analysis) * (1.0 + max(RUN_TO_RUN, analysis.run_margin or 0.0))
        if steady.steady_data_least_s * 1e6 <= line_us:
            said = SlowDataset(data, None, workers, cores, loader.live, persistent_off, None,
                               "ahead", steady.steady_data_least_s * 1e6,
                               analysis.utilization.system_cpu_mean_pct, steady,
                               line_us, host_floors(analysis.host))  # fmt: skip
            return found("input.slow_dataset", "info", said, line=loader.line)
    bound = gain_bound(data, analysis)
    children = analysis.utilization.children_cpu_mean_pct
    waiting = (
        children is not None
        and children < WAITING_WORKER_PCT * workers
        and _workers_read(run) >= MIN_WORKER_READS
    )
    idle, wait_us, machine = _idle_workers(analysis) if waiting else (None, None, None)
    said = SlowDataset(data, analysis.phases, workers, cores, loader.live, persistent_off,
                       children if waiting else None, idle, wait_us, machine,
                       steady, None, host_floors(analysis.host))  # fmt: skip
    if idle is not None and idle != "io":
        # Idle workers say only that they do not compute: no cause and no fix follows from
        # that alone (issue 26: an HF Trainer's 2 workers at 0.4% of a core, ahead of a
        # compute-bound step, read "they wait for their samples: num_workers=4").
        return found("input.slow_dataset", "info", said, line=loader.line)
    if waiting and not _unsplit_stream(run, loader):
        # The workers wait (storage, a remote store), they do not compute: more of them overlap
        # that wait without competing for the cores.
        return found("input.slow_dataset", severity, said, phase_share=data, bound=bound,
                     line=loader.line, fix_id="dataloader_workers",
                     fix_params={"num_workers": 2 * workers, "pin_memory": False,
                                 "persistent_workers": True})  # fmt: skip
    return found("input.slow_dataset", severity, said, phase_share=data, bound=bound,
                 line=loader.line)  # fmt: skip


def _workers_read(run: Run) -> int:
    """The samples that read the workers' CPU (the sampler's None: read none, or not all of
    them). In a short cell there may be none: notebook 24's 60 ms of steps with 2 workers read
    "0% of a core: they wait, do not compute" and was told num_workers=4 on 2 cores."""
    return sum(1 for s in run.samples.samples if s.children and s.children_cpu_pct is not None)


def _steady_waits(run: Run, facts: SourceFacts) -> StartUpBursts | None:
    """The remade loader's start-ups where they cost something and its steady steps timed
    their data wait (None: the whole run's data wait is judged)."""
    bursts = loader_start_ups(run, facts)
    if bursts is None or bursts.share <= 0 or bursts.steady_data_share is None:
        return None
    return bursts


def _steady_severity(steady: StartUpBursts) -> Severity | None:
    """``severity_in`` on the steady steps' data share: None where its whole 90% interval is
    under the warn line, else the level its low end clears, at least the lowest."""
    if severity_of(steady.steady_data_share_high, low=WARN) is None:
        return None
    return severity_of(steady.steady_data_share_low, low=WARN) or "medium"


def _idle_workers(
    analysis: Analysis,
) -> tuple[Literal["io", "ahead", "busy"], float | None, float | None]:
    """Why workers that use little CPU leave the step waiting, as far as measured."""
    timing = per_step_us(analysis, "data")
    wait_us = timing[0] if timing is not None else None
    machine = analysis.utilization.system_cpu_mean_pct
    if wait_us is not None and wait_us <= handoff_us(analysis):
        return "ahead", wait_us, machine
    if machine is not None and machine >= CPU_BUSY_PCT:
        return "busy", wait_us, machine
    return "io", wait_us, machine


def cpu_saturated(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The CPUs are saturated (preprocessing) while the GPU idles.

    Not where the busy cores are this process's own threads and the loader runs in its main
    process: one process loads serially there, whatever its intra-op threads burn (an H200 host
    at 15.8 of 16 cores, torch's 16 threads on 3x64x64 per-sample tensors), so more cores or
    GPU augmentation are not the first fix; workers are (``loader_workers``)."""
    samples = [
        s
        for s in run.samples.samples
        if s.system_cpu_pct is not None and s.gpus
        if any(g.utilization_pct is not None for g in s.gpus)
    ]
    if len(samples) < 4:
        return None  # too few samples to speak of "most of the run"
    starved = [
        s
        for s in samples
        if s.system_cpu_pct is not None
        and s.system_cpu_pct > CPU_BUSY_PCT
        and max((g.utilization_pct or 0.0) for g in s.gpus) < GPU_IDLE_PCT
    ]
    fraction = len(starved) / len(samples)
    if fraction <= BOTTLENECK_SAMPLE_SHARE:
        return None
    own = sum(1 for s in starved if _own_threads_busy(s, max(1, run.env.cpu_count)))
    if own > len(starved) / 2 and _main_process_loads(run, facts):
        return None  # loader_workers speaks first
    data = share(analysis, "data")
    bound = gain_bound(data, analysis)
    said = CpuSaturated(fraction, len(samples), analysis.utilization.children_cpu_mean_pct, data)
    severity: Severity = "high" if data is not None and data >= 0.20 else "medium"
    return found("input.cpu_saturated", severity, said, phase_share=data, bound=bound)


def _own_threads_busy(sample: Sample, cores: int) -> bool:
    """This process's own threads (not its workers) held most of the sample's busy cores."""
    busy_cores = (sample.system_cpu_pct or 0.0) / 100.0 * cores
    ours = (sample.process_cpu_pct or 0.0) / 100.0
    return busy_cores > 0 and ours > OWN_BUSY_SHARE * busy_cores


def _main_process_loads(run: Run, facts: SourceFacts) -> bool:
    """The loader the loop iterates has no workers (as the cell or a live object sets it, else
    as the loop's iterator had it)."""
    return workers_in_use(run, loader_in_use(facts))[0] == 0


# The hook-timed phases a new loader's start-up lands in: the wait for its workers' first
# batches (``__next__``: data), and ``iter(loader)`` itself, which forks the workers before the
# first ``__next__`` (no hook of ours: the step's rest, "other"). Under load the fork takes
# longer than the first batches: unseen workers_respawn at load 16-19 read its stalls every 20
# steps 54-59% "other", and the finding went to info, unbounded. None: the phases not timed.
START_UP_PHASES = (None, "data", "other")


@dataclass(frozen=True)
class RemadeLoader(Said):
    at: RemadeLoaderAt
    workers: int  # the loader's worker processes (literal, or as its iterator had them)
    # The run's stalls at the new loaders' period (their first batches wait for the workers'
    # start-up), their extra time over the median step as a share of the run; None: no such
    # stalls were read (the start-up hidden by a long epoch, or too few epochs).
    stalls: StallPattern | None
    bound: float | None
    # The patch moves the loader above the loop (persistent_loader, below): its arguments read
    # no name the loop sets; False: words only.
    patched: bool = False
    # Each start's burst over its loader's steady step, where the step clock saw the starts
    # (then the cost and the range rest on it, not on ``stalls``).
    bursts: StartUpBursts | None = None
    low: float | None = None


def loader_start_ups(run: Run, facts: SourceFacts) -> StartUpBursts | None:
    """The start-ups of a loader with workers that the cell makes anew for every pass of a loop
    around its step loop, as the step clock saw them start (``analysis.loader_starts``); None:
    no such loader, or its starts were not read."""
    from gpu_notebook.analysis.loader_starts import start_up_bursts

    remade = _remade_with_workers(run, facts)
    if remade is None:
        return None
    return start_up_bursts(run.steps, run.window.warmup_steps, remade[1])


def _start_up_stalls(analysis: Analysis) -> list[StallPattern]:
    """The run's stalls with a period in the phases a new loader's start-up lands in
    (``START_UP_PHASES``), as the wall and as the steps' own time read them."""
    shape = analysis.shape
    read = () if shape is None else (shape.stalls, shape.own.stalls if shape.own else None)
    return [
        x
        for x in read
        if x is not None and x.period_steps and x.phase in START_UP_PHASES and x.share > 0
    ]


def per_start_cost(run: Run, analysis: Analysis, facts: SourceFacts) -> PerStartCost | None:
    """What the loader the cell makes anew every epoch pays once per start, as
    ``remade_loader`` reads it: each start's burst over the steady step where the step clock saw
    the starts, else the run's stalls at the loaders' period; with the part of it outside the
    data wait. A bigger batch leaves it as it is per sample (``rules.common.bigger_batch_bound``).
    None: no such loader, or no start-up cost read."""
    if _remade_with_workers(run, facts) is None:
        return None
    bursts = loader_start_ups(run, facts)
    if bursts is not None:
        if bursts.share <= 0:
            return None
        # Where the bursts' data wait was not timed, none of them is counted outside it: the
        # bound stays an upper bound.
        return PerStartCost(bursts.share, bursts.outside_data_share or 0.0)
    periodic = _start_up_stalls(analysis)
    if not periodic:
        return None
    most = max(periodic, key=lambda x: x.share)
    return PerStartCost(most.share, 0.0 if most.phase == "data" else most.share)


def _remade_with_workers(run: Run, facts: SourceFacts) -> tuple[RemadeLoaderAt, int] | None:
    """The cell's first loader made anew every pass of a loop around its step loop, and its
    workers (the call's, else the step clock's reading); None: none, or no worker processes (a
    new loader then starts nothing)."""
    if facts.tree is None:
        return None
    at = next(iter(remade_loaders(facts.tree, facts.loaders)), None)
    if at is None:
        return None
    workers = at.call.num_workers
    if workers is None:
        workers = run.steps.loader_num_workers
    return (at, workers) if workers else None


def remade_loader(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A DataLoader with workers made anew for every pass of the loop around its step loop (an
    epoch loop, or a function that builds it called in the step loop's header): every new
    loader starts its workers again and its first batch waits for them; ``persistent_workers``
    does nothing for a loader thrown away. The fix builds it once, above the loop
    (``persistent_loader``). Evidence and cost: each start's burst (its first ``workers``
    steps) over the same loader's steady step, where the step clock saw the starts
    (``loader_start_ups``): the range is Amdahl over that share's 90% interval, the machine's
    stalls elsewhere in the epochs left out (Amdahl over every stall grew with the load: up to
    8.92x for a measured 3.94x). Else the run's stalls with a period in the data wait or in
    making the iterator (``START_UP_PHASES``), bound by Amdahl over their share. Without
    either: info, unbounded (a long epoch hides the start-up)."""
    remade = _remade_with_workers(run, facts)
    if remade is None:
        return None
    at, workers = remade
    periodic = _start_up_stalls(analysis)
    # The steps' own time (less each step's wait for a core) where read: the stalls the code
    # makes. The bound takes the larger share: the start-up is the new workers' CPU work (a
    # fork, their first batches), which a loaded machine stretches while the loop thread waits
    # off its core (at load 16-23 own-time stalls read 29%, the wall's 55%, and building the
    # loader once measured 1.75x: Amdahl over the own share alone, 1.40x, was no ceiling).
    stalls = periodic[-1] if periodic else None
    bound = gain_bound(max(x.share for x in periodic), analysis) if periodic else None
    least = None if stalls is None else stalls.share
    bursts = loader_start_ups(run, facts)
    low = None
    if bursts is not None:
        # The bursts' wall time: a loaded machine stretches the workers' fork and first
        # batches too, and the fix removes them as they ran. No burst over the steady step:
        # the start-up costs nothing this run can show (info, unbounded).
        low, bound = gain_range(bursts.share_low, bursts.share_high, analysis)
        least = bursts.share_low if bursts.share > 0 else None
        if least is None:
            low = bound = None
    severity: Severity = "info"
    if least is not None:
        severity = "high" if least >= 0.20 else "medium" if least >= WARN else "low"
    # Where the loader is assigned in the loop's own body from names the loop does not set,
    # the patch moves it above the loop with persistent_workers=True (unseen round 9's
    # workers_respawn: 2.27x measured, verified); a loader built by a function, or from the
    # epoch's own data, is the user's to move.
    patched = facts.tree is not None and any(
        b.movable and b.call.node is at.call.node
        for b in rebuilt_loaders(facts.tree, facts.loaders)
    )
    said = RemadeLoader(at, workers, stalls, bound, patched, bursts, low)
    share_read = bursts.share if bursts is not None else None if stalls is None else stalls.share
    return found("input.remade_loader", severity, said, phase_share=share_read, bound=bound,
                 line=at.call.line, fix=PERSISTENT_LOADER if patched else None, low=low,
                 bound_low=low)  # fmt: skip


# The fix of input.remade_loader: ``persistent_workers=True`` keeps a loader's workers only when
# the same loader is iterated again, so the assignment moves above the epoch loop too, where no
# argument reads a name the loop binds (``DataLoader(parts[epoch])`` stays: words only).


@dataclass(frozen=True)
class _Built:
    call: LoaderCall
    statement: ast.Assign
    loop: ast.For | ast.AsyncFor | ast.While
    movable: bool


def rebuilt_loaders(tree: CellTree, loaders: tuple[LoaderCall, ...]) -> list[_Built]:
    """``name = DataLoader(...)`` statements directly in the body of a loop around a step loop,
    persistent_workers not on: what the rule reports and the fix moves."""
    out = []
    steps = [loop for loop in tree.loops if id(loop) in tree.step_loops]
    for call in loaders:
        if call.node is None or call.persistent_workers is True:
            continue
        statement = tree.statement_of(call.node)
        loop = tree.enclosing_loop(call.node)
        if not isinstance(statement, ast.Assign) or statement.value is not call.node:
            continue
        if loop is None or id(loop) in tree.step_loops or statement not in loop.body:
            continue
        if not any(tree.inside(step, loop) for step in steps):
            continue
        bound = {
            n.id
            for part in (getattr(loop, "target", None), *loop.body)
            if part is not None
            for n in ast.walk(part)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        read = {n.id for n in ast.walk(call.node) if isinstance(n, ast.Name)}
        out.append(_Built(call, statement, loop, not read & bound))
    return out


def persistent_loader(module: cst.Module) -> CodemodResult:
    """The loader built in the epoch loop moves above it, with persistent_workers=True: one
    loader, its workers started once and kept across epochs."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import (
        Declined,
        Edited,
        facts_of,
        nodes_of,
        removed,
        replace_nodes,
        set_keyword,
        tree_of,
    )

    facts = facts_of(module)
    tree = facts.tree
    movable = [b for b in rebuilt_loaders(tree, facts.loaders) if b.movable] if tree else []
    parents = tree_of(module).parent
    edits: dict[cst.CSTNode, Replacement] = {}
    moved: dict[cst.CSTNode, list[cst.BaseStatement]] = {}
    for b in movable:
        call, loop = nodes_of(module, [b.call.node, b.loop])
        line = parents.get(parents.get(call))  # Call -> Assign -> the line
        if not isinstance(call, cst.Call) or not isinstance(line, cst.SimpleStatementLine):
            continue
        if not isinstance(loop, (cst.For, cst.While)):
            continue
        kept = set_keyword(call, "persistent_workers", cst.Name("True"))
        hoisted = line.deep_replace(call, kept)
        assert isinstance(hoisted, cst.SimpleStatementLine)
        moved.setdefault(loop, []).append(hoisted)
        edits[line] = removed
    for loop, lines in moved.items():
        edits[loop] = _preceded_by(lines)
    if not moved:
        return Declined("no DataLoader built in the epoch loop from names the loop does not bind")
    return Edited(replace_nodes(module, edits), "built once, persistent_workers=True")


def _preceded_by(lines: list[cst.BaseStatement]) -> Replacement:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import put_before

    def apply(loop: cst.BaseStatement) -> cst.FlattenSentinel[cst.BaseStatement]:
        out: list[cst.BaseStatement] = [loop]
        for line in reversed(lines):
            out = [*put_before(line, out[0]), *out[1:]]
        return cst.FlattenSentinel(out)

    return apply


PERSISTENT_LOADER = Fix(
    "persistent_loader",
    "Build the DataLoader once, with persistent workers",
    (
        "A DataLoader made inside the epoch loop starts its worker processes again every epoch.",
        "Made once above the loop with persistent_workers=True, its workers start once and stay.",
    ),
    "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
    persistent_loader,
)


TIE = 10  # where its findings tie: the verdict table's order (rules._families)
RULES = (loader_workers, in_memory_batches, slow_dataset, cpu_saturated, remade_loader)
