"""Work the step repeats for humans: logging every step, and validation inside every step.

Thresholds: TraceML's residual levels (warn 10%, critical 20%, ``diagnostics/step_time/policy.py``)
and the seed articles' advice "validate and log every N steps, not every step".

Validation is found twice: in the source (``model.eval()``, a ``torch.no_grad()`` block, a loop
over a ``val``/``test`` loader or an ``evaluate(...)`` call inside the training loop, not behind an
``if``), and in the measurement (the step clock counts more model forwards and DataLoader
batches per optimizer step than backwards). Its share is estimated from the phase split:
``forward x extra/all forwards + data x extra/all batches``, assuming a validation forward costs
no more than a training forward (true without autograd, for equal batches): an estimate, said so.
"""

from __future__ import annotations

from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    fmt_bound,
    finding,
    gain_bound,
    pct,
    phase_source,
    severity_of,
    share,
    shares_sum,
)
from gpu_notebook.rules.source_scan import SourceFacts
from gpu_notebook.rules.syncs import EVERY, loop_lines, residual_evidence

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); seed articles: validate and "
    "log every N steps, not every step"
)


def per_step_logging(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """print / logger / tracker / progress-bar calls on every step (no tensor read: syncs covers those)."""
    lines = loop_lines(facts, facts.logging)
    if not lines:
        return None
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    removed = residual * (1 - 1 / EVERY) if residual is not None else None
    bound = gain_bound(removed, analysis)
    first = lines[0]
    evidence = [
        f"{len(lines)} logging call(s) run on every step: line(s) "
        + ", ".join(str(s.line) for s in lines[:6]),
        f"line {first.line}: `{first.text}`",
        residual_evidence(analysis, residual),
        f"gain if the logs run every {EVERY} steps: {fmt_bound(bound)} (upper bound: the share "
        "also holds other host work)",
    ]
    return finding(
        "logging.per_step",
        "The loop logs on every step",
        severity_of(residual, low=0.0) or "low",
        evidence,
        f"Log every {EVERY} steps (if step % {EVERY} == 0:); in Jupyter every print is a message "
        "to the browser.",
        _SOURCE,
        phase_share=removed,
        bound=bound,
        line=first.line,
        fix_id="log_every_n",
        fix_params={"every": EVERY},
    )


def _median(values: list[int]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def validation_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Validation runs inside each training step."""
    lines = loop_lines(facts, facts.validation)
    if not lines:
        return None  # validation behind an `if` (every N steps) is what we would advise
    evidence = [
        "validation inside the training loop, on every step: line(s) "
        + ", ".join(f"{s.line} (`{s.text}`)" for s in lines[:3])
    ]
    # Forward calls per step (all top-level modules, loss modules included) from the steps the
    # clock timed, against the training forwards the source makes per backward.
    timed = [s for s in run.steps.steps if s.timed and (s.forward_calls or s.backward_calls)]
    forwards = _median([s.forward_calls for s in timed])
    backwards = _median([s.backward_calls for s in timed])
    loop = next((lp for lp in facts.loops if lp.line == lines[0].step_loop_line), None)
    per_backward = loop.grad_module_calls if loop is not None else 0
    estimate: float | None = None
    if forwards and backwards is not None and per_backward > 0:
        extra = max(0.0, forwards - per_backward * backwards)
        evidence.append(
            f"{forwards:.0f} module forward calls per step ({len(timed)} timed steps), "
            f"{per_backward * backwards:.0f} of them for training: {extra:.0f} for validation"
        )
        forward = share(analysis, "forward")
        data = share(analysis, "data")
        if forward is not None:
            estimate = (forward + (data or 0.0)) * extra / forwards
            evidence.append(
                f"estimated validation share: {pct(estimate)} of the step ({phase_source(analysis)}; "
                "the forward and data shares times the validation part of the forward calls, "
                "assuming a validation forward costs no more than a training one)"
            )
    else:
        evidence.append("validation share: not measured (the step clock timed no forward calls to split)")
    removed = estimate * (1 - 1 / EVERY) if estimate is not None else None
    bound = gain_bound(removed, analysis)
    evidence.append(f"gain if validation runs every {EVERY} steps: {fmt_bound(bound)}")
    return finding(
        "logging.validation_every_step",
        "Validation runs inside every training step",
        severity_of(estimate, low=0.0) or "low",
        evidence,
        f"Validate every {EVERY} steps or once per epoch: put the validation block under "
        f"`if step % {EVERY} == 0:` (or after the loop).",
        _SOURCE,
        phase_share=removed,
        bound=bound,
        line=lines[0].line,
    )


RULES = (per_step_logging, validation_every_step)
