"""Words of the precision rule (rules/precision.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_bytes, fmt_gain, fmt_share
from gpu_notebook.rules.precision import CpuFloat16, Float64Params, Fp32TensorCores, ScalerUnneeded
from gpu_notebook.words.common import Words, busy_evidence, window_share, worder, words


@worder(Fp32TensorCores)
def fp32_tensor_cores(s: Fp32TensorCores) -> Words:
    evidence = [
        f"{s.gpu} (compute capability {s.cc:.1f}) has tensor cores",
        f"tensor-core kernels: {_tensor_core_share(s)} of the kernel time; matmul/convolution "
        "kernels ran in float32",
        busy_evidence(s.busy, s.busy_high, s.unclocked_events),
    ]
    if s.eligible is not None:
        evidence.append(
            "float32 GEMM/convolution kernels (top kernels): "
            f"{window_share(s.eligible, s.eligible_high, s.unclocked_events)}; "
            f"gain {fmt_gain(s.bound)} if they took no time"
        )
    if s.autocast_in_source:
        evidence.append(
            "the cell has torch.autocast, but no matmul ran in reduced precision: it is "
            "disabled (enabled=False) or the matmuls run outside its block"
        )
    return words(
        "float32 math leaves the tensor cores idle",
        evidence,
        f"Run the forward pass under torch.autocast(dtype=torch.{s.dtype})"
        + (" with a GradScaler" if s.dtype == "float16" else "")
        + "; about 2x on tensor-core GPUs and half the activation memory.",
        "PyTorch TensorBoard profiler plugin (CC >= 7.0 and no tensor-core kernels -> AMP); "
        "10% tensor-core margin: ours",
    )


def _tensor_core_share(s: Fp32TensorCores) -> str:
    """Measured, or on a partial timeline the range its unclocked kernels leave."""
    if s.tensor_core_low is None:
        return fmt_share(s.tensor_core)
    unclocked = s.unclocked_tensor_core + s.unclocked_other
    return (
        f"at most {fmt_share(s.tensor_core)}, at least {fmt_share(s.tensor_core_low)} (not "
        f"measured: {unclocked} kernels ran without a GPU clock, {s.unclocked_tensor_core} of "
        "them tensor-core by name; their time is bounded by what their streams left free)"
    )


@worder(ScalerUnneeded)
def scaler_unneeded(s: ScalerUnneeded) -> Words:
    made = (
        f"line {s.line}: {s.text}" if s.line is not None else "a GradScaler made outside this cell"
    )
    precision = (
        "autocast runs in bfloat16, which has float32's exponent range"
        if s.precision == "bfloat16"
        else "no autocast: the gradients are float32"
    )
    evidence = [
        made,
        f"{precision}; nothing in the cell is float16",
        f"the scaler's inf/nan check, unscale and scale update: {s.calls} operator calls in "
        f"{s.steps} profiled steps, {fmt_share(s.share)} of them; gain {fmt_gain(s.bound)} "
        "if they took no time",
    ]
    if s.gpu:
        evidence.append("on a GPU scaler.step also waits for its found_inf check (a sync)")
    return words(
        "A GradScaler where no gradient can underflow",
        evidence,
        "Drop the scaler: loss.backward(), opt.step(), no scaler.update(); loss scaling is for "
        "float16 only.",
        "torch.amp docs (bfloat16 needs no loss scaling); levels: TraceML 5/10/20%",
    )


@worder(CpuFloat16)
def cpu_float16(s: CpuFloat16) -> Words:
    made = f"line {s.line}: `{s.text}`" if s.line is not None else "an autocast of the cell"
    more = f" (and {s.autocasts - 1} more)" if s.autocasts > 1 else ""
    evidence = [
        f"{made}{more}: autocast to float16 on the CPU; no GPU visible",
        f"forward and backward: {fmt_share(s.compute)} of the step, the ops whose dtype it sets",
        "most CPUs have no fast float16 kernels: each op converts or emulates, and runs slower "
        "than in float32 (bfloat16 is the CPU autocast's default: fast with AMX tiles, slower "
        "than float32 without them)",
    ]
    if s.scaler:
        evidence.append(
            "the GradScaler exists for float16's underflow: without float16 it goes too"
        )
    return words(
        "float16 autocast on a CPU: a GPU recipe that slows the CPU down",
        evidence,
        "Train in float32 on the CPU (drop the autocast"
        + (" and the GradScaler" if s.scaler else "")
        + "), or autocast to torch.bfloat16 and keep whichever measures faster; keep float16 "
        "for the GPU (device_type='cuda').",
        "torch.amp docs (CPU autocast: bfloat16); no bound: measure the change",
    )


@worder(Float64Params)
def float64_params(s: Float64Params) -> Words:
    made = (
        f"line {s.line}: `{s.text}` casts to float64"
        if s.line is not None
        else "no line of this cell casts to float64: an earlier cell or a library did"
    )
    rate = (
        "a GPU runs float64 at 1/2 (data-centre cards) to 1/64 (consumer cards) of its float32 "
        "rate, with no tensor cores"
        if s.gpu
        else "a CPU's vector units hold half as many float64 numbers as float32 ones"
    )
    evidence = [
        f"{fmt_bytes(s.double_bytes)} of the {fmt_bytes(s.param_bytes)} of trained parameters "
        "are float64, while torch's default dtype is float32",
        made,
        f"forward, backward and optimizer: {fmt_share(s.compute)} of the step, all in float64",
        f"{rate}; every activation, gradient and optimizer state is twice the bytes",
    ]
    return words(
        "The model trains in float64 (double precision)",
        evidence,
        "Train in float32: drop the model's .double() (or call model.float()) and give it float32 "
        "inputs (x.float(), or np.float32 arrays before torch.from_numpy); keep float64 only "
        "where the numerics need it.",
        "PyTorch tensor attributes (torch.float64); no bound: measure the change",
    )
