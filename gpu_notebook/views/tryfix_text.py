"""Text of ``gpucheck run --try-fixes``: per offered fix, its predicted range, the measured
speedup with its spread, and what the measurement says."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_factor, fmt_gain
from gpu_notebook.records import FixTrial, TryFixes
from gpu_notebook.views.wording import step_counting

__all__ = ["render_try_fixes", "trial_line"]


def render_try_fixes(tf: TryFixes) -> str:
    if not tf.trials:
        return "\n".join(["Fixes tried: none", *(f"  - {n}" for n in tf.notes)])
    head = (
        f"Fixes tried (warm-up {tf.warmup_steps} + {tf.steps} steps a run, the script as it is "
        f"and each fix interleaved, {tf.rounds} runs each; {tf.spent_s:.0f} s of a "
        f"{tf.budget_s:.0f} s budget):"
    )
    lines = [head]
    for t in tf.trials:
        lines.extend(trial_line(t))
    lines += [f"  - {n}" for n in tf.notes]
    return "\n".join(lines)


def trial_line(t: FixTrial) -> list[str]:
    """One fix: title, predicted range, measured speedup (spread), verdict; then its error."""
    # The model's high end, never the margin's widening of it (what the measurement is read
    # against, not a gain promised: views.wording.headline_gain).
    high = t.predicted_model_bound if t.predicted_model_bound is not None else t.predicted_bound
    predicted = f"predicted {fmt_gain(high, t.predicted_low)}"
    if t.speedup is not None:
        # An added look reads the rounds' own spread (tryfix.sequential): said with its level.
        over = (
            f", {t.interval_level:.1%} over {t.rounds} rounds ({t.added_rounds} added)"
            if t.interval_level is not None
            else ""
        )
        # The figure is the median of the rounds' ratios (tryfix.samples.median_of_rounds).
        median = f"median of {len(t.per_round)} rounds; " if t.per_round else ""
        measured = (
            f"measured {fmt_factor(t.speedup)} ({median}"
            f"range {fmt_factor(t.speedup_low)}-{fmt_factor(t.speedup_high)}{over}; runs "
            + ", ".join(fmt_factor(r) for r in t.per_round)
            + ")"
        )
    else:
        measured = "not measured"
    tag = "  [recommended]" if t.recommended else ""
    out = [f"  {t.title}: {predicted}, {measured}: {t.verdict.upper()}{tag}"]
    out += [f"      {line}" for line in t.error_lines]
    notes = [n for n in (t.note, *step_counting(t.own_time)) if n]
    if notes:
        out.append(f"      ({'; '.join(notes)})")
    return out
