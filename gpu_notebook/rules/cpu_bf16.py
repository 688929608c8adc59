"""bfloat16 autocast on a CPU-only run: each autocast op casts its float32 weights and inputs
to bfloat16 (and the backward casts the gradients back), and without AMX tiles the bfloat16
matmul is no faster than float32's, so the step runs slower, not faster.

The rule, its message record and its fix in one place; its wording is ``words/cpu_bf16.py``,
its test ``tests/test_cpu_bf16.py``.

Seen (unseen round 21, lightning_bf16_mixed_cpu): Lightning ``Trainer(precision="bf16-mixed")``
on this avx512_bf16 CPU without AMX fit 1.60x slower than ``precision="32-true"`` (median of 3
pairs), and the tool said nothing: ``precision.cpu_float16`` reads a literal float16 autocast
only. Read here from the literal ``torch.autocast("cpu", dtype=torch.bfloat16)`` and from the
frameworks' keywords (``cell.cpu_bf16``), wherever the call sits.

Evidence and bound: the trace's casts in the profiled steps (``analysis.cpu_bf16_casts``:
the outermost ``aten::_to_copy``, which autocast's ``aten::to`` runs, beside the matmuls). The
range's low end is Amdahl over the casts' lesser share (``CpuBf16Casts.share``: floored
against every operator floored alike, or summed against the wall time; the casts alone go);
its top is Amdahl over the casts and what float32 saves on the operators the autocast runs in
bfloat16 (each one's traced time less that time over its slowdown,
``analysis.cpu_bf16_casts.BF16_SLOWDOWN``, measured per operator on this CPU; one trace holds
one dtype: the ratio is not read from the run), read on each of the casts' two clocks, the
greater (``CpuBf16Casts.top_share``). By hand 1.60x
(Lightning) and 1.77x-1.82x (a plain loop, CPU clock) on this machine; the top was 1.39x-1.52x
with the matmuls alone at 1.5x (their ratio as a loaded trace reads it). Where the CPU lists
``amx_bf16`` bfloat16 may win: said at info, unbounded, as a change to measure. Never on a run
with a GPU: bfloat16 autocast on CUDA is the recipe ``precision.fp32_tensor_cores`` asks for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_notebook.analysis.level_range import widened
from gpu_notebook.cell.cpu_bf16 import OFF, Bf16Kind, bf16_autocast_kind, module_constants
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, CpuBf16Casts, Finding, Run, Said
from gpu_notebook.rules.common import (
    SUGGEST,
    found,
    gain_range,
    has_gpu,
    severity_of,
    shares_sum,
)

if TYPE_CHECKING:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import CodemodResult, Replacement

AMX_FLAG = "amx_bf16"


@dataclass(frozen=True)
class CpuBf16(Said):
    """A CPU-only run that autocasts to bfloat16, and the casts its trace holds."""

    line: int | None  # the first such call's line in the cell (None: in a function above it)
    text: str | None
    kind: Bf16Kind  # the spelling: the literal autocast or a framework's keyword
    calls: int  # such calls read
    casts: CpuBf16Casts
    compute: float | None  # forward + backward: the step's share the autocast's dtype sets
    flags: tuple[str, ...] | None  # the CPU's bfloat16 flags (None: not read)
    bound: float | None
    low: float | None

    @property
    def amx(self) -> bool:
        return self.flags is not None and AMX_FLAG in self.flags


def cpu_bf16(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    tree, casts = facts.tree, analysis.cpu_casts
    if tree is None or casts is None or casts.casts == 0 or has_gpu(run):
        return None
    constants = module_constants(tree.tree)
    calls = [(kind, call) for call in tree.calls() if (kind := bf16_autocast_kind(call, constants))]
    if not calls:
        return None
    compute = shares_sum(analysis, ("forward", "backward"))
    if compute is None or compute < SUGGEST:
        return None
    kind, first = calls[0]
    source = tree.source_line(first, "autocast")
    flags = run.env.cpu_bf16_flags
    if flags is not None and AMX_FLAG in flags:
        # AMX multiplies bfloat16 tiles in hardware: the casts may pay for themselves.
        said = CpuBf16(source.line, source.text, kind, len(calls), casts, compute, flags,
                       None, None)  # fmt: skip
        return found("precision.cpu_bf16", "info", said, line=source.line, fix=FIX)
    low, bound = gain_range(casts.share, casts.top_share, analysis)
    said = CpuBf16(source.line, source.text, kind, len(calls), casts, compute, flags, bound, low)
    # The casts' least share sets the level, their summed one its reach; "low" at the least:
    # the bfloat16 operators' slower path, a measured factor, comes on top of any share.
    least = severity_of(casts.share) or "low"
    level = widened(least, severity_of(casts.share_high) or least)
    return found("precision.cpu_bf16", level, said, phase_share=casts.share_high,
                 bound=bound, line=source.line, fix=FIX, low=low)  # fmt: skip


def float32_on_cpu(module: cst.Module) -> CodemodResult:
    """Each bfloat16 autocast of ``cell.cpu_bf16`` switched off where it is asked for:
    ``enabled=False`` on the literal autocast, ``precision="32-true"`` on Lightning's Trainer,
    ``bf16=False`` on HF's TrainingArguments, ``mixed_precision="no"`` on accelerate's
    Accelerator."""
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import Declined, Edited, replace_nodes

    edits: dict[cst.CSTNode, Replacement] = {}
    done: list[str] = []
    constants = module_constants(module)

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            kind = bf16_autocast_kind(node, constants)
            if kind is not None:
                keyword, value = OFF[kind]
                edits[node] = _setting(keyword, value)
                said = f"{keyword}={value!r}" if isinstance(value, bool) else f'{keyword}="{value}"'
                if said not in done:
                    done.append(said)

    module.visit(_Calls())
    if not edits:
        return Declined(
            "no bfloat16 autocast this fix can read in the cell: switch it off where it is set"
        )
    return Edited(replace_nodes(module, edits), ", ".join(done))


def _setting(keyword: str, value: object) -> Replacement:
    import libcst as cst

    from gpu_notebook.fixes.cst_tools import set_keyword

    expr: cst.BaseExpression = (
        cst.Name(str(value)) if isinstance(value, bool) else cst.SimpleString(f'"{value}"')
    )

    def apply(call: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(call, cst.Call)
        return set_keyword(call, keyword, expr)

    return apply


FIX = Fix(
    "cpu_float32",
    "Train in float32 on the CPU",
    (
        "On a CPU without AMX every bfloat16 autocast op first casts its float32 weights and "
        "inputs, and the backward casts the gradients back; the bfloat16 matmul is no faster.",
        "float32 drops the casts and runs the CPU's fastest matmul path.",
    ),
    "https://pytorch.org/docs/stable/amp.html#cpu-op-specific-behavior",
    float32_on_cpu,
)

RULES = (cpu_bf16,)
