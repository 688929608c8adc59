"""Precision rule: float32 math on a GPU with tensor cores (autocast / bf16 would use them).

Threshold: compute capability >= 7.0 and no tensor-core kernels while matmul/conv kernels run
(PyTorch TensorBoard profiler plugin's tensor-core advice). We flag it when tensor-core kernels
are under 10% of the kernel time (our margin: one stray TF32 kernel should not hide the rest).
Gain bound: Amdahl over the GPU time of float32 GEMM/convolution kernels among the top kernels,
i.e. the step if those kernels took no time. autocast shortens them (about 2x is typical, the
peak ratio is 8-16x), so the real gain is below the bound. Without a trace of GPU kernels
(CPU-only run) the rule stays silent: nothing about tensor cores was measured.

A GradScaler where nothing runs in float16 (``scaler_unneeded``): bfloat16 has float32's
exponent range, so its gradients do not underflow and loss scaling is for float16 only (torch.amp
docs: "bfloat16 ... does not need loss scaling"). The scaler still runs an inf/nan check and an
unscale of every gradient each step, a scale update, and on a GPU a read of ``found_inf`` back to
the host in ``scaler.step`` (a sync). Flagged where its own operators ran in the profiled steps
(``Analysis.scaler``) and the cell's autocast runs in bfloat16 (or there is none, float32) with
no float16 named in the cell (``cell/scaler.py``). Gain: Amdahl over those operators' share, "up
to" (their removal), which under-reads the multiply by the scale and the sync. Severity by the
share with the TraceML levels, low below them.

float16 autocast on a CPU-only run (``cpu_float16``): a GPU's mixed-precision recipe moved onto
a CPU, where most float16 ops have no fast kernel; read from the cell's literal
``torch.autocast("cpu", dtype=torch.float16)`` (``cell/scaler.py``), said with the forward and
backward's share, no bound (the slowdown depends on the ops and the CPU: measured by hand).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.kernels import fp32_matmul_kernel_share, runs_matmuls
from gpu_notebook.analysis.tc_share import tensor_core_share
from gpu_notebook.analysis.verdict import GPU_BUSY, gpu_busy_reading
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.scaler import (
    cpu_float16_autocasts,
    float64_casts,
    precision,
    scaler_off,
    scalers_made,
)
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import (
    SUGGEST,
    WARN,
    compute_capability,
    found,
    gain_bound,
    gpu_busy_bounds,
    gpu_name,
    has_gpu,
    level_of,
    shares_sum,
    window_share_high,
)

TENSOR_CORE_CC = 7.0  # Volta and later
BF16_CC = 8.0  # Ampere and later run bfloat16 on tensor cores
LOW_TENSOR_CORE_SHARE = 0.10
AUTOCAST_IDLE_SHARE = 0.10  # float32 GEMM share of the window that says autocast did not apply


@dataclass(frozen=True)
class Fp32TensorCores(Said):
    gpu: str
    cc: float
    tensor_core: float  # tensor-core kernels' share of the kernel time (the top of its range)
    busy: float  # the GPU's busy share of the window
    eligible: float | None  # float32 GEMM/convolution kernels' share of the window
    bound: float | None
    dtype: str  # what autocast should use: "bfloat16" or "float16"
    # The cell has a torch.autocast block, yet its matmuls ran in float32 (enabled=False, or
    # the matmuls outside the block): the trace, not the source, says what ran.
    autocast_in_source: bool = False
    # A partial GPU timeline (``GpuBusyBounds``): ``busy`` and ``eligible`` are lower bounds,
    # these their upper ones (None: not measured); the bound rests on ``eligible_high``.
    unclocked_events: int = 0
    busy_high: float | None = None
    eligible_high: float | None = None
    # Where unclocked kernels leave the tensor-core share a range (``analysis.tc_share``): its
    # low end, and the unclocked kernels that are tensor-core by name and not (0, 0: measured).
    tensor_core_low: float | None = None
    unclocked_tensor_core: int = 0
    unclocked_other: int = 0


def autocast_dtype(cc: float | None) -> str:
    """What autocast should use on a GPU of compute capability ``cc``."""
    return "bfloat16" if cc is not None and cc >= BF16_CC else "float16"


def autocast_idle(facts: SourceFacts, eligible: float | None, tc_share: float) -> bool:
    """The cell's torch.autocast did not reach its matmuls: float32 GEMM kernels hold a tenth
    of the window and almost none ran on tensor cores (a kit loop's
    ``torch.autocast(..., enabled=self.bf16)`` with bf16 off read as autocast on).
    ``tc_share``: the most the tensor-core share can be (``tensor_core_share(...).high``)."""
    return (
        facts.autocast
        and (eligible or 0.0) >= AUTOCAST_IDLE_SHARE
        and (tc_share < LOW_TENSOR_CORE_SHARE)
    )


def fp32_on_tensor_core_gpu(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    cc = compute_capability(run)
    gpu = analysis.gpu
    if cc is None or cc < TENSOR_CORE_CC or gpu is None or gpu.kernel_us <= 0:
        return None
    tc = tensor_core_share(gpu)
    if tc is None:
        return None
    # On a partial timeline the share is a range: flagged only where its top is under the line
    # (the unclocked tensor-core kernels could not lift it past); where the range straddles the
    # line, whether the tensor cores idled is not known, and nothing is said.
    tc_share = tc.high
    if tc_share >= LOW_TENSOR_CORE_SHARE or not runs_matmuls(analysis):
        return None
    eligible = fp32_matmul_kernel_share(analysis)
    if facts.autocast and not autocast_idle(facts, eligible, tc_share):
        return None
    # On a partial timeline the eligible kernels' share is a lower bound: the gain bound rests
    # on the most it can be, and the GPU-bound grade on the verdict's own busy reading (NVML
    # where the timeline, short of its unclocked events, reads under the line and NVML past it).
    high = window_share_high(analysis, eligible)
    bound = gain_bound(high, analysis, host_side=False)
    dtype = autocast_dtype(cc)
    busy = gpu_busy_bounds(analysis)
    assert busy is not None  # a GPU window with kernels
    said = Fp32TensorCores(
        gpu_name(run), cc, tc_share, busy.low, eligible, bound, dtype, facts.autocast,
        busy.unclocked_events, busy.high, high,
        None if tc.measured else tc.low, tc.unclocked_tensor_core, tc.unclocked_other,
    )  # fmt: skip
    severity: Severity = "high" if (gpu_busy_reading(analysis) or 0.0) >= GPU_BUSY else "medium"
    return found("precision.fp32_tensor_cores", severity, said, phase_share=eligible, bound=bound,
                 fix_id="autocast", fix_params={"dtype": dtype, "device_type": "cuda"})  # fmt: skip


@dataclass(frozen=True)
class ScalerUnneeded(Said):
    line: int | None  # the cell's GradScaler(...) (None: made outside the cell)
    text: str | None
    precision: str  # "bfloat16" (the cell's autocast) or "float32" (no autocast)
    calls: int  # the scaler's operators in the profiled steps
    steps: int
    share: float  # their share of the profiled steps
    bound: float | None
    gpu: bool


def scaler_unneeded(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A GradScaler ran while nothing is float16: bfloat16 and float32 need no loss scaling."""
    ops, tree = analysis.scaler, facts.tree
    if ops is None or ops.calls == 0 or tree is None:
        return None
    made = scalers_made(tree)
    if any(scaler_off(call) for _, call in made):
        return None
    kind = precision(tree)
    if kind == "float32" and not made:
        return None  # no autocast here and the scaler made elsewhere: its precision is unknown
    if kind not in ("bfloat16", "float32"):
        return None
    bound = gain_bound(ops.share, analysis)
    first = tree.source_line(made[0][1], "grad-scaler") if made else None
    said = ScalerUnneeded(
        first.cell_line if first else None, first.text if first else None, kind, ops.calls,
        ops.steps, ops.share, bound, ops.on_device,
    )  # fmt: skip
    return found("precision.scaler_unneeded", level_of(analysis, ops.share) or "low", said,
                 phase_share=ops.share, bound=bound, line=said.line,
                 fix_id="drop_grad_scaler")  # fmt: skip


@dataclass(frozen=True)
class CpuFloat16(Said):
    line: int | None  # the cell's first float16 autocast on the CPU
    text: str | None
    autocasts: int  # how many such autocasts the cell has
    compute: float | None  # forward + backward: the step's share the autocast's dtype sets
    scaler: bool  # the cell makes a GradScaler too (float16's loss scaling, for nothing here)


def cpu_float16(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A CPU-only run whose cell autocasts the CPU's ops to float16: a GPU's mixed-precision
    recipe on a CPU, where most float16 ops have no fast kernel (converted or emulated), so it
    runs slower than float32, not faster (unseen round 18: a GRU's step 63.8 ms in float16
    against 13.2 ms in float32 and 16.7 ms in bfloat16, the loop's CPU clock). No bound: how
    much slower depends on the ops and the CPU (AMX-FP16 has fast float16 matmuls); said
    with the forward and backward's share, which the dtype sets, and the change to try."""
    tree = facts.tree
    if tree is None or has_gpu(run):
        return None
    casts = cpu_float16_autocasts(tree)
    if not casts:
        return None
    compute = shares_sum(analysis, ("forward", "backward"))
    if compute is None or compute < SUGGEST:
        return None
    first = tree.source_line(casts[0], "autocast")
    made = [call for _, call in scalers_made(tree) if not scaler_off(call)]
    said = CpuFloat16(first.cell_line, first.text, len(casts), compute, bool(made))
    severity: Severity = "medium" if compute >= WARN else "low"
    return found("precision.cpu_float16", severity, said, phase_share=compute, line=said.line)


@dataclass(frozen=True)
class Float64Params(Said):
    line: int | None  # the cell's first cast to float64 (``model.double()``; None: not seen)
    text: str | None
    double_bytes: int  # trained parameters' bytes that are float64
    param_bytes: int  # ... of the trained parameters' bytes
    compute: float  # forward + backward + optimizer: the step's share the dtype sets
    gpu: bool


def float64_params(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Most of the trained parameters are float64 while the default dtype is float32: the cell
    (or an earlier one) cast the model (``model.double()``, often to match numpy's float64
    data handed over by ``torch.from_numpy``). Every matmul, activation, gradient and
    optimizer state is then double precision: twice the bytes, half a CPU's vector rate, and
    1/2 to 1/64 of a GPU's float32 rate (unseen round 19: an MLP's loop 2.1x faster in float32
    on this CPU). A float64 default dtype is ``modes.float64_default``'s. No bound: how much
    slower depends on the ops and the device."""
    clock = run.steps
    double, total = clock.double_grad_bytes, clock.grad_bytes
    if not double or not total or 2 * double < total:
        return None
    if clock.double_default_backwards and 2 * clock.double_default_backwards >= (
        clock.anomaly_backward_reads
    ):
        return None
    compute = shares_sum(analysis, ("forward", "backward", "optimizer"))
    if compute is None or compute < SUGGEST:
        return None
    tree = facts.tree
    casts = float64_casts(tree) if tree is not None else []
    first = tree.source_line(casts[0], "float64") if tree is not None and casts else None
    said = Float64Params(
        first.cell_line if first else None,
        first.text if first else None,
        double,
        total,
        compute,
        has_gpu(run),
    )
    severity: Severity = "medium" if compute >= WARN else "low"
    return found("precision.float64_params", severity, said, phase_share=compute, line=said.line)


TIE = 80  # where its findings tie: the verdict table's order (rules._families)
RULES = (fp32_on_tensor_core_gpu, scaler_unneeded, cpu_float16, float64_params)
