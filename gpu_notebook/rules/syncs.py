"""Per-step host syncs: ``.item()``, ``.cpu()``, ``float(t)``, printing or logging a tensor every step.

Each such read makes the host wait until the device has finished every queued kernel, so the
CPU cannot run ahead and the GPU idles at each one. The scan finds the lines; the measurement
gives the share:

- the removable share is the "sync" phase (``aten::item`` / ``_local_scalar_dense`` /
  synchronize) and the stack sampler's time on the reading lines themselves (formatting,
  printing): not the whole host time outside the model, which holds work the fix leaves;
- a read whose value the loop needs (``if loss.item() < x: break``) is named as such, with its
  alternative (check the condition every N steps), and never patched;
- severity with TraceML's levels for the residual (warn 10%, critical 20%,
  ``diagnostics/step_time/policy.py``); a per-step read under 5% is still reported, as "low",
  because on a GPU it serialises the pipeline whatever its own cost.
The fix reads the values every ``EVERY`` steps, so it removes ``(1 - 1/EVERY)`` of that share.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    WARN,
    finding,
    gain_bound,
    has_gpu,
    measured_names,
    profiled_steps,
    severity_of,
    share,
    shares_sum,
)

EVERY = 10  # read values every 10 steps: the fix's default and what the bound assumes
# Fewer stack samples than this measure no line's share: with none of n samples on a line, its
# share is still up to 3/n (the rule of three, 95%), over the 10% warn level below 30 samples.
# Seen: a busy machine left the sampler 3 samples of a 40-step cell, and a per-step print
# read "0% of the step" from them.
MIN_LINE_SAMPLES = 30
# Reads whose cost on the CPU is their formatting (the sampler's time on the line), not the
# sync wait: a CPU tensor is ready when it is read.
_FORMATTING = ("print-tensor", "log-tensor", "fstring-tensor")
_SYNC_OPS = ("aten::_local_scalar_dense", "aten::item")

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); PyTorch performance tuning "
    "guide (avoid unnecessary CPU-GPU synchronization)"
)
_ON_THE_CPU = (
    "measured on the CPU, where a read costs little; on a GPU each read also waits for every "
    "queued kernel"
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
    calls = max(
        (op.calls for op in analysis.top_ops if op.name in _SYNC_OPS and op.device == "cpu"),
        default=None,
    )
    return calls / steps if calls is not None else None


def residual_evidence(analysis: Analysis, residual: float | None) -> str:
    names = measured_names(analysis, RESIDUAL_PHASES)
    if residual is None:
        return "host time outside the model and optimizer: not measured (no phase split)"
    return (
        f"host time outside data loading, the model and the optimizer ({' + '.join(names)}): "
        f"{fmt_share(residual)} of the step"
    )


def lines_share(analysis: Analysis, lines: tuple[SourceLine, ...]) -> float | None:
    """Share of the sampled time spent on ``lines`` (their read, formatting and printing).

    From the stack sampler's line counts; None when lines were not sampled, or too few times
    to measure a share (``MIN_LINE_SAMPLES``).
    """
    stacks = analysis.stacks
    if stacks is None or not stacks.lines or stacks.samples < MIN_LINE_SAMPLES:
        return None
    wanted = {s.line for s in lines}
    return sum(stat.share for stat in stacks.lines if stat.line in wanted)


def removable_share(analysis: Analysis, lines: tuple[SourceLine, ...]) -> tuple[float | None, str]:
    """What reading the values less often can remove, and where that figure comes from.

    The measured sync wait plus the time the sampler saw on the reading lines themselves
    (formatting, printing): never the whole host time outside the model, which holds work the
    fix does not touch.
    """
    sync = share(analysis, "sync")
    own = lines_share(analysis, lines) if lines else None
    if own is None:
        if sync is None:
            return None, "not measured (no trace and no line sampling)"
        return sync, "the measured sync wait (formatting time not sampled)"
    if sync is None:
        return own, "the sampled time on those lines"
    # The lines' samples include their own wait in .item(); other lines' syncs are in `sync`.
    return max(sync, own), "the measured sync wait and the sampled time on those lines"


def per_step_syncs(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Device values read on the host every step."""
    lines = loop_lines(facts, facts.syncs)
    optional = tuple(s for s in lines if not s.needed)
    needed = tuple(s for s in lines if s.needed)
    sync = share(analysis, "sync")
    reads = reads_per_step(analysis)
    if not lines and (sync is None or sync < WARN):
        return None
    if lines and not optional:
        return needed_reads(run, analysis, needed)
    removable, how = removable_share(analysis, optional)
    if (
        not has_gpu(run)
        and lines_share(analysis, optional) is None
        and any(s.kind in _FORMATTING for s in optional)
    ):
        # On the CPU the sync wait is ~0 whatever the print costs: that figure would call the
        # read free and rank it under any noise. Its cost is unmeasured, not small.
        removable, how = None, "not measured: too few stack samples of those lines"
    evidence: list[str] = []
    if optional:
        kinds = sorted({_KIND_WORDS.get(s.kind, s.kind) for s in optional})
        first = optional[0]
        where = ", ".join(str(s.line) for s in optional[:6]) + (" ..." if len(optional) > 6 else "")
        evidence.append(
            f"every step reads device values on the host ({', '.join(kinds)}): line(s) {where}"
        )
        evidence.append(f"line {first.line}: `{first.text}`")
    else:
        evidence.append(
            f"host syncs take {fmt_share(sync or 0.0)} of the step; the reads are not in this cell's "
            "source (a function from another cell?)"
        )
    if sync is not None:
        evidence.append(f"waiting in .item()/synchronize itself: {fmt_share(sync)} of the step")
    evidence.append(
        f"what reading less often removes: {fmt_share(removable) if removable is not None else 'n/a'} "
        f"of the step ({how})"
    )
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    if residual is not None and removable is not None and residual > removable + 0.05:
        evidence.append(
            f"the rest of the host time outside the model ({fmt_share(residual - removable)}) is other "
            "Python work, which reading less often does not remove"
        )
    if needed:
        evidence.append(
            f"line {needed[0].line} reads a value the loop needs (`{needed[0].text}`): kept as it is"
        )
    if reads is not None:
        evidence.append(f"{reads:.1f} scalar read(s) per step in the trace")
    if not has_gpu(run):
        evidence.append(_ON_THE_CPU)
    removed = removable * (1 - 1 / EVERY) if removable is not None else None
    severity = severity_of(removable, low=0.0) or "low"
    bound = gain_bound(removed, analysis)
    evidence.append(
        f"gain if values are read every {EVERY} steps: {fmt_gain(bound)} (Amdahl over that share)"
    )
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
        line=optional[0].line if optional else None,
        fix_id="throttle_host_syncs",
        fix_params={"every": EVERY},
    )


def needed_reads(run: Run, analysis: Analysis, needed: tuple[SourceLine, ...]) -> Finding:
    """Every per-step read decides what the loop does: name it, and say what could replace it."""
    first = needed[0]
    removable, how = removable_share(analysis, needed)
    evidence = [
        f"line {first.line} reads a device value every step and the loop needs it: `{first.text}`",
        f"its cost: {fmt_share(removable) if removable is not None else 'not measured'} of the step ({how})",
    ]
    if has_gpu(run):
        evidence.append(
            "each read waits for every queued kernel: the host cannot run ahead of the GPU"
        )
    else:
        evidence.append(_ON_THE_CPU)
    removed = removable * (1 - 1 / EVERY) if removable is not None else None
    bound = gain_bound(removed, analysis)
    evidence.append(
        f"gain if the condition is checked every {EVERY} steps: {fmt_gain(bound)} (the loop may then "
        f"run up to {EVERY - 1} steps past its stop)"
    )
    return finding(
        "syncs.needed_read",
        "The loop reads a value it needs every step (a stop condition)",
        "low" if removable is None or removable < WARN else "medium",
        evidence,
        f"The read is needed, so no patch: to make it cheaper, compute the condition on the device "
        f"(`stop = loss.detach() < threshold`) and read it every {EVERY} steps "
        f"(`if step % {EVERY} == 0 and stop.item(): break`), or stop on an epoch boundary.",
        _SOURCE,
        phase_share=removed,
        bound=bound,
        line=first.line,
    )


RULES = (per_step_syncs,)
