"""Per-step host syncs: ``.item()``, ``.cpu()``, ``float(t)``, printing or logging a tensor every step.

Each such read makes the host wait until the device has finished every queued kernel, so the
CPU cannot run ahead and the GPU idles at each one. The scan finds the lines; the measurement
gives the share:

- with a trace, the "sync" phase (``aten::item`` / ``_local_scalar_dense`` / synchronize) plus
  the host time outside any operator or marked range, where formatting and printing land
  ("other", "unattributed"): a superset of what the fix removes, so the bound is an upper one;
- severity with TraceML's levels for the residual (warn 10%, critical 20%,
  ``diagnostics/step_time/policy.py``); a per-step read under 5% is still reported, as "low",
  because on a GPU it serialises the pipeline whatever its own cost.
The fix reads the values every ``EVERY`` steps, so it removes ``(1 - 1/EVERY)`` of that share.
"""

from __future__ import annotations

from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    WARN,
    fmt_bound,
    finding,
    gain_bound,
    has_gpu,
    measured_names,
    pct,
    profiled_steps,
    severity_of,
    share,
    shares_sum,
)
from gpu_notebook.rules.source_scan import SourceFacts, SourceLine

EVERY = 10  # read values every 10 steps: the fix's default and what the bound assumes
_SYNC_OPS = ("aten::_local_scalar_dense", "aten::item")

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); PyTorch performance tuning "
    "guide (avoid unnecessary CPU-GPU synchronization)"
)
_KIND_WORDS = {
    "item": ".item()",
    "cpu": ".cpu()",
    "numpy": ".numpy()",
    "tolist": ".tolist()",
    "float": "float()/int() of a tensor",
    "synchronize": "synchronize()",
    "print-tensor": "print of a tensor",
    "log-tensor": "logging of a tensor",
    "fstring-tensor": "f-string of a tensor",
}


def loop_lines(facts: SourceFacts, lines: tuple[SourceLine, ...]) -> tuple[SourceLine, ...]:
    """The lines that run on every training step (in any loop, ungated, when nothing trains)."""
    per_step = facts.per_step(lines)
    if facts.training_loops():
        return tuple(s for s in per_step if s.step_loop_line is not None)
    return tuple(s for s in per_step if s.loop_line is not None)


def reads_per_step(analysis: Analysis) -> float | None:
    """Scalar reads per profiled step, from the trace's top operators (None: not in the top)."""
    steps = profiled_steps(analysis)
    if steps == 0 or analysis.phases is None or analysis.phases.source != "trace":
        return None
    calls = max((op.calls for op in analysis.top_ops if op.name in _SYNC_OPS and op.device == "cpu"), default=None)
    return calls / steps if calls is not None else None


def residual_evidence(analysis: Analysis, residual: float | None) -> str:
    names = measured_names(analysis, RESIDUAL_PHASES)
    if residual is None:
        return "host time outside the model and optimizer: not measured (no phase split)"
    return (
        f"host time outside data loading, the model and the optimizer ({' + '.join(names)}): "
        f"{pct(residual)} of the step"
    )


def per_step_syncs(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Device values read on the host every step."""
    lines = loop_lines(facts, facts.syncs)
    sync = share(analysis, "sync")
    reads = reads_per_step(analysis)
    if not lines and (sync is None or sync < WARN):
        return None
    removable = shares_sum(analysis, RESIDUAL_PHASES) if lines else sync
    evidence: list[str] = []
    if lines:
        kinds = sorted({_KIND_WORDS.get(s.kind, s.kind) for s in lines})
        first = lines[0]
        where = ", ".join(str(s.line) for s in lines[:6]) + (" ..." if len(lines) > 6 else "")
        evidence.append(f"every step reads device values on the host ({', '.join(kinds)}): line(s) {where}")
        evidence.append(f"line {first.line}: `{first.text}`")
        evidence.append(residual_evidence(analysis, removable))
    else:
        evidence.append(
            f"host syncs take {pct(sync or 0.0)} of the step; the reads are not in this cell's "
            "source (a function from another cell?)"
        )
    if sync is not None:
        evidence.append(f"of which waiting in .item()/synchronize itself: {pct(sync)}")
    if reads is not None:
        evidence.append(f"{reads:.1f} scalar read(s) per step in the trace")
    if not has_gpu(run):
        evidence.append(
            "measured on the CPU, where a read costs little; on a GPU each read also waits for "
            "every queued kernel"
        )
    removed = removable * (1 - 1 / EVERY) if removable is not None else None
    severity = severity_of(removable, low=0.0) or "low"
    bound = gain_bound(removed, analysis)
    evidence.append(f"gain if values are read every {EVERY} steps: {fmt_bound(bound)} (Amdahl over that share)")
    return finding(
        "syncs.per_step",
        "The loop reads device values on the host every step",
        severity,
        evidence,
        f"Read losses/metrics every {EVERY} steps (or keep a running sum on the device with "
        ".detach() and read it once); don't print tensors every step.",
        _SOURCE,
        phase_share=removed,
        bound=bound,
        line=lines[0].line if lines else None,
        fix_id="throttle_host_syncs",
        fix_params={"every": EVERY},
    )


RULES = (per_step_syncs,)
