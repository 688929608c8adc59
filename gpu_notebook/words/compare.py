"""Words of a before/after (report/compare.py): the comparison's own findings, and what a fix
the user ran measured."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_factor, fmt_gain, fmt_share
from gpu_notebook.records import FixRunBefore, NoStepAfter, SlowerAfterFix
from gpu_notebook.words.common import Words, worder, words

_SOURCE = "measured before/after of the same cell (gpucheck comparison)"


@worder(SlowerAfterFix)
def slower_after_fix(s: SlowerAfterFix) -> Words:
    evidence = [
        f"this cell is the fix `{s.fix_id}` proposed by the run at {s.baseline_started_at} "
        f'("{s.proposing_title}")',
        f"measured: {fmt_factor(s.speedup)} the throughput of that run "
        f"(predicted: {fmt_gain(s.predicted_high, s.predicted_low)})",
        *(
            f"{phase}: {fmt_share(before)} of the step before, {fmt_share(after)} now"
            for phase, before, after in s.grown
        ),
    ]
    return words(
        f"The fix made the loop slower ({fmt_factor(s.speedup)}): go back to the earlier cell",
        evidence,
        "Undo this change (run the earlier cell again): on this machine it costs more than it "
        "saves. Its findings about the same cause are left out here, since they read this "
        "slower run.",
        _SOURCE,
    )


@worder(NoStepAfter)
def no_step_after(s: NoStepAfter) -> Words:
    what = f"the fix `{s.fix_id}`" if s.fix_id is not None else "the same cell"
    return words(
        f"This run took no training step (the run at {s.baseline_started_at} took "
        f"{s.before_steps}): {what} was not measured",
        (
            f"steps counted: {s.before_steps} in the run at {s.baseline_started_at}, none in this one",
        ),
        "Run the earlier cells that build what this cell trains with again (a Trainer that "
        "reached its max_epochs or max_steps fits nothing the second time; an iterator ends "
        "after one pass), then this cell.",
        _SOURCE,
    )


def fix_run_line(s: FixRunBefore) -> str:
    """The evidence line a finding offering the same fix gets."""
    return (
        f"fix `{s.fix_id}` was run: measured {s.speedup:.2f}x ({s.low:.2f}-{s.high:.2f}x), "
        f"{s.earned} against its predicted {fmt_gain(s.predicted_high, s.predicted_low)}"
    )


def not_offered_again(s: FixRunBefore) -> str:
    """Why the fix's patch is not offered again (its proposal's refusal)."""
    return (
        f"{fix_run_line(s)}: not offered again as it is; the cause is elsewhere or "
        "the change did not reach the loop"
    )
