"""Multi-GPU rules: nn.DataParallel instead of DDP, and communication taking >= 10% of the window.

Thresholds: communication > 10% of the step -> overlap / compression / accumulation (PyTorch
TensorBoard profiler plugin's distributed view); 20% high (TraceML critical level). The
communication share is the collective kernels' (NCCL/RCCL) time over the GPU window; the exposed
part (not overlapped with compute) is at most that, so Amdahl over it is an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.records import Analysis, Finding, Run, Said
from gpu_notebook.rules.common import found, gain_bound, severity_of

COMM = 0.10


@dataclass(frozen=True)
class DataParallel(Said):
    line: int | None  # the cell's first nn.DataParallel(...)
    text: str | None
    live: tuple[tuple[str, str], ...]  # live models that are one: (name, type name)
    gpus: int  # visible


@dataclass(frozen=True)
class Communication(Said):
    busy_us: float  # collective kernels' time
    window_us: float
    overlapped: float | None  # share of it computation overlaps
    exposed_us: float
    share: float  # exposed share of the window
    bound: float | None


def data_parallel(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    live = [m for m in facts.live.models if m.data_parallel]
    if not facts.data_parallel and not live:
        return None
    first = facts.data_parallel[0] if facts.data_parallel else None
    said = DataParallel(
        first.line if first else None,
        first.text if first else None,
        tuple((m.name, m.type_name) for m in live),
        len(run.env.gpus),
    )
    return found("distributed.data_parallel", "medium", said, line=said.line,
                 fix_id="dataparallel_to_ddp")  # fmt: skip


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
    said = Communication(gpu.comm_busy_us, gpu.window_us, gpu.comm_overlap_share,
                         gpu.comm_exposed_us, comm, bound)  # fmt: skip
    return found("distributed.communication", severity, said, phase_share=comm, bound=bound)


TIE = 170  # where its findings tie: the verdict table's order (rules._families)
RULES = (data_parallel, communication)
