"""The words of what a profiler window covered: a ``within-step`` window's note, from the
figures the capture hands up (``records.WithinStep``)."""

from __future__ import annotations

import dataclasses

from gpu_notebook.records import ProfileWindow, Run, WithinStep

# What the report reads instead of the trace's steps, the window having held no whole step.
_READ_INSTEAD = (
    "so the trace holds no whole step: the phases are the step clock's timings of whole steps, "
    "the top operators the trace's"
)


def within_step_words(w: WithinStep) -> str:
    """What a window kept at an anchor upgrade (or a regroup of the steps) covered."""
    steps = f"{w.recorded} step{'' if w.recorded == 1 else 's'}"
    if w.regrouped:
        return (
            f"the window recorded {steps} counted before the loop's cycle of optimizer steps "
            "was learnt (several optimizers an iteration, each ending a step until the cycle "
            f"repeated): they are parts of one step, {_READ_INSTEAD}"
        )
    if not w.trained:
        return (
            f"the window recorded {steps} counted at {w.counted_at} that ran no backward, "
            f"before the first step counted at {w.anchor}: work before training (an evaluation "
            f"over a DataLoader); steps are counted at {w.anchor} from then on, so the trace "
            "holds none of them: the phases are the step clock's timings of whole steps, the "
            "top operators the trace's (of that work)"
        )
    return (
        f"the window recorded {steps} counted at {w.counted_at} before the first step counted "
        f"at {w.anchor} ended (a closure optimizer's forward and backward calls, or gradient "
        f"accumulation's micro-batches); steps are counted at {w.anchor} from then on, "
        f"{_READ_INSTEAD}"
    )


def worded_windows(run: Run) -> Run:
    """``run`` with each ``within-step`` window's ``message`` worded (one worded already, an
    older record's, is kept)."""

    def worded(w: ProfileWindow) -> ProfileWindow:
        if w.within_step is None or w.message is not None:
            return w
        return dataclasses.replace(w, message=within_step_words(w.within_step))

    window, more = worded(run.window), tuple(worded(w) for w in run.more_windows)
    if window is run.window and all(a is b for a, b in zip(more, run.more_windows, strict=True)):
        return run
    return dataclasses.replace(run, window=window, more_windows=more)
