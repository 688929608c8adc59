"""Facade: turn one Run into an Analysis (trace figures when a window recorded, hooks otherwise)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from gpu_notebook.analysis.cell_time import cell_time
from gpu_notebook.analysis.compare_samples import run_margin
from gpu_notebook.analysis.interference import (
    in_step_waits,
    marked_waits,
    own_time_phases,
    wait_share,
)
from gpu_notebook.analysis.machine import machine_facts
from gpu_notebook.analysis.own_cost import disturbed_steps, instrumentation_factor
from gpu_notebook.analysis.steps import hook_phases, run_phase, steady_steps, step_stats
from gpu_notebook.analysis.utilization import run_utilization
from gpu_notebook.analysis.work_spread import lean_work, timed_work
from gpu_notebook.records import (
    Analysis,
    CpuBf16Casts,
    GpuTimeline,
    HostOverhead,
    LoopPython,
    OpStat,
    OptimizerSplit,
    ParamOps,
    PeriodicCost,
    PhaseBreakdown,
    Recompute,
    Run,
    RunShape,
    ScalerOps,
    StepTiming,
)
from gpu_notebook.traces.kineto import Trace
from gpu_notebook.traces.windows import WindowTraces


def analyze(run: Run, traces: WindowTraces | None = None) -> Analysis:
    """``traces``: the report's decoded window traces (a fresh set: each file decoded here)."""
    traces = WindowTraces() if traces is None else traces
    warmup = run.window.warmup_steps
    phases: PhaseBreakdown | None = None
    gpu: GpuTimeline | None = None
    ops: tuple[OpStat, ...] = ()
    host: HostOverhead | None = None
    recomputed: Recompute | None = None
    scaler: ScalerOps | None = None
    cpu_casts: CpuBf16Casts | None = None
    # Each traced step's wait for a core as the window read it at its own step marks: the
    # host figures and the phases' own time both read it (the step clock's where it is None).
    marked = marked_waits(run.window)
    optimizers: OptimizerSplit | None = None
    loop_python: LoopPython | None = None
    params: ParamOps | None = None
    if run.window.trace_path is not None and run.window.recorded_steps > 0:
        # Each step's wait for a core, where the step clock read it: the host figures take
        # what of it fell between calls out of the gaps (it is no Python).
        waits = {s.index: wait_share(s) for s in run.steps.steps if s.wait_s}
        phases, gpu, ops, host = trace_figures(traces.load(run.window.trace_path), waits, marked)
        from gpu_notebook.analysis.recompute import recompute as read_recompute

        recomputed = read_recompute(traces.load(run.window.trace_path), phases)
        from gpu_notebook.analysis.amp_scaler import scaler_ops

        scaler = scaler_ops(traces.load(run.window.trace_path), phases)
        from gpu_notebook.analysis.cpu_bf16_casts import cpu_bf16_casts

        cpu_casts = cpu_bf16_casts(traces.load(run.window.trace_path), phases)
        from gpu_notebook.analysis.optimizer_split import optimizer_split

        optimizers = optimizer_split(traces.load(run.window.trace_path), phases)
        from gpu_notebook.analysis.param_cached import param_ops

        params = param_ops(traces.load(run.window.trace_path), phases, run.stacks)
        loop_python = _loop_python(run, traces)
    elif run.window.trace_path is not None and run.window.status == "within-step":
        # Calls inside a step, no whole step: its operator totals hold for the window, and the
        # host figures of its calls for the steps they make up (``within_step_host``).
        from gpu_notebook.analysis.ops import top_ops

        ops = top_ops(traces.load(run.window.trace_path), n=10)
        host = within_step_host(run, traces.load(run.window.trace_path))
    if phases is None:
        phases = hook_phases(run.steps, warmup)
    if phases is not None:
        # Each step's wait for a core taken off the phases it went to: the split the code ran.
        phases = own_time_phases(phases, run.steps.steps, marked)
        if recomputed is not None:
            # The recompute's pieces are each at their least over the steps (a time slice lost
            # to another process left out); the steps' time is theirs less the wait read at
            # their marks: both the code's own (issue 26: at load 12-27 the wall times moved
            # the bound 1.15x-1.90x, a profiled step of 170 ms for 13 ms of its own).
            from gpu_notebook.analysis.recompute import with_own_steps

            recomputed = with_own_steps(recomputed, phases)
    if recomputed is not None and not recomputed.on_device:
        unprofiled = unprofiled_step_us(run)
        if unprofiled is not None:
            recomputed = dataclasses.replace(
                recomputed, unprofiled_steps_us=unprofiled * recomputed.steps
            )
    shape, phases, window_phases = _whole_run(run, phases, traces, gpu)
    stacks = None
    if run.stacks is not None and run.stacks.samples > 0:
        from gpu_notebook.analysis.lines import stack_profile

        stacks = stack_profile(run.stacks, None, run.cell_source, first_line=run.first_line)
    analysis = Analysis(
        step_stats=step_stats(run.steps, warmup),
        phases=phases,
        gpu=gpu,
        utilization=run_utilization(run),
        top_ops=ops,
        stacks=stacks,
        host=host,
        shape=shape,
        window_phases=window_phases,
        recompute=recomputed,
        scaler=scaler,
        cpu_casts=cpu_casts,
        optimizers=optimizers,
        loop_python=loop_python,
        param_ops=params,
    )
    return with_run_figures(run, analysis)


# Unprofiled steps needed for their median to stand for the run's step.
UNPROFILED_STEPS = 5


def unprofiled_step_us(run: Run) -> float | None:
    """The median own time of the run's steps that ran unprofiled (after the warm-up, none of
    our work in them, each less its wait for a core where read: the code's, as the traced
    steps' time is), in us; None: fewer than ``UNPROFILED_STEPS`` such steps."""
    ours = disturbed_steps(run)
    steps = steady_steps(run.steps, run.window.warmup_steps)
    # A wait read across a step end is the next step's (``in_step_waits``).
    own = [
        s.duration_s - w
        for s, w in zip(steps, in_step_waits(steps), strict=True)
        if s.index not in ours and s.duration_s > w
    ]
    if len(own) < UNPROFILED_STEPS:
        return None
    return float(np.median(own)) * 1e6


def with_run_figures(run: Run, analysis: Analysis) -> Analysis:
    """``analysis`` with the figures of the whole run beside the window's: the data wait and the
    optimizer step as the step clock timed them outside the profiled windows (``run_phase``:
    the workers and fused-optimizer bounds rest on them), how much longer a profiled step took
    than an unprofiled one, the rest of the machine's load, and the process's own threads on a
    core beside the loop."""
    from gpu_notebook.analysis.optimizer_split import clock_split
    from gpu_notebook.analysis.own_threads_spin import side_threads

    warmup, ours = run.window.warmup_steps, disturbed_steps(run)
    on_gpu = run.env.cuda_available or bool(run.env.gpus) or analysis.gpu is not None
    machine = machine_facts(run, analysis.utilization.in_steps)
    return dataclasses.replace(
        analysis,
        run_data=run_phase(run.steps, warmup, "data", ours),
        run_optimizer=run_phase(run.steps, warmup, "optimizer", ours, cpu_clock=not on_gpu),
        run_forward=run_phase(run.steps, warmup, "forward", ours),
        optimizers=clock_split(run.steps, analysis.optimizers, on_gpu=on_gpu)
        or analysis.optimizers,
        profiling_factor=instrumentation_factor(run),
        machine=machine,
        side_threads=side_threads(run, machine),
        run_margin=run_margin(_margin_steps(run, warmup, ours, _queue_filling_below(analysis))),
        periodic=_periodic(run),
        cell_time=cell_time(run),
    )


# The settings that make a framework's loop log every N steps (the cell's literals), and the
# cell's own periodic blocks.
PERIODIC_SETTINGS = (("TrainingArguments", "logging_steps"), ("Trainer", "log_every_n_steps"))


def _periodic(run: Run) -> tuple[PeriodicCost, ...]:
    """The cost of the logging the cell sets to run every N steps (N >= 2), from the step clock
    (``run_trend.periodic_cost``): one per period its steps are slower at."""
    from gpu_notebook.analysis.run_trend import periodic_cost
    from gpu_notebook.cell.scan import CELL_LINE_OFFSET, scan_source

    if not run.cell_source or len(run.steps.steps) < 2:
        return ()
    from gpu_notebook.cell.blocks import periodic_blocks

    facts = scan_source(run.cell_source, line_offset=CELL_LINE_OFFSET)
    periods = {facts.framework_setting(cls, key) for cls, key in PERIODIC_SETTINGS}
    # A plain loop's own `if step % N == 0:` blocks (a print of the loss every N steps).
    periods |= {b.every for b in periodic_blocks(facts.tree)}
    costs = (periodic_cost(run, p) for p in sorted(p for p in periods if type(p) is int and p >= 2))
    return tuple(c for c in costs if c is not None)


def _queue_filling_below(analysis: Analysis) -> float | None:
    """Steps at the start of a GPU-paced run faster than this only filled CUDA's launch queue
    (the host ran ahead); None when the run is not GPU-paced."""
    from gpu_notebook.analysis.run_trend import LIKE_FACTOR

    shape = analysis.shape
    if shape is None or not shape.window_gpu_paced or shape.window_median_s is None:
        return None
    return shape.window_median_s / LIKE_FACTOR


def _margin_steps(
    run: Run, warmup: int, ours: frozenset[int], filling_below_s: float | None = None
) -> list[float]:
    """The steady steps our own work left alone, in order, of one kind (timed by the hooks or
    lean, whichever the run has more of: the hooks' cost is no difference between runs) and of
    one work (``_one_work``).

    ``filling_below_s``: the leading steps faster than this are left out, the host filling the
    launch queue of a GPU-paced run (2.6 ms steps before 31.7 ms ones on an H200 read as a run
    whose fifths differ 11x: every fix's range was widened 2.4x on each side).
    """
    steps = [s for s in steady_steps(run.steps, warmup) if s.index not in ours]
    if filling_below_s is not None:
        first = next((i for i, s in enumerate(steps) if s.duration_s >= filling_below_s), 0)
        steps = steps[first:]
    timed = [s for s in steps if s.timed]
    lean = [s for s in steps if not s.timed]
    kept = _one_work(timed, timed_work) if len(timed) >= len(lean) else _one_work(lean, lean_work)
    return [margin_step_s(s) for s in kept]


def margin_step_s(step: StepTiming) -> float:
    """A step's time as the run's margin reads it: its wall time less our own work in it and
    less its thread's wait for a core where the step clock read one (schedstat at the step's
    end; a step without a reading keeps its wall time). The wait is the machine's other
    processes' share of the step, and it grows with their load: on wall times the same
    program's margin read 102-729% at load 22-30 (lbfgs_closure's one-call steps) and a few
    percent idle, so every fix's stated range widened with the load of the moment. Net of the
    wait, the margin is the program's own spread (sleeping, I/O, the GPU stay in it), as the
    trials' and the before/after's own times compare it (``interference.counted_step_times``)."""
    return max(0.0, step.duration_s - step.ours_s - (step.wait_s or 0.0))


def _one_work(
    steps: list[StepTiming], work: Callable[[StepTiming], tuple[int | None, ...]]
) -> list[StepTiming]:
    """The steps of the run's most common work (``work``: its count of model calls, a
    closure's calls, loader reads), in order, where they are enough to read a margin from
    (``MARGIN_PARTS`` x ``MARGIN_PART_STEPS``); all of them otherwise. Steps that do a
    different amount of work do so the same in every run of this code: LBFGS's closure called 5
    times a step until its line search converges, then once (lbfgs_closure: fifths of 33 ms and
    7 ms steps read "two runs differ by 350-500%", a log throttle's "up to 1.06x" said as "up
    to 4.76x"; its steps gone lean, ±49% while lean steps carried no count), a curriculum that
    raises its accumulation, an every-N-steps validation pass. What two runs differ by is the
    machine's, read between steps of one work."""
    from collections import Counter

    from gpu_notebook.analysis.compare_samples import MARGIN_PART_STEPS, MARGIN_PARTS

    counts = Counter(work(s) for s in steps)
    if len(counts) < 2:
        return steps
    most, n = counts.most_common(1)[0]
    if n < MARGIN_PARTS * MARGIN_PART_STEPS:
        return steps
    return [s for s in steps if work(s) == most]


def _whole_run(
    run: Run,
    phases: PhaseBreakdown | None,
    traces: WindowTraces | None = None,
    gpu: GpuTimeline | None = None,
) -> tuple[RunShape | None, PhaseBreakdown | None, PhaseBreakdown | None]:
    """The run's shape, and the phase split the verdict should rest on.

    Windows unlike most of the run, with hook timings over most of it: the hook split of every
    timed step (each weighing its time), the window's detail beside. Several profiled windows:
    their splits weighted by the time each stands for. Otherwise the window's split as it is.
    """
    from gpu_notebook.analysis.run_trend import (
        combine_windows,
        data_split_phases,
        run_shape,
        whole_run_phases,
    )

    shape = _gpu_paced(run_shape(run), gpu, phases)
    if shape is not None and phases is not None and phases.source == "hooks":
        # No trace: the timed steps' split, unless they are a small part of a run that went
        # lean; then every step's data wait, the timed steps' split of the rest.
        weight = max(1, run.steps.decimation)
        if run.steps.lean_data and phases.total_us / 1e6 * weight < 0.5 * shape.total_s:
            split = data_split_phases(
                run.steps, run.window.warmup_steps, shape, phases, disturbed_steps(run)
            )
            if split is not None:
                return shape, split, phases
        return shape, phases, None
    if shape is None or phases is None or phases.source != "trace":
        return shape, phases, None
    # Each window's split: the first window's is ``phases``; a later one's from its own trace,
    # on its steps' own time as the first's (each less the wait read at its own step marks,
    # the step clock's where it has none): combine_windows weighs the windows on own time, and
    # a later window on wall time let its waits speak as whichever phase they fell in.
    windows: list[tuple[int, int, PhaseBreakdown]] = []
    traces = WindowTraces() if traces is None else traces
    for k, w in enumerate(run.windows):
        if w.first_step is None:
            continue
        if k == 0:
            windows.append((w.first_step, w.recorded_steps, phases))
        elif w.trace_path is not None and w.recorded_steps > 0:
            more = trace_figures(traces.load(w.trace_path))[0]
            if more is not None:
                own = own_time_phases(more, run.steps.steps, marked_waits(w))
                windows.append((w.first_step, w.recorded_steps, own))
    if shape.represents is False:
        hooks = whole_run_phases(run.steps, run.window.warmup_steps, shape)
        if hooks is not None:
            return shape, hooks, phases
        # Steps too short to keep every phase timed still carry their data wait: the run
        # decides the input question, never the window it does not resemble.
        split = data_split_phases(
            run.steps, run.window.warmup_steps, shape, phases, disturbed_steps(run)
        )
        if split is not None:
            return shape, split, phases
    if len(windows) > 1:
        combined = combine_windows(run.steps, run.window.warmup_steps, windows)
        if combined is not None:
            return shape, combined, phases
    return shape, phases, None


def _gpu_paced(
    shape: RunShape | None, gpu: GpuTimeline | None, phases: PhaseBreakdown | None
) -> RunShape | None:
    """The window's pace is the GPU's when the host ran ahead of it.

    With no sync in the step the host issues the profiled steps faster than the GPU runs them
    (the launch queue fills only after a few steps: an fp32 MLP on an H200 issued steps 2-4 at
    2.7 ms each, while every step of the run took 31.7 ms, the host then blocked on the full
    queue). The window's steps are the run's; their pace is the GPU's time for their work: the
    GPU timeline's window (which opens after the work launched before the trace).

    On a partial timeline whose unclocked work may have run past the clocked work's end
    (``GpuTimeline.unclocked_tail``) the GPU's pace is only known to be at least the clocked
    window's (``gpu_bounds``): the window represents the run where it does at every pace from
    there up; where it does at some and not others, which is not known (``window_undecided``).
    """
    from gpu_notebook.analysis.run_trend import LIKE_FACTOR

    open_end = gpu is not None and gpu.partial and gpu.unclocked_tail > 0
    if (
        shape is None
        or shape.represents is not False
        or shape.window_median_s is None
        or gpu is None
        or (gpu.host_ahead_us <= 0 and not open_end)
        or phases is None
        or phases.source != "trace"
        or not phases.steps
    ):
        return shape
    pace_s = gpu.window_us / len(phases.steps) / 1e6
    run_s = shape.window_run_median_s
    if open_end:
        # Paces from ``pace_s`` up: the window represents the run at none of them only where the
        # least is past the run's like range, or the host's own steps already are.
        if max(pace_s, shape.window_median_s) > run_s * LIKE_FACTOR:
            return shape
        return dataclasses.replace(shape, represents=None, window_undecided=True)
    if pace_s <= shape.window_median_s or not run_s / LIKE_FACTOR <= pace_s <= run_s * LIKE_FACTOR:
        return shape
    return dataclasses.replace(
        shape, represents=True, window_median_s=pace_s, window_gpu_paced=True
    )


def analyze_trace_file(
    path: str,
) -> tuple[PhaseBreakdown | None, GpuTimeline | None, tuple[OpStat, ...]]:
    """Phases, GPU timeline and top operators of one Kineto trace file."""
    from gpu_notebook.traces.kineto import load_trace

    return trace_figures(load_trace(path))[:3]


def within_step_host(run: Run, trace: Trace) -> HostOverhead | None:
    """The host overhead of a window that recorded calls inside a step (``within-step``: a MAML
    meta-step's inner ``torch.autograd.grad`` calls, an LBFGS step's closure calls, the
    micro-batches of a long accumulation), read over those calls: each is the step's work in
    small (its forward and backward, dispatched op by op), so its shares (Python between
    operators, small operators) are the step's. The counts a step are a call's times the
    backward calls the step clock timed in a whole step (median). None: nothing read.

    Without it a MAML loop of ops of a few us read cpu-only, "its time goes to compute", from
    the hook timings alone (unseen round 8)."""
    from gpu_notebook.analysis.host import host_overhead
    from gpu_notebook.analysis.phases import find_host_thread, phase_breakdown

    calls_phases = phase_breakdown(trace)
    if calls_phases is None or not calls_phases.steps:
        return None
    waits = run.window.step_waits_s
    window_waits = (
        {c.index: w for c, w in zip(calls_phases.steps, waits, strict=False)}
        if waits is not None and len(waits) >= len(calls_phases.steps)
        else None
    )
    host = host_overhead(trace, calls_phases, find_host_thread(trace), None, window_waits)
    calls = sorted(s.backward_calls for s in run.steps.steps if s.backward_calls > 0)
    if host is None or not calls:
        return host
    per_step = calls[len(calls) // 2]
    return dataclasses.replace(
        host,
        ops_per_step=host.ops_per_step * per_step,
        matmul_floor_us=None if host.matmul_floor_us is None else host.matmul_floor_us * per_step,
        model_gaps_us=None if host.model_gaps_us is None else host.model_gaps_us * per_step,
        model_floor_us=None if host.model_floor_us is None else host.model_floor_us * per_step,
    )


def _loop_python(run: Run, traces: WindowTraces) -> LoopPython | None:
    """The loop body's own work before the model in every window's traced steps, each step's
    wait for a core as its window read it (the step clock's where the window did not)."""
    from gpu_notebook.analysis.python_work import loop_python, merged

    clocked = {s.index: s.wait_s for s in run.steps.steps if s.wait_s}
    parts = []
    for w in run.windows:
        if w.trace_path is None or w.recorded_steps <= 0:
            continue
        waits = marked_waits(w) or clocked
        part = loop_python(traces.load(w.trace_path), waits)
        if part is not None:
            parts.append(part)
    return merged(parts)


def trace_figures(
    trace: Trace,
    waits: Mapping[int, float] | None = None,
    window_waits_s: Mapping[int, float] | None = None,
) -> tuple[PhaseBreakdown | None, GpuTimeline | None, tuple[OpStat, ...], HostOverhead | None]:
    """``analyze_trace_file``'s figures and the host overhead of the traced steps (``waits``:
    each step's share waiting for a core, by step index; ``window_waits_s``: each traced
    step's wait read at its marks; ``host_overhead``'s)."""
    from gpu_notebook.analysis.gpu_timeline import gpu_timeline
    from gpu_notebook.analysis.host import host_overhead
    from gpu_notebook.analysis.ops import top_ops
    from gpu_notebook.analysis.phases import find_host_thread, phase_breakdown

    phases = phase_breakdown(trace)
    host = host_overhead(trace, phases, find_host_thread(trace), waits, window_waits_s)
    return phases, gpu_timeline(trace), top_ops(trace, n=10), host
