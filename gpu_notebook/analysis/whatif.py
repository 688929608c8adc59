"""What-if: the fixes versus more GPUs of this kind (DDP), from one single-GPU run.

Model, per step of one rank:
- compute and input time stay what they are on one GPU: each rank keeps paying its own data
  wait (its own loader), and each rank processes the same per-GPU batch;
- gradients are all-reduced with a ring: each GPU sends and receives 2(N-1)/N of the gradient
  bytes (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 2009; NVIDIA
  nccl-tests doc/PERFORMANCE.md, "AllReduce": "`t = (S/B) * (2*(n-1)/n)`", whence its busbw =
  algbw x 2(n-1)/n), plus 2(N-1) latency hops;
- DDP overlaps all-reduce with backward in 25 MiB (26.2 MB) buckets (Li et al., "PyTorch Distributed:
  Experiences on Accelerating Data Parallel Training", VLDB 2020, §3.2.3), so the exposed part is
  what backward cannot hide, and never less than the last bucket;
- the interconnect is what NVML reports: NVLink links x 25 GB/s per direction (NVLink 2/3/4;
  www.nvidia.com/de-de/data-center/nvlink/: one A100 has up to twelve third-generation NVLinks,
  600 GB/s in total, i.e. 12 x 25 GB/s each way; V100 had six),
  else PCIe generation x width; NCCL reaches about 80% of it (assumption, written out).
A phase that was not measured is not guessed: the model says what is missing instead.
- backward's GPU time on a partial GPU timeline (analysis/gpu_bounds.py) is a lower bound: each
  point's speedup then ranges (``ScalingPoint.speedup_low`` / ``speedup_high``) up to backward
  plus all the busy time no clocked event shows (hiding all but the last bucket where nothing
  bounds it).
- the host's CPUs: a one-GPU run that keeps c of the host's C cores busy while its steps run
  (this process and its DataLoader workers, the sampler's ticks) needs N x c cores for N ranks;
  on this host each rank then runs at most C / (N x c) of its speed (``speedup_this_host``).
  CPU time counts as work (an intra-op pool's spinning and a sync's busy wait too, so the column
  is an estimate, not a ceiling); a bigger host, more cores per GPU, lifts it. c is what the
  process would keep busy on a quiet host: under load its threads wait for a core instead of
  running, so the cores it kept busy are divided by 1 - the steps' wait for a core (the same CPU
  work over steps shorter by that wait, as the steps' own time is read; at most the host's
  cores); the loop thread's wait stands for every thread's (assumption). Measured on the
  H100 of 2026-12-06 (16 cores): the input-bound gpu_train script kept 15.9 cores busy during
  its steps, so a second GPU on that host gives ~1.0x, where the model alone said 1.96x.
Sizes and rates are decimal throughout the output (1 MB = 1e6 bytes, 1 GB/s = 1e9 bytes/s), as
NCCL reports its GB/s.

A trace that is already one rank of a data-parallel job (``world_size`` W > 1: the trace's
``distributedInfo``, else the NCCL kernels' group size) is not a one-GPU baseline: its step holds
the job's own exposed all-reduce at W GPUs and DDP's per-rank host work. The model then predicts
only N > W, relative to the W-GPU job (time per sample of the whole job):
``step(N) = step(W) - exposed(W) + exposed(N)`` and ``speedup = (N / W) x step(W) / step(N)``,
both exposures from the same model, so only the model's difference between W and N is added.
The per-rank DDP host work that made one-GPU predictions 19% optimistic on the recorded 2-rank
run (below) is then measured rather than missing; what stays unmodelled is how it and the waits
for the slowest rank grow with N.

Validation (pinned in tests/test_whatif.py; the speedups are a ceiling, read them as such):
- Published: NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md
  (https://github.com/NVIDIA/DeepLearningExamples, "Training performance: NVIDIA DGX A100
  (8x A100 80GB)", pytorch-21.03 NGC container, batch 256 per GPU per ../configs.yml):
  "| 1 | 938 img/s | 2470 img/s |" and "| 8 | 7248 img/s | 16621 img/s |", "TF32 Strong Scaling"
  7.72 x, "Mixed Precision Strong Scaling" 6.72 x; same README, DGX-1 16GB (8x V100, FP32
  batch 112, AMP 256): 367 -> 2855 img/s (7.76 x) and 1200 -> 8322 img/s (6.93 x). (configs.yml
  sets a 2048-image optimizer batch, so one GPU accumulates 8 batches per SGD step: a small
  optimizer cost the 8-GPU runs pay every batch, part of the gap below.)
  Fed ResNet-50's 25,557,032 fp32 gradients (102.2 MB), 12 NVLinks (A100) / 6 (V100) and the
  one-GPU step (batch / img/s), the model gives 7.99x at 8 GPUs in all four cases: 3-4% above the
  FP32/TF32 figures, 15-19% above the mixed-precision ones. The 8-GPU steps published are 9-33 ms
  longer than one GPU's while the whole all-reduce takes 0.8-1.6 ms (and hides behind backward):
  the gap is not the link (no efficiency factor explains it, and it grows with images per second,
  not with bytes), it is per-rank host work DDP adds (buffer broadcast, gradient copies), loaders
  sharing one host's CPUs and waiting for the slowest rank, none of which one GPU can show.
- Recorded: a100_world2_rank0_nccl (HTA test data; ResNet-50 DDP on 2 A100s, profiled): the
  all-reduce message sizes add up to exactly 25,557,032 floats a step; at the trace's best bus
  bandwidth (13 GB/s) the model's all-reduce is 7.9 ms against 12.3 ms of NCCL kernels a step
  (kernels include waiting for the peer), its exposed share 2.0 ms against 0 on the critical path
  (the host-bound step reaches the optimizer 15 ms after the last all-reduce ends), while DDP's
  own host work (buffer broadcast 35 ms, bucket-to-grad copies 8.75 ms, profiler-inflated) is
  ~44 ms of the 222 ms step: the 2-GPU step predicted from the rest is 19% short, the same blind
  spot as in the published mixed-precision figures, seen from the inside.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from gpu_notebook.analysis.gpu_bounds import gpu_busy_bounds
from gpu_notebook.analysis.verdict import from_a_file
from gpu_notebook.records import (
    Analysis,
    Environment,
    Interconnect,
    Run,
    ScalingPoint,
    WhatIf,
    WhatIfMissing,
)
from gpu_notebook.traces.kineto import Trace

GPU_COUNTS = (2, 4, 8)
NVLINK_LINK_BYTES_PER_S = 25e9  # per direction, NVLink 2, 3 and 4 alike
PCIE_LANE_BYTES_PER_S = {3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}
NCCL_EFFICIENCY = 0.8
HOP_LATENCY_S = 5e-6  # per ring step, NVLink-class; PCIe is of the same order
DDP_BUCKET_BYTES = 25 * 2**20
FIXABLE_PHASES = ("data", "sync", "copy")  # waits a fix can remove without changing the model


def interconnect(env: Environment) -> tuple[Interconnect | None, float | None]:
    """(the link, bytes/s one GPU's ring all-reduce reaches over it), or (None, None) when unknown."""
    if not env.gpus:
        return None, None
    gpu = env.gpus[0]
    if gpu.nvlink_links:
        raw = gpu.nvlink_links * NVLINK_LINK_BYTES_PER_S
        return Interconnect("nvlink", raw, nvlink_links=gpu.nvlink_links), raw * NCCL_EFFICIENCY
    lane = PCIE_LANE_BYTES_PER_S.get(gpu.pcie_generation or 0)
    if lane and gpu.pcie_width:
        raw = lane * gpu.pcie_width
        link = Interconnect(
            "pcie", raw, pcie_generation=gpu.pcie_generation, pcie_width=gpu.pcie_width
        )
        return link, raw * NCCL_EFFICIENCY
    return None, None


def ring_allreduce_s(grad_bytes: int, gpus: int, bus_bytes_per_s: float) -> float:
    """Time of one ring all-reduce of ``grad_bytes`` over ``gpus`` GPUs."""
    if gpus <= 1:
        return 0.0
    return 2 * (gpus - 1) / gpus * grad_bytes / bus_bytes_per_s + 2 * (gpus - 1) * HOP_LATENCY_S


def exposed_comm_s(allreduce_s: float, backward_s: float, grad_bytes: int) -> float:
    """What backward cannot hide: the excess over backward, at least the last bucket's share."""
    last_bucket = (
        allreduce_s * min(1.0, DDP_BUCKET_BYTES / grad_bytes) if grad_bytes else allreduce_s
    )
    return max(allreduce_s - backward_s, last_bucket)


def rank_cores(analysis: Analysis) -> tuple[float | None, float | None, float | None]:
    """(the cores this process and its workers would keep busy on a quiet host, the cores they
    kept busy while the steps ran, the steps' wait for a core): ``Analysis.utilization``'s
    figures inside the steps (``InSteps``: the median sampler tick between the first step's
    start and the last step's end; the imports and set-up before, idle on one core, are not the
    loop's demand). Under load a thread waits for a core instead of running: the quiet-host
    figure takes the same CPU work over steps shorter by that wait (``InSteps.quiet_cores``).
    Nones with too few ticks inside the steps."""
    steps = analysis.utilization.in_steps
    if steps is None or steps.ours_cores is None:
        return None, None, None
    return steps.quiet_cores, steps.ours_cores, steps.wait_share


def this_host(speedup: float, ranks: int, cores: float | None, host: int | None) -> float | None:
    """``speedup`` with ``ranks`` ranks sharing this host's ``host`` cores, each needing ``cores``."""
    if cores is None or not host or cores <= 0:
        return None
    return speedup * min(1.0, host / (ranks * cores))


def _replicas(
    run: Run,
    analysis: Analysis,
    step_s: float | None,
    price_per_gpu_hour: float | None,
    gpu_counts: tuple[int, ...],
    world_size: int | None,
) -> WhatIf:
    """Inference (no backward, no optimizer): more GPUs are replicas, with nothing to exchange.

    N copies of the job each serve their own requests: throughput N / W times today's, the
    latency of one request unchanged; a ceiling, as nothing shared (load balancer, host CPUs,
    input pipeline) is modelled.
    """
    phases = analysis.phases
    world = max(1, world_size or 1)
    fixed = tuple(
        p for p in FIXABLE_PHASES if phases is not None and (phases.share(p) or 0) >= 0.01
    )
    removable = sum(phases.share(p) or 0.0 for p in fixed) if phases is not None else 0.0
    fixes_speedup = 1 / (1 - removable) if fixed and removable < 1 else None
    counts = tuple(n for n in gpu_counts if n > world and n % world == 0) or (2 * world, 4 * world)
    cores, busy, waited = rank_cores(analysis) if world == 1 else (None, None, None)
    host = run.env.cpu_count
    points = tuple(
        ScalingPoint(
            gpus=n,
            allreduce_s=0.0,
            exposed_comm_s=0.0,
            step_s=step_s,
            speedup=n / world,
            efficiency=1.0,
            speedup_with_fixes=(n / world) * fixes_speedup if fixes_speedup else None,
            cost_per_1000_steps=(
                n * step_s * 1000 / 3600 * price_per_gpu_hour if price_per_gpu_hour else None
            ),
            speedup_this_host=this_host(n / world, n, cores, host),
        )
        for n in counts
        if step_s is not None
    )
    return WhatIf(
        step_s=step_s,
        fixes_speedup=fixes_speedup,
        fixed_phases=fixed,
        grad_bytes=None,
        interconnect=None,
        bus_bandwidth_bytes_per_s=None,
        points=points,
        missing=() if step_s is not None else ("no-step",),
        price_per_gpu_hour=price_per_gpu_hour,
        world_size=world,
        replicas=True,
        rank_cores=cores,
        host_cores=host if cores is not None else None,
        rank_busy_cores=busy if cores is not None else None,
        rank_wait_share=waited if cores is not None else None,
    )


def what_if(
    run: Run,
    analysis: Analysis,
    price_per_gpu_hour: float | None = None,
    gpu_counts: tuple[int, ...] = GPU_COUNTS,
    measured_bus_bytes_per_s: float | None = None,
    measured_grad_bytes: int | None = None,
    world_size: int | None = 1,
    measured_bus_low: bool = False,
) -> WhatIf:
    """Predict DDP scaling to ``gpu_counts`` GPUs beside the fixes' bound.

    ``measured_bus_bytes_per_s`` (from a multi-rank trace of the same job) replaces the nominal
    link bandwidth: measured all-reduces have run an order of magnitude below nominal NVLink.
    ``measured_grad_bytes`` (the all-reduce message sizes of one step in such a trace) replaces
    the trainable-parameter bytes: it is what DDP really sends (frozen or unused parameters and
    buffers included or not, as the job had them).
    ``world_size``: GPUs the measured job already runs on (one rank's trace of a DDP job); the
    predictions are then for N above it, relative to that job. ``None``: the trace is distributed
    but does not say how widely; nothing is predicted.
    ``measured_bus_low``: that bandwidth is the best of only some all-reduce kernels (a partial
    timeline left the rest unclocked), a lower bound: the speedups then range up to the nominal
    link's (or, where the link is not known, an all-reduce of hop latency alone).
    """
    phases = analysis.phases
    step_s = analysis.step_stats.median_s
    if phases is not None and phases.workload == "inference":
        return _replicas(run, analysis, step_s, price_per_gpu_hour, gpu_counts, world_size)
    missing: list[WhatIfMissing] = []
    world = world_size if world_size is None else max(1, world_size)
    # Fixes: the measured waiting phases a fix can remove.
    fixed = tuple(
        p for p in FIXABLE_PHASES if phases is not None and (phases.share(p) or 0) >= 0.01
    )
    removable = sum(phases.share(p) or 0.0 for p in fixed) if phases is not None else 0.0
    fixes_speedup = 1 / (1 - removable) if fixed and removable < 1 else None
    if phases is None or step_s is None:
        missing.append("no-step")
    if world is None:
        missing.append("world-size-unknown")
    link, bus = interconnect(run.env)
    nominal = bus
    if measured_bus_bytes_per_s:
        link = Interconnect("measured", measured_bus_bytes_per_s)
        bus = measured_bus_bytes_per_s
    grad_bytes = run.steps.grad_bytes
    if measured_grad_bytes:
        grad_bytes = measured_grad_bytes
    if from_a_file(run) and bus is None and not measured_bus_bytes_per_s:
        missing.append("link-not-recorded")
    elif not run.env.gpus and not measured_bus_bytes_per_s:
        missing.append("no-gpu")
    elif bus is None:
        missing.append("no-link-from-nvml")
    if grad_bytes is None:
        missing.append("grad-size-unknown-trace" if from_a_file(run) else "grad-size-unknown-run")
    if world is not None and world > 1:
        # Only N above today's job; past the usual 8, keep doubling the job as it is.
        gpu_counts = tuple(n for n in gpu_counts if n > world) or (2 * world, 4 * world)
    points: list[ScalingPoint] = []
    exposed_too_long: float | None = None
    # One GPU's run: its process is the one rank N ranks would repeat on this host. One rank of a
    # job: how many share its host is not known.
    cores, busy, waited = rank_cores(analysis) if world == 1 else (None, None, None)
    if (
        not missing
        and world is not None
        and step_s is not None
        and bus is not None
        and grad_bytes is not None
    ):
        backward_s, backward_high_s = _backward_bounds(analysis, step_s)
        # The most the link can reach: the measured best where every all-reduce was clocked.
        bus_high = max(bus, nominal or math.inf) if measured_bus_low else bus
        # One rank's step at today's world size W holds the exposed all-reduce at W (zero when W
        # is 1). Take out the model's own figure for it, not a measured one, so that the model's
        # biases cancel and only its difference between W and N GPUs is added:
        #   base        = step(W) - exposed(W)        (everything but the all-reduce wait)
        #   step(N)     = base + exposed(N)
        #   speedup(N)  = (N / W) x step(W) / step(N)  (samples a second, N-GPU job vs W-GPU job)
        #   efficiency  = speedup / (N / W)            (1.0: the added GPUs scale perfectly)
        # The fixes remove their share of the measured step, then the same exposure swap applies.
        exposed_now = (
            exposed_comm_s(ring_allreduce_s(grad_bytes, world, bus), backward_s, grad_bytes)
            if world > 1
            else 0.0
        )
        base_s = step_s - exposed_now
        fixed_base_s = step_s * (1 - removable) - exposed_now
        if base_s <= 0 or (fixed and fixed_base_s <= 0):
            missing.append("step-shorter-than-allreduce")
            exposed_too_long = exposed_now
        else:
            for n in gpu_counts:
                ar = ring_allreduce_s(grad_bytes, n, bus)
                exposed = exposed_comm_s(ar, backward_s, grad_bytes)
                step_n = base_s + exposed
                scale = n / world
                speedup = scale * step_s / step_n
                with_fixes = scale * step_s / (fixed_base_s + exposed) if fixed else None
                cost = n * step_n * 1000 / 3600 * price_per_gpu_hour if price_per_gpu_hour else None
                # A partial GPU timeline: backward's GPU time is a lower bound, so the speedup
                # ranges up to what the most backward can be (hiding more of the all-reduce),
                # and the link up to the most it can reach.
                low = high = None
                if backward_high_s != backward_s or bus_high != bus:
                    low = speedup
                    high = _speedup_at(backward_high_s, grad_bytes, world, n, bus_high, step_s)
                points.append(
                    ScalingPoint(
                        gpus=n,
                        allreduce_s=ar,
                        exposed_comm_s=exposed,
                        step_s=step_n,
                        speedup=speedup,
                        efficiency=speedup / scale,
                        speedup_with_fixes=with_fixes,
                        cost_per_1000_steps=cost,
                        speedup_this_host=this_host(speedup, n, cores, run.env.cpu_count),
                        speedup_low=low,
                        speedup_high=high,
                    )
                )
    return WhatIf(
        step_s=step_s,
        fixes_speedup=fixes_speedup,
        fixed_phases=fixed,
        grad_bytes=grad_bytes,
        interconnect=link,
        bus_bandwidth_bytes_per_s=bus,
        points=tuple(points),
        missing=tuple(missing),
        price_per_gpu_hour=price_per_gpu_hour,
        world_size=world,
        grads_measured=bool(measured_grad_bytes),
        bus_low=measured_bus_low and bool(measured_bus_bytes_per_s),
        exposed_now_s=exposed_too_long,
        rank_cores=cores if points else None,
        host_cores=run.env.cpu_count if points and cores is not None else None,
        rank_busy_cores=busy if points and cores is not None else None,
        rank_wait_share=waited if points and cores is not None else None,
    )


def _speedup_at(
    backward_s: float | None, grad_bytes: int, world: int, n: int, bus: float, step_s: float
) -> float:
    """The speedup at ``n`` GPUs (the loop above, one point) with backward taking
    ``backward_s`` (None: not bounded: it may hide all but the last bucket)."""
    hides = float("inf") if backward_s is None else backward_s
    now = (
        exposed_comm_s(ring_allreduce_s(grad_bytes, world, bus), hides, grad_bytes)
        if world > 1
        else 0.0
    )
    step_n = step_s - now + exposed_comm_s(ring_allreduce_s(grad_bytes, n, bus), hides, grad_bytes)
    return n / world * step_s / step_n if step_n > 0 else float("inf")


def _backward_bounds(analysis: Analysis, step_s: float) -> tuple[float, float | None]:
    """Backward's time per step (``_backward_s``) and the most it can be: the same where it is
    measured; on a partial GPU timeline (``analysis.gpu_bounds``) plus all the busy time no
    clocked event shows, per step (None: not bounded, no NVML inside the steps)."""
    backward_s = _backward_s(analysis, step_s)
    gpu = analysis.gpu
    bounds = gpu_busy_bounds(analysis)
    if gpu is None or bounds is None or not bounds.partial or not gpu.gpu_phase_us.get("backward"):
        return backward_s, backward_s
    unseen = bounds.unseen
    if unseen is None:
        return backward_s, None
    phases = analysis.phases
    n = len(phases.steps) if phases is not None and phases.steps else 1
    return backward_s, backward_s + unseen * gpu.window_us / n / 1e6


def _backward_s(analysis: Analysis, step_s: float) -> float:
    """Backward time per step: GPU kernel time launched by backward when traced, else host."""
    gpu = analysis.gpu
    phases = analysis.phases
    n = len(phases.steps) if phases is not None and phases.steps else 1
    if gpu is not None and gpu.gpu_phase_us.get("backward"):
        return gpu.gpu_phase_us["backward"] / n / 1e6
    share = phases.share("backward") if phases is not None else None
    return (share or 0.0) * step_s


@dataclass(frozen=True)
class TraceAllReduce:
    """The NCCL all-reduce kernels of one recorded rank, read from the kernels' own args."""

    # Best kernel, nccl-tests busbw = 2(N-1)/N x bytes / time; None: no all-reduce kernel has a
    # clock reading. With ``unclocked`` kernels it is a lower bound (the best of those clocked).
    bus_bytes_per_s: float | None
    bytes_per_step: int | None  # median over ProfilerStep ranges; None without steps
    kernel_s_per_step: float | None  # median summed kernel time a step (peer waits included)
    group_size: int | None = None  # largest NCCL communicator seen: the job's world size for DDP
    # All-reduce kernels CUPTI left without timestamps (a partial timeline): their bytes are
    # counted (a message size needs no clock), placed in the step their launch falls in.
    unclocked: int = 0


def trace_allreduce(trace: Trace) -> TraceAllReduce | None:
    """All-reduce facts of a recorded trace, or None when no kernel carries message sizes.

    The bus bandwidth is the best kernel's, because a kernel's duration also holds the wait for
    the slowest peer; the best one is closest to the link's real speed. Bytes are grouped by the
    ProfilerStep range a kernel starts in (GPU time trails the host's a little; the median over
    steps absorbs a kernel spilling into the next range). A kernel with no clock reading (a
    partial timeline) still carries its message size: it counts in the step its launch falls in
    (where the launch has no clock either, its bytes are shared out over the steps), and gives
    no bandwidth.
    """
    from gpu_notebook.analysis.gpu_timeline import launch_ts_us

    sizes = trace.kept_args.get("msg_nelems", {})
    if not sizes:
        return None
    named = trace.name_mask(prefix="ProfilerStep#") & (trace.dur_us != 0)
    steps = [
        (float(t), float(t) + float(d))
        for t, d in zip(trace.ts_us[named], trace.dur_us[named], strict=True)
    ]
    kernels: list[tuple[float, float, int]] = []  # start us (nan: unknown), duration us, bytes
    best: float | None = None
    groups: list[int] = []
    is_kernel = trace.category_mask("kernel")
    unclocked = trace.unclocked_gpu_mask
    rows = [r for r in sizes if is_kernel[r] and "AllReduce" in trace.name_of(r)]  # file order
    launched = launch_ts_us(trace, np.asarray(rows, dtype=np.int64))
    missed = 0
    for row, launch_us in zip(rows, launched.tolist(), strict=True):
        n = sizes[row]
        group = trace.kept_arg("group_size", row)
        if not n or not group or group < 2:
            continue
        size = n * _DTYPE_BYTES.get(str(trace.kept_arg("dtype", row, "Float")), 4)
        groups.append(int(group))
        if unclocked[row]:
            missed += 1
            kernels.append((launch_us, 0.0, size))
            continue
        dur_us = float(trace.dur_us[row])
        if not dur_us or dur_us <= 0:
            continue
        kernels.append((float(trace.ts_us[row]), dur_us, size))
        busbw = 2 * (group - 1) / group * size / (dur_us * 1e-6)
        best = busbw if best is None else max(best, busbw)
    if not kernels:
        return None
    # Bytes of kernels no clock places (neither theirs nor their launch's): the same each step.
    spread = [b for t, _, b in kernels if math.isnan(t)]
    per_step = [
        [(d, b) for t, d, b in kernels if start <= t < end] for start, end in sorted(set(steps))
    ]
    per_step = [k for k in per_step if k] or ([[]] * len(set(steps)) if spread else [])
    extra = sum(spread) / len(per_step) if per_step else 0.0
    return TraceAllReduce(
        bus_bytes_per_s=best,
        bytes_per_step=int(statistics.median(sum(b for _, b in k) + extra for k in per_step))
        if per_step
        else None,
        kernel_s_per_step=statistics.median(sum(d for d, _ in k) for k in per_step) / 1e6
        if per_step and not missed
        else None,
        group_size=max(groups),
        unclocked=missed,
    )


def measured_allreduce_bus_bandwidth(trace: Trace) -> float | None:
    """Best NCCL all-reduce bus bandwidth seen in a recorded trace (bytes/s), or None."""
    facts = trace_allreduce(trace)
    return facts.bus_bytes_per_s if facts is not None else None


_DTYPE_BYTES = {
    "Float": 4,
    "Half": 2,
    "BFloat16": 2,
    "Double": 8,
    "Int": 4,
    "Long": 8,
    "Char": 1,
    "Byte": 1,
}
