"""Build a Report from a Kineto trace recorded elsewhere (``gpucheck analyze``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpu_notebook.analysis.analyze import trace_figures
from gpu_notebook.analysis.utilization import run_utilization
from gpu_notebook.analysis.verdict import RECORDED_ELSEWHERE, decide
from gpu_notebook.analysis.whatif import TraceAllReduce, trace_allreduce, what_if
from gpu_notebook.records import (
    Analysis,
    Environment,
    GpuInfo,
    ProfileWindow,
    RankInfo,
    Report,
    Run,
    SampleSeries,
    StepClockRecord,
    StepStats,
)
from gpu_notebook.traces.windows import WindowTraces


def _gpus(props: tuple[dict, ...], used: tuple[int, ...]) -> tuple[GpuInfo, ...]:  # type: ignore[type-arg]
    """The GPUs this trace ran on: from ``deviceProperties`` (name, memory, SMs), narrowed to the
    devices its GPU events name; without ``deviceProperties`` (traces before torch 1.10), one
    unnamed entry per device its GPU events name."""
    out = []
    for i, p in enumerate(props):
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        sms = p.get("numSms")
        out.append(
            GpuInfo(
                index=int(p.get("id", i)),
                name=str(p.get("name", "unknown GPU")),
                memory_total_bytes=p.get("totalGlobalMem"),
                compute_capability=f"{major}.{minor}" if major is not None else None,
                sm_count=int(sms) if isinstance(sms, (int, float)) else None,
            )
        )
    if not out:
        return tuple(GpuInfo(index=d, name=f"GPU {d} (not named in this trace)") for d in used)
    on_used = tuple(g for g in out if g.index in used)
    return on_used or tuple(out)


def _job_world_size(
    recorded: int | None, nccl: TraceAllReduce | None, comm_us: float
) -> int | None:
    """GPUs the traced job already runs on: 1, the larger of distributedInfo's world size and the
    NCCL all-reduce group size, or None when NCCL kernels ran but neither says how many ranks."""
    known = [n for n in (recorded, nccl.group_size if nccl is not None else None) if n]
    if known:
        return max(known)
    return None if comm_us > 0 else 1


def _started_at(base_time_ns: int | None, first_ts_us: float | None) -> str:
    """When the trace's first event happened (ISO 8601, UTC), or "" when the trace cannot say.

    Older traces write epoch microseconds as ``ts``; newer ones a steady clock beside
    ``baseTimeNanoseconds``, its epoch offset. Only compared between the traces of a folder
    (``gpucheck analyze DIR``: ranks of one job start together).
    """
    import datetime

    if first_ts_us is None:
        return ""
    if first_ts_us > 1e14:  # epoch microseconds (after 1973)
        epoch_s = first_ts_us / 1e6
    elif base_time_ns:
        epoch_s = base_time_ns / 1e9 + first_ts_us / 1e6
    else:
        return ""
    when = datetime.datetime.fromtimestamp(epoch_s, tz=datetime.timezone.utc)
    return when.isoformat(timespec="seconds")  # as a live run's (capture/session.py)


def report_from_trace(
    path: str | Path,
    companion: Report | None = None,
    target_gpu: str | None = None,
    traces: WindowTraces | None = None,
) -> tuple[Report, int | None, int | None]:
    """(report, rank, world size) of one trace file; the report has no samples or hooks.

    ``companion``: the report ``gpucheck run`` wrote beside this trace (same rank): what the
    trace cannot say (the gradient bytes, the rank's host) comes from it. ``target_gpu`` (a key
    of ``analysis.gpu_estimate.GPUS``): for a trace recorded without a GPU, estimate its step on
    that card (``Report.gpu_estimate``); ValueError if unknown. ``traces``: where the file may
    already be decoded (the caller read its rank); without it the file is decoded here.
    """
    from gpu_notebook.analysis.gpu_estimate import estimate_from_trace, gpu_spec
    from gpu_notebook.words.gpu_estimate import word_estimate
    from gpu_notebook.words.verdict import word_verdict

    spec = gpu_spec(target_gpu) if target_gpu is not None else None
    trace = (WindowTraces() if traces is None else traces).load(str(path))
    phases, gpu, ops, host = trace_figures(trace)
    used = tuple(sorted({int(d) for d in trace.device[trace.gpu_mask].tolist() if d >= 0}))
    gpus = _gpus(tuple(dict(p) for p in trace.device_properties), used)
    env = Environment(
        python_version="",
        platform=RECORDED_ELSEWHERE,
        cpu_count=0,
        torch_version=None,
        cuda_available=gpu is not None or bool(gpus),
        nvml_available=False,
        nvml_message=None,
        gpus=gpus,
    )
    n_steps = len(phases.steps) if phases is not None else 0
    durations = sorted(s.duration_us / 1e6 for s in phases.steps) if phases is not None else []
    median = durations[len(durations) // 2] if durations else None
    p90 = durations[min(len(durations) - 1, int(0.9 * len(durations)))] if durations else None
    run = Run(
        env=env,
        cell_source="",
        status="ok",
        error=None,
        wall_s=(phases.total_us / 1e6) if phases is not None else 0.0,
        samples=SampleSeries(requested_interval_s=0.0, interval_s=0.0),
        steps=StepClockRecord(anchor="none", step_count=n_steps),
        window=ProfileWindow(
            status="recorded",
            warmup_steps=0,
            profile_steps=n_steps,
            first_step=0,
            recorded_steps=n_steps,
            trace_path=str(path),
        ),
        started_at=_started_at(
            trace.base_time_ns, float(trace.ts_us.min()) if len(trace) else None
        ),
        notes=(f"analysed from {Path(path).name}",),
    )
    analysis = Analysis(
        step_stats=StepStats(count=n_steps, median_s=median, p90_s=p90),
        phases=phases,
        gpu=gpu,
        utilization=run_utilization(run),
        top_ops=ops,
        host=host,
    )
    info = trace.distributed_info
    rank = info.rank if info is not None else None
    world = info.world_size if info is not None else None
    known = companion.run.rank if companion is not None else None
    if known is not None:
        rank = known.rank if rank is None else rank
        world = known.world_size if world is None else world
        run = dataclasses.replace(run, rank=known)
    elif rank is not None and world is not None:
        run = dataclasses.replace(
            run,
            rank=RankInfo(
                rank=rank, world_size=world, source="trace", backend=info.backend if info else None
            ),
        )
    grad_bytes = companion.run.steps.grad_bytes if companion is not None else None
    # A partial timeline's collectives may all be unclocked (comm_us 0): their sizes still count.
    nccl = trace_allreduce(trace) if gpu is not None and (gpu.comm_us > 0 or gpu.partial) else None
    whatif = what_if(
        run,
        analysis,
        measured_bus_bytes_per_s=nccl.bus_bytes_per_s if nccl is not None else None,
        measured_grad_bytes=nccl.bytes_per_step if nccl is not None else grad_bytes,
        world_size=_job_world_size(world, nccl, gpu.comm_us if gpu is not None else 0.0),
        measured_bus_low=nccl is not None and nccl.unclocked > 0,
    )
    estimate = None
    if spec is not None and gpu is None:
        # The recording machine's cores are not in the file: one assumed (the views say so).
        estimate = estimate_from_trace(trace, analysis, spec, cores=1)
        if estimate is not None:
            estimate = word_estimate(dataclasses.replace(estimate, cores_assumed=True))
    report = Report(
        run=run,
        analysis=analysis,
        verdict=word_verdict(decide(run, analysis)),
        whatif=whatif,
        gpu_estimate=estimate,
    )
    return report, rank, world
