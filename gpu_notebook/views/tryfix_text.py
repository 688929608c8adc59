"""Text of ``gpucheck run --try-fixes``: per offered fix, its predicted range, the measured
speedup with its spread, and what the measurement says; and the words of what the trials hand
up as records (``tryfix/said.py``): ``word_trials`` fills the report's notes before its outputs
are written, ``word_said`` words one record (the progress lines too)."""

from __future__ import annotations

import dataclasses
import functools

from gpu_notebook.formatting import fmt_factor, fmt_gain, fmt_seconds, fmt_share
from gpu_notebook.records import FixTrial, Report, TrialRun, TrialSaid, TryFixes
from gpu_notebook.tryfix import said as S
from gpu_notebook.views.wording import step_counting
from gpu_notebook.words.dispatch import says

__all__ = [
    "render_try_fixes",
    "run_lines",
    "trial_line",
    "word_said",
    "word_trials",
    "word_try_fixes",
]


def word_trials(report: Report) -> Report:
    """The report with its trials' records worded (``TryFixes.notes``, ``FixTrial.note``); a
    report without trials, or worded already, as it is."""
    tf = report.try_fixes
    return report if tf is None else dataclasses.replace(report, try_fixes=word_try_fixes(tf))


def word_try_fixes(tf: TryFixes) -> TryFixes:
    """The trials with their records worded into their notes (worded already: as they are)."""
    trials = tuple(
        dataclasses.replace(t, note="; ".join(word_said(n) for n in t.said) or t.note, said=())
        for t in tf.trials
    )
    notes = (*tf.notes, *(word_said(n) for n in tf.said))
    return dataclasses.replace(tf, trials=trials, notes=notes, said=())


@functools.singledispatch
def word_said(said: TrialSaid) -> str:
    raise TypeError(f"no words for {type(said).__name__}")


says(
    word_said,
    S.NothingToTry,
    lambda s: "no fix with a measurable bound was offered as a patch: nothing to try",
)

says(word_said, S.NoPatch, lambda s: f"not tried: {s.title} (no patch of the script: {s.refusal})")


@word_said.register
def _(s: S.BoundTooSmall) -> str:
    # The bound said is the model's (the one that is small); the range a run may read, widened
    # by the run's margin, beside it (a GPU-bound run read "gains 0.42x-2.42x, a bound within
    # the 5%").
    said = fmt_gain(s.bound, s.low)
    stated = fmt_gain(s.stated_high, s.stated_low)
    widened = f"; {stated} as two runs of this script may read it" if stated != said else ""
    return (
        f"not tried: {s.title} (its fix gains {said}, a bound within the {s.run_to_run:.0%} two "
        f"runs of the same script differ by{widened}: it may have no measurable effect, not "
        "recommended)"
    )


says(
    word_said,
    S.RunTooShort,
    lambda s: (
        f"not tried: {s.title} (not measurable on a run this short: the run has {s.steps} "
        f"step(s), and a trial times steps past its warm-up of {s.warmup} and needs {s.needed} "
        "of them; run more steps to measure it)"
    ),
)


@word_said.register
def _(s: S.BaselineFailed) -> str:
    if s.why == "timed out":
        return "the script as it is did not finish its trial run within the budget"
    if s.why == "broke":
        return "the script as it is broke in its trial run: " + "; ".join(s.error_lines)
    return "the script as it is ran no step the step clock could time"


@word_said.register
def _(s: S.BudgetFixesCut) -> str:
    if s.kept == 0:
        # Nothing run past the first: a run of the script alone compares nothing.
        need_s = s.rounds * 2 * s.per_run_s
        return (
            f"budget {s.budget_s:.0f} s: a run takes about {s.per_run_s:.1f} s and a fix needs "
            f"{s.rounds} runs beside {s.rounds} of the script as it is, so none of the "
            f"{s.offered} offered fixes fit: nothing was tried past the first run (it measured "
            f"a run's time); --try-budget {need_s:.0f} or more tries one"
        )
    return (
        f"budget {s.budget_s:.0f} s: a run takes about {s.per_run_s:.1f} s, so {s.kept} of the "
        f"{s.offered} offered fixes were tried ({s.rounds} rounds); raise --try-budget to try "
        "the rest"
    )


says(
    word_said,
    S.BudgetRoundsCut,
    lambda s: f"budget {s.budget_s:.0f} s: {s.rounds} rounds instead of {s.asked}",
)

says(
    word_said,
    S.BudgetRanOut,
    lambda s: "the budget ran out before every planned run: the rest were skipped",
)


@word_said.register
def _(s: S.RunsSized) -> str:
    if s.held_by == "asked":
        covers = (
            f": at {fmt_seconds(s.step_s)} a step they cover {fmt_seconds(s.steps * s.step_s)}"
            if s.step_s is not None
            else ""
        )
        return f"each run measured the {s.steps} steps asked{covers}"
    why = {
        "time": f"a run's steps should cover about {fmt_seconds(s.target_s)}, so that a "
        "neighbour's burst of CPU does not decide a round",
        "budget": f"a run's steps were held to {fmt_seconds(s.target_s)}, the budget's share "
        "a run (raise --try-budget for longer runs)",
        "script": "that is every step the script has past its warm-up",
        "cap": "the most a run measures",
    }[s.held_by]
    pilot = (
        f"; the first run of the script as it is ({s.pilot_steps} steps) sized them and is not "
        "compared"
        if s.pilot_steps is not None
        else ""
    )
    return (
        f"each run measured {s.steps} steps (--try-fixes {s.asked} is the least): the script's "
        f"step is {fmt_seconds(s.step_s)} here, and {why}{pilot}"
    )


@word_said.register
def _(s: S.StillUndecided) -> str:
    end = (
        f"the cap of {s.cap} added rounds"
        if s.capped
        else "the budget ran out: raise --try-budget to settle it"
    )
    return f"still undecided after {s.added} added round(s): {', '.join(s.titles)}; {end}"


says(
    word_said,
    S.FollowerRank,
    lambda s: f"this rank ran rank 0's {s.runs} trial runs; rank 0 reports the verdicts",
)

says(
    word_said,
    S.TryingBaseline,
    lambda s: f"trying fixes: the script as it is, warm-up {s.warmup} + {s.steps} steps",
)


@word_said.register
def _(s: S.Trying) -> str:
    label = "the script as it is" if s.title is None else s.title
    if s.retry_s is None:
        return f"trying fixes: {label}"
    return f"trying fixes: {label} (its warm-up again, up to {s.retry_s:.0f} s)"


says(
    word_said,
    S.WarmupStalled,
    lambda s: (
        f"its warm-up ({s.warmup} steps: compilation, worker start-up) did not end within "
        f"{s.limit_s:.0f} s, tried twice: a compiled model's first steps can take that long on "
        "a busy machine; raise --try-budget to give it more"
    ),
)


@word_said.register
def _(s: S.StepsUnfinished) -> str:
    pace = (
        f"; its ended steps took {fmt_seconds(s.median_s)} a step (median)"
        if s.median_s is not None
        else ""
    )
    base = (
        f", the script as it is {fmt_seconds(s.baseline_median_s)}"
        if s.median_s is not None and s.baseline_median_s is not None
        else ""
    )
    return (
        f"a run of it did not end its timed steps within its {s.limit_s:.0f} s limit "
        f"({s.factor:g}x the slowest run so far) after its warm-up ended: stopped after "
        f"{s.timed} of {s.asked}{pace}{base}; a stopped run is no measurement, so no verdict "
        "(the runs' times are in the report's JSON, try_fixes.runs)"
    )


@word_said.register
def _(s: S.BudgetEndedRun) -> str:
    where = (
        f"after {s.timed} of its {s.asked} timed steps"
        if s.warmed
        else "in its warm-up (compilation, worker start-up)"
    )
    return (
        f"the budget ran out during a run of it: stopped at the {s.limit_s:.0f} s left, {where}; "
        f"a run of the script as it is takes about {s.per_run_s:.0f} s: raise --try-budget"
    )


says(word_said, S.BudgetNotReached, lambda s: "skipped: the budget did not reach it")

says(word_said, S.PatchBroke, lambda s: "the patched script failed where the script as it is ran")


@word_said.register
def _(s: S.TooFewRuns) -> str:
    if s.budget_out and s.run_s is not None:
        return (
            f"only {s.finished} run(s) of the fix finished: the budget left could not hold "
            f"another (a run takes about {s.run_s:.0f} s); raise --try-budget"
        )
    return f"only {s.finished} run(s) of the fix finished"


says(word_said, S.TooFewSteps, lambda s: "too few timed steps to compare")


@word_said.register
def _(s: S.Undecided) -> str:
    why = {
        "budget": "the budget ran out",
        "cap": f"the cap of {s.cap} added rounds",
        "no round": "no round could be added",
    }[s.why]
    head = (
        f"undecided: {s.rounds} rounds, interval {fmt_factor(s.low)}-{fmt_factor(s.high)} ({why})"
    )
    if s.spread is None or s.gain is None:
        return head
    if s.rounds_needed is None:
        return (
            f"{head}; a gain of {fmt_share(s.gain)} is not above 1x: no number of rounds tells "
            "it from none"
        )
    spread, gain = fmt_share(s.spread), fmt_share(s.gain)
    noise = (
        f"the machine's noise over the trial is larger than the fix's gain: its rounds differ by "
        f"{spread} (their spread), the gain to tell from none is {gain}"
        if s.spread >= s.gain
        else f"its rounds differ by {spread} (their spread), under the {gain} gain to tell from none"
    )
    more = s.rounds_needed - s.rounds
    cost = f", ~{more * s.round_s:.0f} s" if s.round_s is not None and more > 0 else ""
    return (
        f"{head}; {noise}; about {s.rounds_needed} rounds in all would decide it at this spread "
        f"({max(0, more)} more{cost})"
    )


@word_said.register
def _(s: S.TooSmallHere) -> str:
    runs = (
        f"this trial's {s.runs} runs of the script as it is differed by"
        if s.source == "base runs"
        else "two runs of the script differ by (the profiled run's margin)"
    )
    return (
        f"too small to measure here: its predicted gain, {fmt_gain(s.bound, s.low)}, is within "
        f"the {s.margin:.0%} {runs}: no run on this machine as loaded tells a gain that size "
        "from none; not recommended on this measurement (try it on a quieter machine)"
    )


@word_said.register
def _(s: S.TooBusy) -> str:
    head = (
        f"its runs waited {fmt_share(s.fix_wait)} of their steps' time for a core (the "
        f"script's {fmt_share(s.baseline_wait)}): too busy to judge from the steps"
    )
    if s.rounds < 3:
        return f"{head}, and {s.rounds} round(s) give no spread of whole runs; rerun on a quieter machine"
    return f"{head}; the {s.rounds} interleaved rounds' own spread decides"


says(word_said, S.DecidedAfter, lambda s: f"decided after {s.added} added round(s)")

says(word_said, S.RunEnded, lambda s: f"a run ended after {s.steps} timed steps (the script's end)")


@word_said.register
def _(s: S.MarginRead) -> str:
    # Which margin the range and the planned look were read with, and from how many runs.
    profiled = f"; the profiled run's margin was {s.profiled:.0%}" if s.profiled > 0 else ""
    if s.source == "profiled run":
        return (
            f"range read widened by the profiled run's {s.margin:.0%}: {s.runs} run(s) of the "
            f"script as it is are too few to read what runs differ by here ({s.needed} needed)"
        )
    head = f"range read widened by {s.margin:.0%} on each side"
    runs = f"this trial's {s.runs} runs of the script as it is"
    pairs = "their one pair" if s.runs == 2 else "the median of their pairs"
    if s.spread is not None and s.spread < s.margin:
        return (
            f"{head}: {runs} differed by {s.spread:.0%} ({pairs}), under the {s.margin:.0%} "
            f"taken at least{profiled}"
        )
    return f"{head}, what {runs} differed by ({pairs}{profiled})"


says(
    word_said,
    S.PerSample,
    lambda s: f"its step takes {s.work:g}x the samples: step times read per sample",
)


def render_try_fixes(tf: TryFixes) -> str:
    tf = word_try_fixes(tf)
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
    lines += [f"  - {line}" for line in run_lines(tf.runs)]
    return "\n".join(lines)


_ENDED = {
    "stopped": "stopped at its steps",
    "finished": "the script ended on its own",
    "error": "failed",
    "limit": "stopped at its limit",
    "killed": "killed at its limit (nothing written)",
    "no result": "exited with no result",
}


def run_lines(runs: tuple[TrialRun, ...]) -> list[str]:
    """One line per run that did not end as planned (stopped at its steps, its exit on time):
    where its time went, so a report says why a fix went unmeasured."""
    out = []
    for n, r in enumerate(runs, 1):
        if r.ended == "stopped" and not r.exit_killed and not r.exit_code:
            continue
        arm = r.arm or "the script as it is"
        times = [f"{r.wall_s:.1f} s in all"]
        if r.first_step_s is not None:
            times.append(f"first step ended at {r.first_step_s:.1f} s")
        if r.warm_s is not None:
            times.append(f"warm-up at {r.warm_s:.1f} s")
        steps = f"{r.steps_timed} of {r.steps_asked} timed steps"
        if r.step_median_s is not None:
            steps += f" ({fmt_seconds(r.step_median_s)} a step)"
        times.append(steps)
        if r.exit_s is not None:
            killed = ", killed past its grace: its steps kept" if r.exit_killed else ""
            times.append(f"exit {r.exit_s:.1f} s{killed}")
        if r.exit_code and not r.exit_killed:
            times.append(f"exit code {r.exit_code}")
        if r.stacks:
            # Where the script's thread (the one the signal came to) was at the limit.
            times.append(f"at its limit in {r.stacks[0].partition(': ')[2] or '?'}")
        limit = f"the budget's last {r.limit_s:.0f} s" if r.budget_limited else f"{r.limit_s:.0f} s"
        out.append(f"run {n} ({arm}, limit {limit}): {_ENDED.get(r.ended, r.ended)}; "
                   + ", ".join(times))  # fmt: skip
    return out


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
