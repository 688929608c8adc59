"""Synthetic Run / Analysis / Report records for rules that need hardware this machine lacks.

Fakes only for missing hardware: GPU timelines, NVML samples, compute capabilities. Every figure
is given by the test that uses it, so the expected findings can be computed by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpu_notebook.records import (
    PHASES,
    Analysis,
    CopyStats,
    Environment,
    Finding,
    FixProposal,
    GpuInfo,
    GpuSample,
    GpuTimeline,
    HostOverhead,
    OpStat,
    PhaseBreakdown,
    ProfileWindow,
    Report,
    Run,
    Sample,
    SampleSeries,
    StepClockRecord,
    StepCpu,
    StepPhases,
    StepStats,
    StepTiming,
    UtilizationStats,
    Verdict,
)

GIB = 2**30


def gpu(
    name: str = "NVIDIA A100-SXM4-80GB", cc: str | None = "8.0", memory_gib: int = 80
) -> GpuInfo:
    return GpuInfo(0, name, compute_capability=cc, memory_total_bytes=memory_gib * GIB)


def env(gpus: Sequence[GpuInfo] = (), cpu_count: int = 8) -> Environment:
    return Environment(
        python_version="3.11",
        platform="linux",
        cpu_count=cpu_count,
        torch_version="2.13.0",
        cuda_available=bool(gpus),
        nvml_available=bool(gpus),
        nvml_message=None if gpus else "no NVIDIA driver",
        gpus=tuple(gpus),
    )


def phases(
    shares: Mapping[str, float],
    *,
    steps: int = 8,
    step_us: float = 10_000.0,
    measured: Sequence[str] = PHASES,
    source: str = "trace",
) -> PhaseBreakdown:
    """``steps`` identical steps split by ``shares`` (the remainder goes to "forward")."""
    rest = 1.0 - sum(shares.values())
    per_step = {p: shares.get(p, 0.0) * step_us for p in measured}
    if "forward" in per_step:
        per_step["forward"] += max(0.0, rest) * step_us
    rows = tuple(StepPhases(i, i * step_us, step_us, dict(per_step)) for i in range(steps))
    totals = {p: v * steps for p, v in per_step.items()}
    return PhaseBreakdown(source, rows, step_us * steps, totals, tuple(measured))  # type: ignore[arg-type]


def utilization(
    *,
    gpu_util_pct: float | None = None,
    memory_peak_gib: float | None = None,
    memory_total_gib: float | None = None,
    children_cpu_pct: float | None = None,
) -> UtilizationStats:
    return UtilizationStats(
        gpu_util_mean_pct=gpu_util_pct,
        gpu_util_p5_pct=gpu_util_pct,
        gpu_util_p95_pct=gpu_util_pct,
        gpu_memory_peak_bytes=int(memory_peak_gib * GIB) if memory_peak_gib is not None else None,
        gpu_memory_total_bytes=int(memory_total_gib * GIB)
        if memory_total_gib is not None
        else None,
        process_cpu_mean_pct=None,
        children_cpu_mean_pct=children_cpu_pct,
        system_cpu_mean_pct=None,
        rss_peak_bytes=None,
    )


def timeline(
    *,
    window_us: float = 80_000.0,
    busy: float = 0.5,
    host_wait: float = 0.0,
    kernel_wait: float = 0.0,
    comm: float = 0.0,
    comm_overlap: float = 0.0,
    tensor_core_us: float | None = 0.0,
    copies: Sequence[CopyStats] = (),
) -> GpuTimeline:
    """A GPU window; ``busy``, ``host_wait``, ``kernel_wait`` and ``comm`` are shares of it;
    ``comm_overlap`` is the share of the collectives' time computation overlaps."""
    busy_us = busy * window_us
    idle_us = window_us - busy_us
    host_us, kernel_us = host_wait * window_us, kernel_wait * window_us
    return GpuTimeline(
        window_us=window_us,
        busy_us=busy_us,
        idle_us=idle_us,
        idle_host_wait_us=host_us,
        idle_kernel_wait_us=kernel_us,
        idle_other_us=max(0.0, idle_us - host_us - kernel_us),
        kernel_us=busy_us,
        comm_us=comm * window_us,
        memset_us=0.0,
        copies=tuple(copies),
        tensor_core_kernel_us=tensor_core_us,
        devices=(0,),
        compute_us=busy_us - comm * window_us * (1 - comm_overlap),
        comm_busy_us=comm * window_us,
        comm_exposed_us=comm * window_us * (1 - comm_overlap),
        collectives=10 if comm else 0,
    )


def steps_record(
    count: int = 10,
    *,
    batch_sizes: Sequence[int | None] | None = None,
    forward_calls: int = 1,
    backward_calls: int = 1,
    step_s: float = 0.01,
    event_counts: Mapping[str, int] | None = None,
) -> StepClockRecord:
    sizes = list(batch_sizes) if batch_sizes is not None else [32] * count
    rows = tuple(
        StepTiming(
            index=i,
            start_s=i * step_s,
            duration_s=step_s,
            data_s=0.0,
            forward_s=0.0,
            backward_s=0.0,
            optimizer_s=0.0,
            forward_calls=forward_calls,
            backward_calls=backward_calls,
            batch_size=size,
        )
        for i, size in enumerate(sizes)
    )
    counts = dict(event_counts) if event_counts is not None else {
        "optimizer": len(rows), "forward": len(rows) * forward_calls, "backward": len(rows) * backward_calls
    }  # fmt: skip
    return StepClockRecord("optimizer", len(rows), rows, event_counts=counts)


def process_cpu(steps: Sequence[StepTiming], cores: float) -> tuple[StepCpu, ...]:
    """The step clock's spaced readings of the process's CPU time (every thread), as it takes
    them (steps 0-4, then a quarter of the index further on), at ``cores`` per wall second."""
    readings, nxt = [], 0
    for s in steps:
        if s.index >= nxt:
            nxt = s.index + 1 + s.index // 4
            end = s.start_s + s.duration_s
            readings.append(StepCpu(s.index, end, cores * end))
    return tuple(readings)


def samples(pairs: Sequence[tuple[float, float]], interval_s: float = 0.25) -> SampleSeries:
    """(system CPU %, GPU utilization %) per tick."""
    ticks = tuple(
        Sample(
            t_s=i * interval_s,
            process_cpu_pct=100.0,
            children_cpu_pct=None,
            system_cpu_pct=cpu,
            gpus=(GpuSample(0, utilization_pct=util),),
        )
        for i, (cpu, util) in enumerate(pairs)
    )
    return SampleSeries(interval_s, interval_s, ticks)


def make_run(
    cell: str = "",
    *,
    gpus: Sequence[GpuInfo] = (),
    cpu_count: int = 8,
    steps: StepClockRecord | None = None,
    series: SampleSeries | None = None,
    started_at: str = "2026-01-01T00:00:00+0000",
) -> Run:
    return Run(
        env=env(gpus, cpu_count),
        cell_source=cell,
        status="ok",
        error=None,
        wall_s=1.0,
        samples=series if series is not None else SampleSeries(0.25, 0.25),
        steps=steps if steps is not None else steps_record(),
        window=ProfileWindow("recorded", 2, 8, first_step=2, recorded_steps=8),
        started_at=started_at,
    )


def make_analysis(
    shares: Mapping[str, float] | None = None,
    *,
    phase_split: PhaseBreakdown | None = None,
    gpu_timeline: GpuTimeline | None = None,
    util: UtilizationStats | None = None,
    ops: Sequence[OpStat] = (),
    step_median_s: float | None = 0.01,
    batch_size: int | None = 32,
) -> Analysis:
    split = phase_split if phase_split is not None else phases(shares or {})
    per_s = batch_size / step_median_s if batch_size and step_median_s else None
    return Analysis(
        step_stats=StepStats(
            10, step_median_s, step_median_s, batch_size=batch_size, samples_per_s=per_s
        ),
        phases=split,
        gpu=gpu_timeline,
        utilization=util if util is not None else utilization(),
        top_ops=tuple(ops),
    )


def phase_window(
    steps: Sequence[tuple[float, float]], phase: str = "data", start_every_us: float | None = None
) -> PhaseBreakdown:
    """A trace window of ``(duration us, phase us)`` steps, the rest of each step forward; step
    ``i`` starts at ``i * start_every_us`` (default: its own duration)."""
    rows = tuple(
        StepPhases(
            i,
            i * (start_every_us if start_every_us is not None else dur),
            dur,
            {phase: part, "forward": dur - part},
        )
        for i, (dur, part) in enumerate(steps)
    )
    totals = {phase: sum(p for _, p in steps), "forward": sum(d - p for d, p in steps)}
    return PhaseBreakdown("trace", rows, sum(d for d, _ in steps), totals, (phase, "forward"))


def tiny_ops_window(
    steps: Sequence[tuple[float, float]], start_every_us: float | None = None
) -> Analysis:
    """A CPU window of tiny ops (8 us a call) whose ``(duration us, data us)`` steps wait for data."""
    import dataclasses

    split = phase_window(steps, "data", start_every_us)
    return dataclasses.replace(
        make_analysis(phase_split=split), host=HostOverhead(40.0, 8.0, 0.3, 0.4, 30.0)
    )


VERDICT = Verdict("unknown", "synthetic", "synthetic", (), "high")


def verdict(run: Run, analysis: Analysis, **kwargs: Any) -> Verdict:
    """The verdict as the report holds it: decided from the figures (``analysis.verdict``),
    then worded (``words.verdict``)."""
    from gpu_notebook.analysis.verdict import decide
    from gpu_notebook.words.verdict import word_verdict

    return word_verdict(decide(run, analysis, **kwargs))


def make_report(
    cell: str,
    *,
    step_median_s: float | None,
    batch_size: int | None = 32,
    started_at: str = "2026-01-01T00:00:00+0000",
    findings: Sequence[Finding] = (),
    shares: Mapping[str, float] | None = None,
    gpu_timeline: GpuTimeline | None = None,
    util_pct: float | None = None,
    gpus: Sequence[GpuInfo] = (),
) -> Report:
    steps = steps_record(step_s=step_median_s) if step_median_s is not None else steps_record(0)
    return Report(
        run=make_run(cell, started_at=started_at, steps=steps, gpus=gpus),
        analysis=make_analysis(
            shares,
            step_median_s=step_median_s,
            batch_size=batch_size,
            gpu_timeline=gpu_timeline,
            util=utilization(gpu_util_pct=util_pct),
        ),
        verdict=VERDICT,
        findings=tuple(findings),
    )


def proposal_finding(fix_id: str, source_after: str, bound: float | None) -> Finding:
    """A finding whose proposal is ``source_after`` (as attach_fixes would have made it)."""
    return Finding(
        rule_id=f"test.{fix_id}",
        title="t",
        severity="high",
        evidence=(),
        phase_share=None,
        gain_bound=bound,
        fix="f",
        fix_id=fix_id,
        proposal=FixProposal(fix_id, "t", ("a", "b"), "u", source_after, "diff"),
    )


def worker_samples(workers: int, reads: int, children_pct: float = 0.0) -> SampleSeries:
    """A sampler series that listed ``workers`` worker processes at its first sample and read
    their CPU in ``reads`` samples after it (the first look at a process reads nothing: None)."""
    from gpu_notebook.records import Sample

    samples = tuple(
        Sample(
            t_s=0.25 * i,
            process_cpu_pct=100.0,
            children_cpu_pct=children_pct if i else None,
            system_cpu_pct=50.0,
            children=workers,
        )
        for i in range(reads + 1)
    )
    return SampleSeries(0.25, 0.25, samples)
