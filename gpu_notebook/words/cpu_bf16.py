"""Words of rules/cpu_bf16: bfloat16 autocast on a CPU-only run."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.cpu_bf16 import CpuBf16
from gpu_notebook.words.common import Words, worder, words

_ASKED = {
    "autocast": "autocast to bfloat16 on the CPU",
    "lightning": "Lightning's bf16 precision: autocast to bfloat16 on the CPU",
    "hf": "TrainingArguments(bf16=True): the Trainer autocasts the CPU to bfloat16",
    "accelerate": 'Accelerator(mixed_precision="bf16"): autocast to bfloat16 on the CPU',
}
_SWITCH = {
    "autocast": "pass enabled=False to the autocast (or drop its with block)",
    "lightning": 'set precision="32-true" on the Trainer',
    "hf": "set bf16=False in TrainingArguments",
    "accelerate": 'set mixed_precision="no" on the Accelerator',
}


@worder(CpuBf16)
def cpu_bf16(s: CpuBf16) -> Words:
    c = s.casts
    where = (
        f"line {s.line}: `{s.text}`"
        if s.line is not None
        else f"`{s.text}` (a function the cell calls)"
    )
    more = f" (and {s.calls - 1} more)" if s.calls > 1 else ""
    evidence = [
        f"{where}{more}: {_ASKED[s.kind]}; no GPU visible",
        f"the casts under it: {c.casts} aten::_to_copy calls in {c.steps} profiled steps, "
        f"{fmt_share(c.share)}-{fmt_share(c.share_high)} of them (floored against every operator "
        "floored alike, and summed against the wall time), "
        f"beside {c.matmuls} matmuls ({fmt_share(c.matmul_share)})",
    ]
    if s.amx:
        evidence.append(
            "this CPU has AMX (amx_bf16): its bfloat16 matmuls can outrun float32 and pay for "
            "the casts; whether they do here is not known from one run"
        )
        return words(
            "bfloat16 autocast on a CPU with AMX: measure it against float32",
            evidence,
            f"Time one run in float32 ({_SWITCH[s.kind]}) against this one and keep the faster.",
            "torch.amp docs (CPU autocast: bfloat16); AMX: no bound, measure the change",
        )
    units = (
        "the CPU's flags were not read: whether it has AMX (amx_bf16) is not known"
        if s.flags is None
        else "this CPU has avx512_bf16 but no AMX"
        if "avx512_bf16" in s.flags
        else "this CPU has no bfloat16 instructions (neither avx512_bf16 nor amx_bf16)"
    )
    evidence.append(
        f"{units}: without AMX tiles the bfloat16 matmul is no faster than float32's (on an "
        "avx512_bf16 CPU it measured 1.4-1.8x slower), so the casts are pure cost"
    )
    ops = ", ".join(f"{op.name} {op.slowdown:.2f}x" for op in c.bf16_ops)
    which = "with a bfloat16 input (the trace's input types)" if c.dtypes_read else "under it"
    evidence.append(
        f"gain {fmt_gain(s.bound, s.low)}: the low end if the casts alone go (Amdahl over their "
        f"share), the top if also the operators {which} ({fmt_share(c.bf16_share)} of the "
        "steps) run as much faster in float32 as each measured on an avx512_bf16 CPU"
        + (f" ({ops})" if ops else "")
        + " (one trace holds one dtype: not read from this run)"
    )
    return words(
        "bfloat16 autocast on a CPU without AMX: the casts make each step slower",
        evidence,
        f"Train in float32 on the CPU: {_SWITCH[s.kind]}; keep bfloat16 for a GPU or an AMX "
        "CPU, where it is fast.",
        "torch.amp docs (CPU autocast: bfloat16); the cast share from the trace",
    )
