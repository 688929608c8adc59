"""The typical steps of a profiled window: stalled steps left out of the phase split.

Shared by the verdict and the rules, so that both decide on the same steps; the rules size
operators over those steps too (``with_steady_ops``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpu_notebook.records import Analysis, OpStat, PhaseBreakdown, Run
from gpu_notebook.traces.kineto import Trace
from gpu_notebook.traces.windows import WindowTraces

__all__ = [
    "STALL_FACTOR",
    "STALL_MAX_FRACTION",
    "steady_top_ops",
    "with_steady_ops",
    "without_stalls",
]

# A profiled step longer than this many times the median is a stall (GC, another process, the
# profiler's own start-up) when a minority of the steps show it; our choice, stated in the
# evidence. The diagnosis then describes the typical step; the bound still counts every step.
STALL_FACTOR = 3.0
STALL_MAX_FRACTION = 0.5


def without_stalls(analysis: Analysis) -> tuple[Analysis, int]:
    """The analysis with stalled profiled steps left out of the phase split, and how many.

    On a small machine one step of a window can take 10-50x the others (seen on 2 cores: a
    single 8 ms pause in a 0.4 ms step), and one such step decides the shares of a short window.
    Steps over ``STALL_FACTOR`` x the median are dropped when they are a minority of the steps
    (on a shared 2-core machine 3 of 8 steps were seen to stall for 10-30 ms); the bounds are
    computed with them too and the larger one is given (see ``run_rules``).
    """
    phases = analysis.phases
    if phases is None or len(phases.steps) < 4 or analysis.window_phases is not None:
        # A whole-run estimate (analysis/run_trend.py) stands for every step, stalls included,
        # and its steps are scaled to the time they stand for: none is a stall to leave out.
        return analysis, 0
    durations = sorted(s.duration_us for s in phases.steps)
    mid = len(durations) // 2
    median = durations[mid] if len(durations) % 2 else (durations[mid - 1] + durations[mid]) / 2
    kept = [s for s in phases.steps if s.duration_us <= STALL_FACTOR * median]
    dropped = len(phases.steps) - len(kept)
    if dropped == 0 or dropped >= STALL_MAX_FRACTION * len(phases.steps):
        return analysis, 0
    totals: dict[str, float] = {}
    for step in kept:
        for name, value in step.phase_us.items():
            totals[name] = totals.get(name, 0.0) + value
    trimmed = dataclasses.replace(
        phases,
        steps=tuple(kept),
        total_us=sum(s.duration_us for s in kept),
        phase_total_us=totals,
    )
    return dataclasses.replace(analysis, phases=trimmed), dropped


def with_steady_ops(steady: Analysis, run: Run, traces: WindowTraces | None = None) -> Analysis:
    """``steady`` (``without_stalls``'s analysis of ``run``) with its top operators over the kept
    steps only (``steady_top_ops``), from the window's trace in ``traces`` (the report's decoded
    traces; without them the file is decoded here); as it is without a trace or its phase split."""
    path = run.window.trace_path
    if steady.phases is None or path is None or run.window.recorded_steps == 0:
        return steady
    traces = WindowTraces() if traces is None else traces
    ops = steady_top_ops(traces.get(path), steady.phases)
    if ops is None:
        return steady
    # The typical call is the window's (every call's median, as the verdict reads it in
    # analysis.host.host_bound): a median needs no stall left out, and the rule that sizes the
    # ops (launch.tiny_ops) must read the verdict's figure or the two disagree near 30 us.
    window = {(o.name, o.device): o.median_self_us for o in steady.top_ops}
    ops = tuple(
        o
        if window.get((o.name, o.device)) is None
        else dataclasses.replace(o, median_self_us=window[(o.name, o.device)])
        for o in ops
    )
    return dataclasses.replace(steady, top_ops=ops)


def steady_top_ops(
    trace: Trace | None, phases: PhaseBreakdown, n: int = 10
) -> tuple[OpStat, ...] | None:
    """Top operators over the kept (steady) steps only, from the window's decoded trace.

    A stall inflates whichever operator it lands in (an 8 ms pause inside one ``addmm`` of a
    tiny model makes every addmm look 500 us long), so rules that size operators read them
    without the stalled steps. Each run of consecutive kept steps is one window of
    ``top_ops``; the windows are summed by operator name. None without the trace (removed,
    unreadable): the caller keeps the analysis's own figures.
    """
    from gpu_notebook.analysis.ops import top_ops

    if trace is None or phases.source != "trace" or not phases.steps:
        return None
    segments: list[tuple[float, float]] = []
    previous: int | None = None
    for step in sorted(phases.steps, key=lambda s: s.index):
        end = step.start_us + step.duration_us
        if segments and previous == step.index - 1:  # no dropped step in between: one window
            segments[-1] = (segments[-1][0], end)
        else:
            segments.append((step.start_us, end))
        previous = step.index
    merged: dict[tuple[str, str], list[float]] = {}
    # Each window's typical call, by its calls: on a busy machine the kept steps still hold
    # preempted calls, and a mean over them sized the heaviest matmul of a tiny model at over
    # 30 us while the verdict's median read it under (analysis.host.heaviest_matmul_us reads
    # the host figures' call floors where read, else this median): "ops too small" with the tiny-ops finding missing.
    medians: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for window in segments:
        for op in top_ops(trace, n=4 * n, window=window):
            acc = merged.setdefault((op.name, op.device), [0.0, 0.0, 0.0])
            acc[0] += op.calls
            acc[1] += op.total_us
            acc[2] += op.self_us
            if op.median_self_us is not None:
                medians.setdefault((op.name, op.device), []).append((op.median_self_us, op.calls))
    out: list[OpStat] = []
    for device in ("cpu", "gpu"):
        rows = sorted(
            ((k, v) for k, v in merged.items() if k[1] == device), key=lambda kv: -kv[1][2]
        )[:n]
        out += [
            OpStat(
                name,
                int(v[0]),
                v[1],
                v[2],
                "cpu" if dev == "cpu" else "gpu",
                median_self_us=_weighted_median(medians.get((name, dev), [])),
            )
            for (name, dev), v in rows
        ]
    return tuple(out)


def _weighted_median(values: Sequence[tuple[float, int]]) -> float | None:
    """The median of ``(value, weight)`` pairs (the value where the weights pass half)."""
    if not values:
        return None
    ordered = sorted(values)
    half = sum(w for _, w in ordered) / 2
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    return ordered[-1][0]
