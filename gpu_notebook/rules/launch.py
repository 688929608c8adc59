"""Host- and launch-bound rules: tiny kernels or ops, Python between them, unfused optimizers.

On a GPU (``gpu_starved``): the GPU is busy < 50% of the window (Nsight Systems ``gpu_time_util``
flags chunks under 50% busy) and most of its idle time is *host wait* or *kernel wait*, HTA's
idle causes (``breakdown_analysis.py``: the launch came after the previous kernel ended, or the
gap is under 30 us). Gain bound: Amdahl over that idle share (if the host kept the GPU fed).

On a CPU (``tiny_ops``): the heaviest matmul/convolution operator takes under 30 us a call (HTA's
30 us kernel-wait threshold: on any GPU such a kernel is shorter than its own launch gap, so the
GPU would wait on Python), so per-op overhead, spread over every phase, sets the pace. Op sizes
are read by call floors (``analysis.host.call_floors``: the least one call took over the traced
steps; load only adds time to a call), so the finding and its batch factor do not move with the
machine's load (host_tiny_ops in benchmarks/stability.py: x8 quiet, x4/x4/x2 loaded by medians).
Severity medium, high when the host time outside operators alone reaches TraceML's critical 20%.
The fix: a batch ``batch_factor`` times bigger (its bounds: ``rules.common.bigger_batch_bound``
and ``bigger_batch_gain_low``), or ``compile_gain`` where there is no loader to enlarge.

Unfused optimizer: the optimizer step takes >= 10% of the step (TraceML warn; medium from 20%,
never high: the update is real work, fusing only trims its per-tensor overhead). Bound: Amdahl
over the optimizer share *over the run* where the step clock timed it: the profiler's cost lands
on every op, and an unfused update is hundreds of small ones, so the window's share overstates
it (14% in a window, 3.7% over the run's 469 steps: the fix measured 1.04x against a bound of
1.16x). Several optimizers: each class's own steps on the loop thread's CPU clock split the
update (``analysis.optimizer_split.clock_split``: the trace's 3 steps read Adam's part 11%-30%
by load for a 5% one), else the trace's per-optimizer ranges; the bound rests on the part the
flag reaches (SparseAdam holding most of a recommender's update: "up to 1.26x" on the whole,
measured 0.93x).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.analysis.floor_lines import host_floors
from gpu_notebook.analysis.fused_update import (
    UpdateFaults,
    fused_cpu_kept,
    fused_removed_high,
    outside_part,
    update_faults,
)
from gpu_notebook.analysis.host import (
    SMALL_OP_US,
    heaviest_matmul_us,
    host_bound,
    in_memory_host_bound,
    overhead_reach,
    per_sample_model_share,
)
from gpu_notebook.analysis.large_elementwise_ops import large_ops_hold_step
from gpu_notebook.analysis.level_range import Level
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.cell.live import LiveOptimizer
from gpu_notebook.cell.module_loops import ModuleLoop, module_list_loops
from gpu_notebook.cell.words import ACCUMULATION_KEYS, FOREACH_OPTIMIZERS, FUSED_OPTIMIZERS
from gpu_notebook.records import (
    Analysis,
    Finding,
    HostOverhead,
    PhaseBreakdown,
    Run,
    RunPhase,
    Said,
    Severity,
)
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    WARN,
    bigger_batch_bound,
    bigger_batch_bound_low,
    bigger_batch_gain_low,
    data_wait,
    found,
    gain_bound,
    gain_range,
    gpu_busy_bounds,
    has_gpu,
    input_or_sync_speaks,
    level_in,
    loader_in_use,
    pool_stretch,
    run_optimizer,
    severity_in,
    severity_of,
    share,
    shares_sum,
    uses_compile,
)
from gpu_notebook.rules.input_pipeline import data_in_memory, per_start_cost
from gpu_notebook.rules.syncs import loop_lines

LOW_BUSY = 0.50  # Nsight Systems gpu_time_util: < 50% busy
TINY_OP_US = SMALL_OP_US  # HTA consecutive_kernel_delay: 30 us
MAX_FACTOR = 8
# What a compiled module's forward and backward cost a step on the CPU whatever they compute:
# guards, AOTAutograd's wrappers, one input a parameter tensor. Measured on a loaded 2-core
# machine (benchmarks/README.md, "torch.compile on the CPU gets a bound"): 115 us with 10
# one-element parameters, 0.50 ms with 100, 3.2 ms with 400; a lower estimate.
COMPILED_CALL_US = 60.0
COMPILED_TENSOR_US = 5.0
# What the compiled graph's own cost may reach over that estimate on the CPU: its generated
# kernels are called one by one (and do the eager ops' work no faster), which an eager trace
# cannot count. nanoGPT's shape (7 tensors, 95 us a call by the estimate) measured ~290 us a
# micro-step by the loop thread's CPU clock (benchmarks/compile_parts.py: the compiled model call
# 1.23x the eager one, its backward 0.94x, against 72 us and 180 us of eager gaps a call).
# What compiling surely removes is the gaps less this many times the estimate.
COMPILED_COST_SPREAD = 3.0


@dataclass(frozen=True)
class GpuStarved(Said):
    busy: float  # the GPU's busy share of the window
    host_idle: float  # its idle share waiting for the host to launch work
    host_wait_us: float
    kernel_wait_us: float  # launch gaps
    mean_kernel_us: float | None  # of the top kernels
    bound: float | None
    compiled: bool
    # The idle share while the host ran the model's forward/backward (what compile reaches);
    # None: the host's phases were not located, the bound rests on the whole host wait.
    model_idle: float | None = None
    # A partial GPU timeline (``GpuBusyBounds``): ``busy`` is a lower bound, ``busy_high`` NVML's
    # upper one; ``host_idle`` holds the unclocked events' time (an upper bound: the gain bound
    # rests on it), ``host_idle_low`` less all of it (the grade rests on it).
    unclocked_events: int = 0
    busy_high: float | None = None
    host_idle_low: float | None = None


@dataclass(frozen=True)
class CompileGain:
    """What compiling the model can gain on the CPU (``compile_gain``), with the figures it
    rests on: shares of an unprofiled step where the run's step clock gave one."""

    model: float  # the model's forward and backward, the time compiling it can reach
    matmul: float  # the model's matmul/convolution calls by their floors (``HostOverhead``)
    over_run: bool  # the shares rest on the run's unprofiled steps (else on the window's)
    bound: float | None  # None: its own calls may take what it removes (``own_us``)
    bound_low: float | None
    # The compiled graph's own cost a step, estimated (``COMPILED_CALL_US`` and
    # ``COMPILED_TENSOR_US`` for each of ``tensors`` parameter tensors, once a call: ``calls``
    # a step, one a micro-batch under gradient accumulation), against the ``removed_us`` the
    # bound takes away; None: the parameter tensors were not counted.
    tensors: int | None = None
    own_us: float | None = None
    removed_us: float = 0.0
    # The step less its data wait, optimizer step and model: host work in the loop around the
    # model (the batch made by hand, a loop over the parameters, logging) that compiling the
    # model leaves as it is.
    outside: float = 0.0
    # What compiling surely removes a step (``HostOverhead.model_gaps_us``: the forward's Python
    # between operators, the engine's time between backward nodes) less twice the compiled
    # graph's own cost, as a share of the step, and its gain; None: not read.
    gaps_us: float | None = None
    sure: float | None = None
    sure_gain: float | None = None
    calls: int = 1  # the compiled graph's calls a step (backward passes a step, step clock)
    # This machine's small operator in reference floors (analysis.floor_lines.floor_scale):
    # ``own_us`` is the reference machine's estimate times this (1: the floor was not read).
    floors: float = 1.0

    @property
    def small(self) -> bool:
        """What compile surely removes is within what two runs differ by: the rest of the
        bound is operator work whose compiled cost an eager run does not show (a 3-layer MLP's
        forward and backward read up to 1.15x by the bound and measured 0.95x compiled)."""
        return self.sure_gain is not None and self.sure_gain <= 1.0 + RUN_TO_RUN


@dataclass(frozen=True)
class TinyOps(Said):
    tiny: bool  # the heaviest matmul/convolution is shorter than a launch gap
    sized_us: float  # the op the batch factor is sized by
    heaviest_us: float | None
    host: HostOverhead | None
    residual: float | None  # host time between operators
    phases: PhaseBreakdown | None
    median_s: float | None
    batch: int | None
    factor: int
    bound: float | None
    # A bigger batch (a loader to enlarge), compiled already (none), compile (none found), or
    # the model called sample by sample inside the step (none: batch the samples).
    outcome: Literal["batch", "compiled", "compile", "samples"]
    compiled: bool
    # Micro-batches per optimizer step the fix folds `factor` of into one (the learning rate
    # stays); None: no such accumulation, the batch grows and the learning rate scales.
    accumulation: int | None = None
    accumulation_key: str = "gradient_accumulation_steps"  # the keyword that sets it
    # The model side's share in operators whose work grows with the batch (matmuls,
    # convolutions, calls of real work), and the least the batch gains with it growing.
    per_sample: float | None = None
    low: float | None = None
    # The growing work's stretch at the bigger batch where torch's pool is short of cores
    # (``rules.common.pool_stretch``; 1: none).
    stretch: float = 1.0
    # outcome "compile": what compiling the model can gain, and the shares it rests on.
    compile: CompileGain | None = None
    # outcome "samples": the step loop's loops over the batch's samples that call the model.
    sample_loops: tuple[SourceLine, ...] = ()
    # A forward calling copies of one layer from a ModuleList one by one: stacked, one op.
    module_loops: tuple[ModuleLoop, ...] = ()
    # outcome "batch": a remade loader's start-ups, paid once per epoch whatever the batch, as a
    # share of the run's step time (``rules.input_pipeline.per_start_cost``); None: none read.
    start_ups: float | None = None


@dataclass(frozen=True)
class UnfusedOptimizer(Said):
    cls: str
    name: str | None
    implementation: Literal["fused", "foreach"]
    built_here: bool
    optimizer: float  # its share of the step (over the run where the step clock timed it)
    profiled: float | None  # the profiled window's reading
    whole: RunPhase | None
    phases: PhaseBreakdown | None
    low: float | None
    bound: float | None
    # On the CPU, why fusing would not shorten it (None: it may).
    no_cpu_gain: Literal["foreach", "one-pass"] | None
    # On the CPU, the part of the update a fused step keeps (``analysis.fused_update``), its
    # tensors and their bytes; None: the whole update is the bound (a GPU, or not counted).
    kept: float | None = None
    tensors: int | None = None
    grad_bytes: int | None = None
    # Other unfused optimizers the cell steps, made in earlier cells (the patch cannot reach).
    others: tuple[str, ...] = ()
    # The cell's optimizers the flag leaves as they are (classes: SparseAdam, LBFGS, one already
    # fused), whose steps share the measured update time: no floor then.
    beside: tuple[str, ...] = ()
    # The update's time by optimizer class in the traced steps (class, its part of the update,
    # most first; ``analysis.optimizer_split``), and the part of the classes the fix reaches,
    # which the bound rests on; empty and None: not split (no trace ranges), the whole update.
    split: tuple[tuple[str, float], ...] = ()
    reached: float | None = None
    # Where the split was read: the traced steps' ranges, or each class's steps on the loop
    # thread's CPU clock over the run (``split_steps`` of them: the fewest of any class).
    split_source: Literal["trace", "clock"] = "trace"
    split_steps: int = 0
    # The live ones were made before the cell (earlier cells); False: a script's own globals,
    # made by a call of the script the patch does not see into.
    made_before: bool = True
    made_in: tuple[int, ...] = ()  # the earlier cells that made them (In[N]), where all are known
    # On the CPU, the page faults the fused step would not make (the high end takes them).
    faults: UpdateFaults | None = None
    # The step the fault reading ended at (the first profiler window's end: the heap after it
    # is ours as much as the program's) where too few were read before it; None: not so.
    faults_off: int | None = None
    # On the CPU, the other phases' time the high end counts as well, a part of the update's
    # (``fused_update.outside_part``: what its temporaries cost their caches; 0: none).
    outside: float = 0.0


def _faults_off(run: Run, kept: float | None, faults: UpdateFaults | None) -> int | None:
    """The step a CPU update's fault reading ended at (our first profiler window's end) where
    it read too few steps before it to count them; None: read, or not ended so."""
    if kept is None or faults is not None:
        return None
    return run.steps.faults_off_step


def gpu_starved(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The GPU waits for the host to launch work (Python and launch overhead)."""
    gpu = analysis.gpu
    busy = gpu_busy_bounds(analysis)
    # A partial timeline's busy share is a lower bound: starved only where NVML inside the steps
    # (an upper bound) is under the line too; no NVML: not measured, no finding.
    if gpu is None or busy is None or busy.high is None or busy.high >= LOW_BUSY:
        return None
    if input_or_sync_speaks(analysis):
        return None  # the input or sync rule names the cause
    host_idle = (gpu.idle_host_wait_us + gpu.idle_kernel_wait_us) / gpu.window_us
    # The timeline's idle gaps hold the unclocked events' time: graded on the least the host
    # wait can be (all that time inside it), found where the most reaches the line.
    host_idle_low = max(0.0, host_idle - (busy.unseen or 0.0))
    if severity_of(host_idle, low=WARN) is None:
        return None
    severity = severity_of(host_idle_low, low=WARN) or "low"
    kernels = [op for op in analysis.top_ops if op.device == "gpu"]
    calls = sum(op.calls for op in kernels)
    mean_us = sum(op.total_us for op in kernels) / calls if calls else None
    compiled = uses_compile(facts)
    # What compiling the model reaches: the waits while the host ran its forward or backward,
    # not the optimizer's launches or Python outside the model (the whole host wait bounded
    # compile at "up to 16.2x" on the H200 kit's launch-bound run, 17% of it in AdamW's
    # launches; compiled, it measured 1.09x). Not located: the whole wait.
    model = gpu.idle_model_wait_us
    reach = host_idle if model is None else min(host_idle, model / gpu.window_us)
    bound = gain_bound(reach, analysis)
    said = GpuStarved(busy.low, host_idle, gpu.idle_host_wait_us, gpu.idle_kernel_wait_us,
                      mean_us, bound, compiled, None if model is None else reach,
                      busy.unclocked_events, busy.high, host_idle_low)  # fmt: skip
    if not compiled and model is not None and reach < WARN:
        # Little of the wait is in the model: compile is not the fix (the optimizer's or the
        # loop's own Python is; the other rules name them).
        return found("launch.gpu_starved", "info", said, phase_share=host_idle, bound=bound)
    return found("launch.gpu_starved", severity, said, phase_share=host_idle, bound=bound,
                 fix_id=None if compiled else "torch_compile")  # fmt: skip


def tiny_ops(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """No GPU: the model's ops are so small that per-op overhead and Python dominate the step."""
    if analysis.gpu is not None or analysis.phases is None or analysis.phases.source != "trace":
        return None
    heaviest_us = heaviest_matmul_us(analysis.top_ops, analysis.host)
    line_us = tiny_op_us(analysis.host)
    tiny = (
        heaviest_us is not None
        and heaviest_us < line_us
        and not (
            analysis.host is not None
            and large_ops_hold_step(
                analysis.top_ops, overhead_reach(analysis.host), analysis.host.op_floor_us
            )
        )
    )
    # The verdict's other reading of "ops too small" (analysis.host.host_bound): many
    # operators of a few us with Python between them fill the step, whatever the heaviest
    # matmul's size. The op structure does not move with load; the verdict says host-bound
    # on it, so the finding that names the fix must be there too.
    host = analysis.host
    many_small = host is not None and host_bound(host, (), on_gpu=True)
    if not many_small and data_in_memory(run, analysis, facts) is not None:
        # The verdict counts batches assembled from memory as overhead (host-bound on it,
        # ``analysis.host.in_memory_overhead``): the finding that names the fix follows it.
        many_small = in_memory_host_bound(host, data_wait(analysis))
    if not tiny and not many_small:
        return None  # no matmul/convolution to size, or one that is real work
    if (
        # A read the step needs (a NaN guard, a forward's branch) stays whatever is fixed: it
        # explains no host time a fix of the reads would remove.
        any(not s.needed for s in loop_lines(facts, facts.syncs))
        or loop_lines(facts, facts.logging)
        or loop_lines(facts, facts.saves)
        # A module or tensor hook's reads run inside the model's call: the hook's reductions are
        # among the "small ops" (unseen round 21's activation_stats_hooks: 60 a step).
        or any(not s.cuda_only for s in facts.registered_hook_reads)
    ):
        return None  # per-step reads, logs or checkpoint saves explain the host time first
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    # Overhead is spread over every phase (dispatch inside forward, backward, optimizer), so no
    # phase share measures it: medium by default, high when Python outside the model is critical
    # across its interval; low where the input rule's own "high" speaks first.

    python = severity_in(analysis, RESIDUAL_PHASES, residual, low=0.0)
    severity: Severity = "high" if python == "high" else "medium"
    if severity_in(analysis, "data", share(analysis, "data")) == "high":
        severity = "low"
    sized_us = sized_op_us(heaviest_us, host)
    factor = batch_factor(sized_us, op_margin(analysis), line_us)
    loader = loader_in_use(facts)
    batch = analysis.step_stats.batch_size
    compiled = uses_compile(facts)
    said = TinyOps(tiny, sized_us, heaviest_us, host, residual, analysis.phases,
                   analysis.step_stats.median_s, batch, factor, None, "compile", compiled)  # fmt: skip
    if facts.tree is not None:
        # Heads called one by one (heads_modulelist: 48 Linear(128, 1) a step, 6.28 ms a step
        # against 0.70 ms as one Linear(128, 48), thread time): the user's change, said first.
        said = dataclasses.replace(said, module_loops=tuple(module_list_loops(facts.tree)))
    sample_loops = loop_lines(facts, facts.per_sample_loops)
    if sample_loops:
        # The model runs once per sample (``for seq, y in batch: model(seq)``): a bigger batch
        # adds calls, each of the same size, and amortizes only the once-a-step work (a batch
        # x8 of such a loop offered at 2.39x-7.24x; the step's calls per sample do not shrink).
        # The fix is the user's: batch the samples into one call (pad or pack them); no patch.
        said = dataclasses.replace(said, outcome="samples", sample_loops=sample_loops)
        return found("launch.tiny_ops", severity, said, line=sample_loops[0].line)
    if loader.known:
        # A loader made anew every epoch pays its start-up once per epoch, which a bigger batch
        # does not share out (workers_respawn: 46% of the step time; 1.15x-1.23x from the data
        # share alone, measured 1.02x-1.13x, undecided in three ledgers).
        starts = per_start_cost(run, analysis, facts)
        bound = bigger_batch_bound(factor, analysis, starts)
        per_sample = per_sample_model_share(analysis, line_us)
        # Where torch's pool is short of cores, the grown operators' parallel regions wait for
        # its threads: the low end takes that (``pool_stretch``); the small-gain gate reads the
        # model's own low end (whether the batch is worth trying is not the load's to say).
        stretch = pool_stretch(analysis)
        gate_low = bigger_batch_gain_low(factor, analysis, per_sample, starts)
        low = bigger_batch_gain_low(factor, analysis, per_sample, starts, stretch)
        folded = folded_accumulation(facts, factor)
        said = dataclasses.replace(said, bound=bound, outcome="batch",
                                   accumulation=folded[0] if folded else None,
                                   accumulation_key=folded[1] if folded else said.accumulation_key,
                                   per_sample=per_sample, low=low, stretch=stretch,
                                   start_ups=None if starts is None else starts.share)  # fmt: skip
        # The small-gain gate reads the low end: a batch whose least gain is within what two
        # runs differ by is said at info, not offered (accum_tqdm's 1.00x, while_next's 1.02x
        # against "up to" 1.24x and 1.14x).
        lows = [
            x for x in (bigger_batch_bound_low(factor, analysis, starts), gate_low) if x is not None
        ]
        return found("launch.tiny_ops", severity, said, bound=bound,
                     line=loader.line, fix_id="bigger_batch",
                     fix_params={"factor": factor, "scale_lr": True}, low=low,
                     bound_low=min(lows, default=None),
                     ceiling=float(factor))  # fmt: skip
    if compiled:
        # Never advise what holds: the model is compiled, and no loader is here to enlarge.
        return found("launch.tiny_ops", severity, dataclasses.replace(said, outcome="compiled"))
    gain = compile_gain(analysis, run.steps.grad_tensors, graph_calls(run))
    if gain is None:
        return found("launch.tiny_ops", severity, said, fix_id="torch_compile")
    said = dataclasses.replace(said, bound=gain.bound, compile=gain)
    if gain.small:
        # What compile surely removes is within what two runs differ by: said, not offered
        # (numpy_list_batch's MLP: up to 1.15x by the bound, 0.95x measured compiled).
        return found("launch.tiny_ops", "info", said)
    if gain.bound is None:  # its own calls may take what it removes: measure it
        return found("launch.tiny_ops", severity, said, fix_id="torch_compile")
    # The small-gain gate reads the bound at the data and optimizer shares' high ends: a model
    # side that is mostly matmul/convolution work leaves compile nothing measurable to remove.
    return found("launch.tiny_ops", severity, said, bound=gain.bound, fix_id="torch_compile",
                 bound_low=gain.bound_low)  # fmt: skip


def graph_calls(run: Run) -> int:
    """How many times a step calls the model's graph: the step clock's backward calls a timed
    step (median; gradient accumulation calls it once a micro-batch), 1 where none was read."""
    calls = sorted(s.backward_calls for s in run.steps.steps if s.timed and s.backward_calls > 0)
    return max(1, calls[len(calls) // 2]) if calls else 1


def compile_gain(
    analysis: Analysis, tensors: int | None = None, calls: int = 1
) -> CompileGain | None:
    """The most ``torch.compile(model)`` can gain on the CPU: Amdahl over what it can take.

    Compiling the model compiles its forward and backward, nothing else: not ``opt.step()``,
    not the data wait, not the host work the loop does around the model (a batch made by hand
    from a list, a loop over the parameters, logging: the rules that name such work give their
    own fix). A compiled graph still calls the same matmuls and convolutions. Bound: the
    model's forward and backward less its matmul/convolution calls by their floors, all
    removed. Over the run, where the step clock timed the data wait and the optimizer step:
    the step less those two (the window's split moves with the profiler's cost and the load,
    nanoGPT's loop measured 2.08x against 1.59x from the model's own window share), of which
    the model takes what it takes of the same in the window (a numpy list parsed every step
    sat outside the model: the step less its optimizer read up to 3.23x, compile measured
    0.95x). No low end: the compiled graph pays its own guards, wrappers and kernel calls,
    which an eager trace does not show (a small MLP read 1.13x, measured 1.09x; a GRU 1.10x,
    measured 1.63x). ``bound_low``: the bound with the data and optimizer shares at their
    intervals' high ends, for the small-gain gate.

    Where the compiled graph's own cost (``COMPILED_CALL_US`` a call, ``COMPILED_TENSOR_US``
    for each of ``tensors`` parameters, both in this machine's floors: ``CompileGain.floors``;
    ``calls`` a step: gradient accumulation calls the graph once a micro-batch, nanoGPT's 2 paid
    +63 us each) reaches half of what the bound removes,
    an estimate off by 2x could take all of it (400 one-element parameters: up to 1.26x by the
    bound, measured 0.92x): no bound, measure it. ``sure``: what compile surely removes (the
    time between the model's operators, ``HostOverhead.model_gaps_us``) less that cost taken
    ``COMPILED_COST_SPREAD`` times (its kernels' own calls, which an eager trace does not
    count: nanogpt_shaped's "surely 1.19x" measured 0.92x near-quiet): where its gain is within
    the 5%, the rest of the bound is operator work the compiled graph runs too, at a cost the
    eager run cannot show (``CompileGain.small``), and no low end holds. None: the host figures
    or the window's phases were not read."""
    host, phases = analysis.host, analysis.phases
    if host is None or host.matmul_floor_us is None:
        return None
    model = shares_sum(analysis, ("forward", "backward"))
    if phases is None or not phases.steps or model is None or model <= 0:
        return None
    # The optimizer's share on the loop thread's CPU clock on a CPU run (``run_optimizer``): the
    # share spread with the wait for a core moved the step's rest, and the bound, with the load.
    data, opt = analysis.run_data, run_optimizer(analysis)
    over_run = opt is not None and opt.steps >= 2 and opt.step_s > 0
    # The window's step less its data wait and optimizer step, and the model's part of it.
    around = 1.0 - (share(analysis, "data") or 0.0) - (share(analysis, "optimizer") or 0.0)
    part = min(1.0, model / around) if around > 0 else 1.0
    if opt is not None and over_run:
        d = data.share if data is not None else 0.0
        d_high = max(data.high_share, d) if data is not None else 0.0
        rest = max(0.0, 1.0 - d - opt.share)
        least = max(0.0, 1.0 - d_high - max(opt.high_share, opt.share)) * part
        step_us = opt.step_s * 1e6
    else:
        rest, least = around, model
        step_us = phases.total_us / len(phases.steps)
    reached = rest * part
    # The matmuls' and the gaps' floors are parts of the model's own floors, read in the same
    # traced steps: against the run's step a loaded window's floors read nanoGPT's matmuls
    # 19%-38% of it (the window's steps ran slower than the run's), a bound of 1.55x under a
    # measured 1.84x; against the window's own-time phases, a window whose steps waited 91% for
    # a core read the MLP's forward and backward 0.17 ms, under its matmuls' 0.53 ms.
    model_us = host.model_floor_us
    if model_us is None:  # an older record: the window's own phases
        window = analysis.window_phases or phases
        model_us = sum(window.phase_total_us.get(p, 0.0) for p in ("forward", "backward"))
        model_us /= max(1, len(window.steps))
    if model_us <= 0:
        return None
    matmul_part = min(1.0, host.matmul_floor_us / model_us)
    matmul = reached * matmul_part
    removed_us = (reached - matmul) * step_us
    calls = max(1, calls)
    # Guards and wrappers are host calls: the estimate in this machine's floors.
    floors = host_floors(host)
    own_us = (
        None
        if tensors is None
        else calls * (COMPILED_CALL_US + COMPILED_TENSOR_US * tensors) * floors
    )
    gaps_us = host.model_gaps_us
    sure = sure_gain = None
    if gaps_us is not None:
        # The graph's own cost as far as it may reach (``COMPILED_COST_SPREAD`` times the lower
        # estimate, every call of the step): the eager gaps are the removed part only where the
        # compiled graph's calls and kernels cost less.
        cost_us = own_us if own_us is not None else calls * COMPILED_CALL_US * floors
        removed = max(0.0, gaps_us - COMPILED_COST_SPREAD * cost_us)
        sure = reached * min(1.0 - matmul_part, removed / model_us)
        sure_gain = gain_bound(sure, analysis)
    gain = CompileGain(reached, matmul, over_run, None, None, tensors, own_us, removed_us,
                       max(0.0, rest - reached), gaps_us, sure, sure_gain, calls,
                       floors)  # fmt: skip
    if own_us is not None and own_us >= removed_us / 2:
        return gain
    bound = gain_bound(reached - matmul, analysis)
    bound_low = gain_bound(max(0.0, least * (1.0 - matmul_part)), analysis)
    return dataclasses.replace(gain, bound=bound, bound_low=bound_low)


def sized_op_us(heaviest_us: float | None, host: HostOverhead | None) -> float:
    """The op a bigger batch is sized by: the larger of the heaviest matmul/convolution and the
    typical operator, so a larger op never gets a larger factor (sizing by the typical op
    whenever the heaviest matmul was real work gave a 25 us matmul x2 and a 49 us one x8)."""
    known = [us for us in (heaviest_us, host.median_op_us if host else None) if us is not None]
    return max(known, default=0.0)


def tiny_op_us(host: HostOverhead | None) -> float:
    """The line an op is tiny under: the host figures' small-operator line (``TINY_OP_US`` in
    this machine's floors on a CPU run, analysis.floor_lines), ``TINY_OP_US`` where not read."""
    return host.small_op_us if host is not None and host.small_op_us > 0 else TINY_OP_US


def batch_factor(sized_us: float, margin: float = 0.0, line_us: float = TINY_OP_US) -> int:
    """The power of two that lifts an op of ``sized_us`` to about a launch gap's work
    (``line_us``: ``TINY_OP_US``, in this machine's floors where read), 2..``MAX_FACTOR``:
    never larger for a larger op.

    ``margin``: what two runs of this code may read the op's size apart by (``op_margin``):
    the op is sized at the high end of that span, so a power is given only where the op needs
    it however the next run reads it. An op read near a line (pad_collate_python's heaviest
    matmul at 13 us in one run and 16 us in the next, x4 and x2 at the point's 15 us line)
    gets the smaller factor in both runs."""
    high_us = max(sized_us, 1e-3) * (1.0 + max(0.0, margin))
    power = math.ceil(math.log2(line_us / high_us))
    return min(MAX_FACTOR, 1 << max(1, power))


# An op's floor is its least call, which load only lengthens: it moves between runs less than
# the step does. The most the step's margin stands for in an op's size: the floors of one
# program's heaviest matmul read 13 us and 16 us in two runs (pad_collate_python, load 5-9).
OP_MARGIN = 0.25


def op_margin(analysis: Analysis) -> float:
    """What two runs of this code may read an op's size apart by: the step's
    (``Analysis.run_margin``, the spread of the run's fifths' typical steps; ``RUN_TO_RUN``
    where the run had too few steps), at most ``OP_MARGIN``."""
    margin = analysis.run_margin if analysis.run_margin is not None else RUN_TO_RUN
    return min(OP_MARGIN, margin)


def folded_accumulation(facts: SourceFacts, factor: int) -> tuple[int, str] | None:
    """The cell's gradient accumulation steps and the keyword that sets them (accelerate's
    ``Accelerator``, HF ``TrainingArguments``, Lightning's ``Trainer``) when every such setting
    is one literal ``factor`` divides: the bigger batch then folds micro-batches
    (fixes/codemods_data._accumulation_folded reads the same)."""
    steps = [(v, k) for c, k, v in facts.framework_settings if k in ACCUMULATION_KEYS]
    # A framework's default of 1 where no call sets it (a Lightning Trainer beside an
    # accelerate loop) is no accumulation; only the settings above 1 fold.
    set_ = [(v, k) for v, k in steps if v != 1]
    if not set_ or not all(
        isinstance(v, int) and v >= factor and v % factor == 0 for v, _k in set_
    ):
        return None
    first, key = set_[0]
    return (first, key) if isinstance(first, int) and all(v == first for v, _ in set_) else None


def unfused_optimizer(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The optimizer updates each parameter tensor with its own small ops."""
    profiled = share(analysis, "optimizer")
    # On the CPU: the update's own CPU time over the steps' own time (``run_optimizer``).
    whole = run_optimizer(analysis)
    optimizer = whole.share if whole is not None else profiled
    # Present and levelled by the share's interval (over the run where the step clock timed it).
    whole_level = level_in(analysis, "optimizer", optimizer, low=WARN, medium=0.20, high=0.20)
    if optimizer is None or whole_level is None:
        return None
    # (class, line, name, fused, foreach, whether its update is one pass a tensor): the cell's
    # optimizers first, then the live ones the cell uses and does not re-make (a GAN whose cell
    # re-makes D's optimizer still steps G's from an earlier cell: the patch cannot reach it)
    built = [(c.cls, c.line, c.name, c.fused, c.foreach, c.one_pass) for c in facts.optimizers]
    made_here = {c.name for c in facts.optimizers}
    live = [(o.type_name, None, o.name, o.fused, o.foreach, o.one_pass)
            for o in facts.live.optimizers if o.name not in made_here]  # fmt: skip
    usable = [
        (cls, line, name, one_pass, foreach is True)
        for cls, line, name, fused, foreach, one_pass in built + live
        if fused is not True
        and (foreach is not True or cls in FUSED_OPTIMIZERS)
        and cls in FOREACH_OPTIMIZERS
    ]
    if not usable:
        return None
    cls, line, name, one_pass, foreach_made = usable[0]
    # The other unfused optimizers of earlier cells: the patch leaves them as they are.
    others = tuple(n for _c, ln, n, _o, _f in usable[1:] if ln is None and n is not None)
    implementation: Literal["fused", "foreach"] = "fused" if cls in FUSED_OPTIMIZERS else "foreach"
    # The step clock times every optimizer's step together: one the fix leaves as it is (a class
    # without the flag, one already fused) holds part of that time, in a split not measured: the
    # whole update still bounds what the patch can take, no floor does.
    reach = FUSED_OPTIMIZERS if implementation == "fused" else FOREACH_OPTIMIZERS
    beside = tuple(
        dict.fromkeys(c for c, _, _, fused, _, _ in built + live if fused is True or c not in reach)
    )
    # The trace's per-optimizer ranges split that time: the fix is bounded by the part of the
    # classes it reaches (the patch: the cell's; the flag passed where each is made: all of them).
    # A class the fix reaches in one optimizer and not in another counts as reached: the bound
    # stays a ceiling. The level is the reached part's: under it, the flag is not worth offering.
    reached_classes = {
        c for c, ln, _n, _o, _f in usable if c in reach and (ln is not None or line is None)
    }
    part, split = _reached_part(analysis, reached_classes, over_run=whole is not None)
    source = analysis.optimizers.source if analysis.optimizers is not None else "trace"
    split_steps = analysis.optimizers.steps if analysis.optimizers is not None else 0
    level: Level | None = whole_level
    if part is not None:
        level = level_in(analysis, "optimizer", optimizer, low=WARN, medium=0.20, high=0.20,
                         part=part)  # fmt: skip
        if level is None:
            said = UnfusedOptimizer(cls, name, implementation, line is not None, optimizer,
                                    profiled, whole, analysis.phases, None, None, None,
                                    others=others, beside=beside, split=split, reached=part,
                                    split_source=source, split_steps=split_steps)  # fmt: skip
            return found("launch.unfused_optimizer", "info", said, phase_share=optimizer, line=line)
    if not has_gpu(run):
        why = _no_cpu_gain(implementation, one_pass)
        if why is not None:
            said = UnfusedOptimizer(cls, name, implementation, line is not None, optimizer,
                                    profiled, whole, analysis.phases, None, None, why)  # fmt: skip
            return found("launch.unfused_optimizer", "info", said, phase_share=optimizer, line=line)
    # On a GPU the fused kernels leave next to nothing of the update's launches; on the CPU a
    # fused step keeps its fixed cost, a call a tensor and one pass over the bytes: only the
    # rest of the update is the fix's to remove (subset_eval_break's MLP: 36% kept, 1.23x
    # measured against 1.34x-1.40x from the whole update).
    # The tensors of the optimizer the flag reaches, not those of another class that stepped
    # first (SparseAdam's one embedding table read as Adam's).
    tensors, size = run.steps.grad_tensors, run.steps.grad_bytes
    if cls in run.steps.optimizer_tensors:
        tensors, size = run.steps.optimizer_tensors[cls]
    # Against the foreach step where the optimizer was made with foreach=True (a foreach user's
    # fused gain is smaller: heads_modulelist's 98 tensors kept 27-32% of it, 15-19% of the for-loop).
    kept = None if has_gpu(run) else fused_cpu_kept(cls, tensors, size, foreach=foreach_made)
    removed = 1.0 - (kept or 0.0)
    # The unfused update's page faults (its temporaries' fresh pages, and the next step's
    # gradients faulting in the heap they left trimmed) are the fused step's to remove whole:
    # the high end takes them as the step clock counted and priced them (save_every_step's Adam:
    # 60% of its update's time; fused 1.21x measured over a 1.16x high end without them).
    faults = None if kept is None else update_faults(run.steps, reached_classes or {cls})
    # The high end also takes what the temporaries cost the step's other phases (a ceiling:
    # ``fused_update.outside_part``); the small-gain gate below stays on the update's own part,
    # so no fix is offered on that ceiling alone.
    removed_own = removed if kept is None else fused_removed_high(kept, faults)
    removed_high = removed if kept is None else fused_removed_high(kept, faults, cls)
    low_share = min(whole.low_share, optimizer) if whole is not None else None
    low, bound = gain_range(
        None if low_share is None else low_share * removed,
        optimizer * removed_high * (1.0 if part is None else part),
        analysis,
    )
    # The bound with the share at its interval's low end, for the small-gain gate, where that
    # interval is narrower than what two runs differ by: a steady share, whose range is the
    # bound's own precision. A fix whose point bound sits at the 5% line (lr_finder_runs' fused
    # SGD: 9.9%-11.1% of the step over four runs, 48% of it removed, 1.050x-1.056x) was small
    # in one run and tried in the next (measured 0.94x, and 0.92x undecided at load 14); its
    # interval reaching the line makes it small in both. A wide interval is the program's own
    # spread (an update every ninth step: a run may catch more or fewer): uncertain, tried.
    reached_part = 1.0 if part is None else part
    bound_low = (
        None if low_share is None else gain_bound(low_share * removed_own * reached_part, analysis)
    )
    bound_own = gain_bound(optimizer * removed_own * reached_part, analysis)
    if (
        bound_low is not None
        and bound_own is not None
        and bound_own > bound_low * (1.0 + RUN_TO_RUN)
    ):
        bound_low = None
    if (others and line is not None) or beside or (part is not None and part < 1.0):
        low = None  # the patch reaches part of the update: no floor to claim, the bound stays
    said = UnfusedOptimizer(cls, name, implementation, line is not None, optimizer, profiled,
                            whole, analysis.phases, low, bound, None, kept, tensors,
                            size, others, beside, split, part, source, split_steps,
                            made_before=all(o.made_before for o in facts.live.optimizers),
                            made_in=_made_in(facts.live.optimizers),
                            faults=faults, faults_off=_faults_off(run, kept, faults),
                            outside=0.0 if kept is None else outside_part(cls, kept))  # fmt: skip
    elsewhere = ",".join(((name,) if line is None and name is not None else ()) + others)
    made_in = {o.name: o.made_in for o in facts.live.optimizers}
    cells = ",".join(str(made_in.get(n) or "") for n in elsewhere.split(",") if n)
    assert level is not None  # the whole update's level, or its reached part's
    shown = Level(_update_level(level.least), _update_level(level.most))
    return found("launch.unfused_optimizer", shown, said,
                 phase_share=optimizer, bound=bound, line=line, fix_id="foreach_fused_optimizer",
                 fix_params={"implementation": implementation} | ({"elsewhere": elsewhere, "cells": cells} if elsewhere else {}),
                 low=low, bound_low=bound_low)  # fmt: skip


def _update_level(level: Severity) -> Severity:
    """The fused update's level from its share's: medium where the share clears the 20% line,
    else low (a fix of the update alone is no more than medium)."""
    return "medium" if level == "high" else "low"


def _reached_part(
    analysis: Analysis, reached: set[str], *, over_run: bool
) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """The part of the optimizer time the ``reached`` classes take (``Analysis.optimizers``),
    over what the rule's share holds (``over_run``: ``step`` alone; else ``zero_grad`` too);
    and each class's part. (None, ()): no split."""

    split = analysis.optimizers
    if split is None:
        return None, ()
    part = split.step_part(reached) if over_run else split.phase_part(reached)
    if part is None:
        return None, ()
    each = tuple(
        (c.cls, p)
        for c in split.classes
        if (p := (split.step_part if over_run else split.phase_part)((c.cls,))) is not None
    )
    return part, each


def _no_cpu_gain(implementation: str, one_pass: bool) -> Literal["foreach", "one-pass"] | None:
    """Why a fused or foreach update would not be faster on CPU tensors (None: it may be).
    torch has no CPU foreach kernels: foreach=True runs the same per-tensor loop. Fused CPU
    kernels pay where the unfused update makes several passes over each tensor (nanoGPT's AdamW
    measured 1.15x), not where it makes one (plain SGD's ``add_``: measured 0.84x)."""
    if implementation == "foreach":
        return "foreach"
    return "one-pass" if one_pass else None


TIE = 60  # where its findings tie: the verdict table's order (rules._families)
RULES = (gpu_starved, tiny_ops, unfused_optimizer)


def _made_in(optimizers: Sequence[LiveOptimizer]) -> tuple[int, ...]:
    """The cells that made the live optimizers (In[N], in order, once each); () unless every
    one's is known."""
    cells = [o.made_in for o in optimizers]
    if not cells or any(c is None for c in cells):
        return ()
    return tuple(dict.fromkeys(c for c in cells if c is not None))
