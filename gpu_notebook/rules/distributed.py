"""Multi-GPU rules: nn.DataParallel instead of DDP, and communication taking >= 10% of the window.

Thresholds: communication > 10% of the step -> overlap / compression / accumulation (PyTorch
TensorBoard profiler plugin's distributed view); 20% high (TraceML critical level). The
communication share is the collective kernels' (NCCL/RCCL) time over the GPU window; the exposed
part (not overlapped with compute) is at most that, so Amdahl over it is an upper bound.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import finding, gain_bound, severity_of

COMM = 0.10


def data_parallel(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    live = [m for m in facts.live.models if m.data_parallel]
    if not facts.data_parallel and not live:
        return None
    evidence = []
    if facts.data_parallel:
        first = facts.data_parallel[0]
        evidence.append(f"line {first.line}: `{first.text}`")
    for model in live:
        evidence.append(f"`{model.name}` is an nn.DataParallel ({model.type_name})")
    evidence.append(f"{len(run.env.gpus)} GPU(s) visible")
    evidence.append(
        "no gain bound: DataParallel's per-step replicate/scatter/gather is not separated in the trace"
    )
    return finding(
        "distributed.data_parallel",
        "nn.DataParallel drives every GPU from one Python thread",
        "medium",
        evidence,
        "Use DistributedDataParallel (one process per GPU, started with torchrun); it overlaps the "
        "gradient exchange with backward.",
        "PyTorch docs (DataParallel: 'use DistributedDataParallel instead')",
        line=facts.data_parallel[0].line if facts.data_parallel else None,
        fix_id="dataparallel_to_ddp",
    )


def communication(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    gpu = analysis.gpu
    if gpu is None or gpu.window_us <= 0:
        return None
    # Only the collectives' time that no computation overlaps delays the step (HTA's
    # comm/compute overlap, TraceLens's exposed communication).
    comm = gpu.comm_exposed_us / gpu.window_us
    severity = severity_of(comm, low=COMM, medium=COMM, high=0.20)
    if severity is None:
        return None
    bound = gain_bound(comm, analysis, host_side=False)
    return finding(
        "distributed.communication",
        f"Collectives nothing overlaps take {fmt_share(comm)} of the GPU window",
        severity,
        [
            f"collective kernels: {gpu.comm_busy_us / 1e3:.1f} ms of a {gpu.window_us / 1e3:.1f} ms "
            f"window, {fmt_share(gpu.comm_overlap_share)} of it overlapped by computation: "
            f"exposed {gpu.comm_exposed_us / 1e3:.1f} ms ({fmt_share(comm)})",
            f"gain if all communication overlapped with compute: {fmt_gain(bound)} (upper bound)",
            "more GPUs of the same kind add communication: check scaling efficiency before buying",
        ],
        "Overlap the all-reduce with backward (DDP buckets, gradient_as_bucket_view=True), "
        "accumulate several micro-batches per all-reduce (no_sync()), or compress gradients "
        "(PowerSGD / fp16 hooks).",
        "PyTorch TensorBoard profiler plugin (communication > 10% of step); TraceML (critical 20%)",
        phase_share=comm,
        bound=bound,
    )


RULES = (data_parallel, communication)
