"""Facade: turn one Run into an Analysis (trace figures when a window recorded, hooks otherwise)."""

from __future__ import annotations

from typing import Any

from gpu_notebook.analysis.steps import hook_phases, step_stats
from gpu_notebook.analysis.utilization import utilization_stats
from gpu_notebook.records import Analysis, GpuTimeline, HostOverhead, OpStat, PhaseBreakdown, Run


def analyze(run: Run) -> Analysis:
    warmup = run.window.warmup_steps
    phases: PhaseBreakdown | None = None
    gpu: GpuTimeline | None = None
    ops: tuple[OpStat, ...] = ()
    host: HostOverhead | None = None
    if run.window.trace_path is not None and run.window.recorded_steps > 0:
        phases, gpu, ops, host = trace_figures(run.window.trace_path)
    if phases is None:
        phases = hook_phases(run.steps, warmup)
    stacks = None
    if run.stacks is not None and run.stacks.samples > 0:
        from gpu_notebook.analysis.lines import stack_profile

        stacks = stack_profile(run.stacks, None, run.cell_source, first_line=run.first_line)
    return Analysis(
        step_stats=step_stats(run.steps, warmup),
        phases=phases,
        gpu=gpu,
        utilization=utilization_stats(run.samples),
        top_ops=ops,
        stacks=stacks,
        host=host,
    )


def analyze_trace_file(
    path: str, trace: Any = None
) -> tuple[PhaseBreakdown | None, GpuTimeline | None, tuple[OpStat, ...]]:
    """Phases, GPU timeline and top operators of one Kineto trace file (or its loaded Trace)."""
    return trace_figures(path, trace)[:3]


def trace_figures(
    path: str, trace: Any = None
) -> tuple[PhaseBreakdown | None, GpuTimeline | None, tuple[OpStat, ...], HostOverhead | None]:
    """``analyze_trace_file``'s figures and the host overhead of the traced steps."""
    from gpu_notebook.analysis.gpu_timeline import gpu_timeline
    from gpu_notebook.analysis.host import host_overhead
    from gpu_notebook.analysis.ops import top_ops
    from gpu_notebook.analysis.phases import find_host_thread, phase_breakdown
    from gpu_notebook.trace.kineto import load_trace

    if trace is None:
        trace = load_trace(path)
    phases = phase_breakdown(trace)
    host = host_overhead(trace, phases, find_host_thread(trace))
    return phases, gpu_timeline(trace), top_ops(trace, n=10), host
