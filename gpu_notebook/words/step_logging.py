"""Words of the rules on work the step repeats for humans (rules/step_logging.py)."""

from __future__ import annotations

from gpu_notebook.cell.blocks import PROFILER_SETTING
from gpu_notebook.cell.facts import LightningLog
from gpu_notebook.formatting import fmt_factor, fmt_gain, fmt_ms, fmt_share
from gpu_notebook.records import PeriodicCost
from gpu_notebook.rules.common import SUGGEST, EveryStepLines
from gpu_notebook.rules.step_logging import (
    MIN_SEEN,
    RARE_LOGS,
    RARE_REDRAW_S,
    Advice,
    FrameworkOverhead,
    FrameworkSeen,
    PeriodicLogging,
    PerStepLogging,
    ProgressRedraw,
    ValidationEveryStep,
)
from gpu_notebook.rules.syncs import EVERY
from gpu_notebook.words.common import (
    PROFILER_CYCLE,
    PROFILER_CYCLE_FIX,
    Words,
    at,
    instead,
    lines_at,
    phase_source,
    place,
    rarer,
    residual_evidence,
    worder,
    words,
)

_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); seed articles: validate and "
    "log every N steps, not every step"
)
FRAMEWORK_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); Lightning docs (log_every_n_steps, "
    "TQDMProgressBar refresh_rate); HF TrainingArguments (logging_steps, disable_tqdm)"
)
# The framework code the rule finds in the sampled stacks, by its id in rules/step_logging.
LABELS = {
    "lightning-log": "Lightning self.log / logger connector",
    "lightning-logged": "values computed for Lightning's log calls (on their lines)",
    "lightning-loggers": "Lightning loggers",
    "lightning-bar": "Lightning progress bar",
    "hf-logging": "HF Trainer logging",
    "hf-callbacks": "HF Trainer callbacks",
    "tqdm-bar": "tqdm progress bar",
    "user-callback": "your callbacks' hooks (their own work)",
}


@worder(PerStepLogging)
def per_step_logging(s: PerStepLogging) -> Words:
    said = every_step_words(
        s,
        ("logging call(s)", "logging lines", "the logs", "the logs"),
        "The loop logs on every step",
        f"Log every {EVERY} steps (if step % {EVERY} == 0:); in Jupyter every print is a message "
        "to the browser.",
        _SOURCE,
    )
    if not s.flushed:
        return said
    flush = (
        f"line {', '.join(map(str, s.flushed))} flushes on every step (flush=True, .flush() or clear_output()): "
        "in a Jupyter kernel each flush waits for the kernel's output thread to send the text "
        "to the browser, where a plain print is batched"
    )
    return said._replace(evidence=(*said.evidence[:2], flush, *said.evidence[2:]))


def every_step_words(
    s: EveryStepLines, nouns: tuple[str, str, str, str], title: str, advice: str, source: str
) -> Words:
    """The words of host lines run on every step (rules/step_logging.every_step_lines); ``nouns``:
    what the lines are, what they are called as lines, as the subject of "run every N steps",
    and as what the step's host time holds."""
    calls, named, subject, held = nouns
    first = s.lines[0]
    evidence = [
        f"{len(s.lines)} {calls} run on every step: " + lines_at(s.lines),
        f"{at(first)}: `{first.text}`",
        residual_evidence(s.phases, s.residual),
    ]
    if s.own is not None:
        evidence.append(f"the {named} themselves: {fmt_share(s.own)} of the sampled time")
    evidence.append(
        f"gain if {subject} run every {EVERY} steps: {fmt_gain(s.bound, s.low)} (low end: the "
        f"{named}' own sampled time; high end: all host time outside the model, which also holds "
        "other host work)"
    )
    if s.bound is None:  # every_step_lines: not offered
        advice = (
            f"No patch offered: this run measured no time that holds {held} (no step phases); "
            f"measure it before gating them. {advice}"
        )
    return words(title, evidence, advice, source)


# What to do about a periodic block by its work (cell.blocks.WORK_KINDS), after "run it N x
# less often"; the logging's own advice is below.
_LESS_OFTEN = {
    "validation": "or validate on a fixed subset of the validation set (the same samples each "
    "time keep the curve comparable)",
    "a checkpoint save": "or save from a background thread (a CPU copy of the state_dict, then "
    "torch.save), or with torch.distributed.checkpoint.async_save",
    "work": "or move it out of the loop if it need not run during training",
}


@worder(PeriodicLogging)
def periodic_logging(s: PeriodicLogging) -> Words:
    first = s.text.splitlines()[0] if s.text else ""
    if s.setting == PROFILER_SETTING:
        return words(
            f"The cell's own torch.profiler takes {fmt_share(s.cost.share)} of the step time "
            f"(its cycle, every {s.cost.period} steps)",
            [f"{place(s.line, s.origin)} (`{first}`)", periodic_evidence(s.cost), PROFILER_CYCLE],
            PROFILER_CYCLE_FIX,
            _SOURCE,
        )
    if s.work != "logging":
        every = s.cost.period * EVERY
        return words(
            # "a checkpoint save" names the work in a sentence; as the subject, no article.
            f"The {s.work.removeprefix('a ')} every {s.cost.period} steps takes {fmt_share(s.cost.share)} of the "
            "step time",
            [
                f"{place(s.line, s.origin)} (`{first}`)",
                periodic_evidence(s.cost),
                f"gain if it runs every {every} steps: {fmt_gain(s.bound)} (Amdahl)",
            ],
            f"Run it {EVERY}x less often ({rarer(s.setting, every)} on "
            f"{place(s.line, s.origin)}{instead(s.setting)}), "
            f"{_LESS_OFTEN.get(s.work, _LESS_OFTEN['work'])}. No patch: how often to "
            f"{'validate' if s.work == 'validation' else 'run it'} is the training's choice.",
            _SOURCE,
        )
    return words(
        f"The logging every {s.cost.period} steps takes {fmt_share(s.cost.share)} of the step time",
        [
            f"{place(s.line, s.origin)} (`{first}`)",
            periodic_evidence(s.cost),
            f"gain if it logs every {s.cost.period * EVERY} steps: {fmt_gain(s.bound)} (Amdahl)",
        ],
        f"Log {EVERY}x less often: `% {s.cost.period * EVERY}` on {place(s.line, s.origin)}, or "
        "keep the "
        "values as tensors and read them together at the end of an epoch.",
        _SOURCE,
    )


@worder(ValidationEveryStep)
def validation_every_step(s: ValidationEveryStep) -> Words:
    evidence = [
        "validation inside the training loop, on every step: "
        + ", ".join(f"{at(line)} (`{line.text}`)" for line in s.lines[:3])
    ]
    if s.other is not None:
        evidence.append(
            f"time outside the training phases: {fmt_share(s.other)} of the step ({phase_source(s.phases)}; "
            "the validation's no_grad forward is counted there)"
        )
    else:
        evidence.append("validation share: not measured (no time outside the training phases)")
    evidence.append(f"gain if validation runs every {EVERY} steps: {fmt_gain(s.bound)}")
    return words(
        "Validation runs inside every training step",
        evidence,
        f"Validate every {EVERY} steps or once per epoch: put the validation block under "
        f"`if step % {EVERY} == 0:` (or after the loop).",
        _SOURCE,
    )


# Log lines named in one piece of advice; the rest are counted.
MAX_LOG_LINES = 4


def _hook(log: LightningLog) -> str:
    """``GradNormLogger.on_before_optimizer_step``: where a Lightning log call sits."""
    return ".".join(x for x in (log.owner, log.hook) if x)


def _logs_at(logs: tuple[tuple[LightningLog, float | None], ...]) -> str:
    """The log lines, each with its hook and, where one was read, the share of the sampled time
    under it (the values it computes included)."""
    parts = []
    for log, part in logs[:MAX_LOG_LINES]:
        where = ", ".join(x for x in (_hook(log), fmt_share(part) if part is not None else "") if x)
        text = f": `{log.at.text}`" if log.at.text else ""  # no source for a frame's line
        parts.append(f"{at(log.at)}" + (f" ({where})" if where else "") + text)
    if len(logs) > MAX_LOG_LINES:
        parts.append(f"{len(logs) - MAX_LOG_LINES} more")
    return "; ".join(parts)


def _of(a: Advice, of: str = " of the sampled time") -> str:
    """`` (12% of the sampled time)``, or nothing where no share was read."""
    return f" ({fmt_share(a.share)}{of})" if a.share is not None else ""


def _advice(a: Advice) -> str:
    if a.kind == "self-log":
        said = _logs_at(a.logs)
        if any(part is not None for _, part in a.logs):
            said = "share of the sampled time under each line: " + said
        elif a.share:
            said = "; ".join(x for x in (f"{fmt_share(a.share)} of the sampled time", said) if x)
        return (
            "self.log on every step" + (f" ({said})" if said else "") + ": Lightning runs each "
            "call in full on every step (on_step=False still adds the value to the epoch's "
            "mean each step; log_every_n_steps spaces only the logger's writes): log fewer "
            f"values, and call self.log under `if (self.global_step + 1) % {RARE_LOGS} == 0:` "
            "for what you watch per step (the steps Lightning's logger writes at "
            f"log_every_n_steps={RARE_LOGS})"
        )
    if a.kind == "callback-log":
        hooks = ", ".join(dict.fromkeys(_hook(log) for log, _ in a.logs if _hook(log)))
        return (
            "the Callback's log calls on every step ("
            + (
                "share of the sampled time under each line, the values they compute included: "
                if any(part is not None for _, part in a.logs)
                else ""
            )
            + f"{_logs_at(a.logs)}): run them every "
            f"{RARE_LOGS} steps, `if trainer.global_step % {RARE_LOGS} == 0:` around them in "
            f"{hooks or 'the hook'} (log_every_n_steps does not skip the calls nor the values "
            "they compute: it spaces only the logger's writes)"
        )
    if a.kind == "callback-hook":
        return _hooks_advice(a)
    if a.kind == "log-every-n":
        if a.value is None:
            return f"Trainer(log_every_n_steps={RARE_LOGS}) if it is lower now"
        return f"Trainer(log_every_n_steps={RARE_LOGS}) (log_every_n_steps={a.value} now)"
    if a.kind == "lightning-bar" and a.value is not None:
        if a.value >= EVERY * 2:
            return (
                f"the progress bar{_of(a, '')}: it redraws every {a.value:g} batches already "
                "(TQDMProgressBar(refresh_rate=...)): enable_progress_bar=False and no bar in "
                "the callbacks list"
            )
        return (
            f"the progress bar{_of(a, '')}: TQDMProgressBar(refresh_rate={EVERY * 2}) in the "
            f"Trainer's callbacks list (refresh_rate={a.value:g} now), or "
            "enable_progress_bar=False"
        )
    if a.kind == "lightning-bar":
        return (
            f"the progress bar{_of(a, '')}: TQDMProgressBar(refresh_rate={EVERY * 2}) "
            "or enable_progress_bar=False"
        )
    if a.kind == "logging-steps":
        if a.value is None:
            return f"TrainingArguments(logging_steps={RARE_LOGS}) if it logs more often now{_of(a)}"
        steps = a.value
        return (
            f"logging_steps={steps:g} now: the Trainer logs every "
            f"{'step' if steps == 1 else f'{steps:g} steps'}{_of(a)}: "
            f"TrainingArguments(logging_steps={RARE_LOGS})"
        )
    if a.kind == "disable-tqdm":
        return "disable_tqdm=True"
    if a.value is not None:
        return (
            f"mininterval={a.value:g} now: the bar already redraws rarely; what is left is its "
            "per-step bookkeeping: update it every N steps (bar.update(N)), or leave it out of "
            "the training loop"
        )
    return f"tqdm(..., mininterval={RARE_REDRAW_S:g}), or update the bar every N steps"


# The step counter a hook reads, by framework: HF hands ``state``, Lightning ``trainer``.
_HOOK_STEP = {"transformers": "state.global_step", "lightning": "trainer.global_step"}


def _hooks_advice(a: Advice) -> str:
    """The user's callback hooks run on every step, each with its share where one was read."""
    parts = []
    for hook, part in a.hooks[:MAX_LOG_LINES]:
        where = ", ".join(
            x for x in (f"line {hook.first_line}", fmt_share(part) if part is not None else "") if x
        )
        parts.append(f"{hook.function} ({where})")
    if len(a.hooks) > MAX_LOG_LINES:
        parts.append(f"{len(a.hooks) - MAX_LOG_LINES} more")
    steps = dict(a.steps)
    gates = ", ".join(
        dict.fromkeys(
            f"`if {steps.get(hook.function) or _HOOK_STEP.get(hook.framework, 'state.global_step')}"
            f" % {RARE_LOGS} == 0:`"
            for hook, _ in a.hooks
        )
    )
    share = f"{fmt_share(a.share)} of the sampled time: " if a.share is not None else ""
    return (
        f"your callback's hook runs its work on every step ({share}{'; '.join(parts)}): do "
        f"that work every {RARE_LOGS} steps, {gates} at the top of the hook, or in a hook "
        "that runs less often (on_log, on_epoch_end); no logging setting spaces a callback's "
        "own work"
    )


_FRAMEWORK = {"self-log": "Lightning", "callback-log": "Lightning", "log-every-n": "Lightning",
              "lightning-bar": "Lightning", "logging-steps": "HF", "disable-tqdm": "HF"}  # fmt: skip


def _fixes(advice: tuple[Advice, ...]) -> list[str]:
    """One fix a framework ("Lightning: a; b"), in the rule's order."""
    out: list[str] = []
    groups: dict[str, list[str]] = {}
    for a in advice:
        framework = _FRAMEWORK.get(a.kind)
        if a.kind == "callback-hook" and a.hooks:
            framework = "HF" if a.hooks[0][0].framework == "transformers" else "Lightning"
        if framework is None:
            out.append(_advice(a))
        elif framework in groups:
            groups[framework].append(_advice(a))
        else:
            groups[framework] = [_advice(a)]
            out.append(framework)  # its place; filled below
    return [f"{x}: " + "; ".join(groups[x]) if x in groups else x for x in out]


# How the share's time was read (FrameworkOverhead.clock), after the samples' description.
CLOCKS = {
    "cpu": "; their time the loop thread's CPU time (and its wait for data), its waits for a "
    "core and the GIL left out",
    "own": "; their time less the loop thread's waits for a core",
    "wall": "",
}


@worder(FrameworkOverhead)
def framework_overhead(s: FrameworkOverhead) -> Words:
    where = (
        f"{s.samples - s.sparse} over the steps after the profiler window, {s.sparse} over the "
        "rest of the run at 25 Hz on a jittered clock"
        if s.sparse
        else ""
    )
    evidence = [
        f"framework logging, callbacks and progress bars: {fmt_share(s.overhead)} of the sampled time "
        f"({s.samples} stack samples{': ' + where if where else ''}{CLOCKS[s.clock]})"
        + (
            f"; from so few samples, at least {fmt_share(s.least)} (95%), the level it is given"
            if s.least is not None
            else ""
        ),
        "; ".join(f"{LABELS[label]}: {fmt_share(part)}" for label, part in s.parts),
        "where: " + ", ".join(f"{name} ({fmt_share(part)})" for name, part in s.top),
        f"gain if they run every {EVERY} steps: {fmt_gain(s.bound)} (Amdahl over that share)",
    ]
    if s.periodic is not None:
        evidence.append(periodic_evidence(s.periodic))
    if not s.advice:
        settings = ", ".join(s.settings) or "the settings could not be read from the source"
        evidence.append(
            "the logging settings already log rarely (" + settings + "): what is "
            "left is the framework's own per-step bookkeeping"
        )
        return words(
            "The framework's logging and callbacks take time on every step",
            evidence,
            "Nothing to turn down in the logging settings (" + settings + ").",
            FRAMEWORK_SOURCE,
        )
    # The largest part the user's own callback work: the title says whose it is.
    hooked = bool(s.parts) and s.parts[0][0] == "user-callback"
    return words(
        "Your callback's hook runs work on every step of the framework's loop"
        if hooked
        else "The framework logs or draws progress on every step",
        evidence,
        "; ".join(_fixes(s.advice)) + ".",
        FRAMEWORK_SOURCE,
    )


def periodic_evidence(p: PeriodicCost) -> str:
    """The step clock's A/B of work that runs every ``p.period`` steps."""
    return (
        f"from the step times alone: the {p.on_steps} steps that logged (every {p.period}th) took "
        f"{fmt_ms(p.on_median_s)} (median) against {fmt_ms(p.off_median_s)} for the other "
        f"{p.off_steps}: {fmt_share(p.share)} of the run's step time"
        + (" (each step's own time: its wait for a core left out)" if p.own_time else "")
    )


@worder(ProgressRedraw)
def progress_redraw(s: ProgressRedraw) -> Words:
    first = s.lines[0]
    library = " and ".join(s.libraries) or "the bar's library"
    evidence = [
        f"{at(first)}: `{first.text}` redraws the progress bar on every step: set_postfix/"
        "set_description refresh the bar on each call by default (refresh=True), bypassing "
        "its mininterval (0.1 s)"
    ]
    if s.drawn is not None:
        evidence += [
            f"in {library}'s frames below {'those lines' if len(s.lines) > 1 else 'that line'}: "
            f"{fmt_share(s.drawn)} of the sampled time (formatting the postfix and writing the "
            "bar)",
            f"gain if the bar redraws at its own interval: {fmt_gain(s.bound)} (Amdahl over "
            "that share, less a tenth for the postfix still formatted each step)",
        ]
    else:
        held = fmt_share(s.residual) if s.residual is not None else "not measured"
        evidence += [
            f"its share was not sampled (no line samples over the steps): the host time outside "
            f"the model, which holds the redraw and other host work, is {held} of the step",
            f"gain if the bar redraws at its own interval: {fmt_gain(s.bound)} (high end: all "
            "of that host time)",
        ]
    if s.reads:
        evidence.append(
            "the line's .item() reads are not this time: the sync finding counts them apart"
        )
    title = "The progress bar is redrawn every step" + (
        f": {fmt_share(s.drawn)} of the step in {library}" if s.drawn is not None else ""
    )
    return words(
        title,
        evidence,
        f"Pass refresh=False ({at(first)}: `.set_postfix(..., refresh=False)`): the bar shows "
        "the latest values at its next redraw; or set the postfix every N steps.",
        "tqdm docs: set_postfix/set_description(refresh=True) force a refresh; mininterval "
        "(0.1 s) paces the bar's own redraws",
    )


@worder(FrameworkSeen)
def framework_seen(s: FrameworkSeen) -> Words:
    names = ", ".join(LABELS[label] for label in s.labels)
    if s.periodic is not None and s.periodic.share >= SUGGEST:
        # Too few samples for a share; the step clock read the periodic logging's.
        return words(
            f"The framework's logging every {s.periodic.period} steps takes "
            f"{fmt_share(s.periodic.share)} of the step time",
            [
                periodic_evidence(s.periodic),
                f"{names}: in {s.hits} of the {s.samples} stack samples taken over the run "
                + (
                    f"(with the {s.dense} after the profiler window, too few for a share of "
                    f"their own: it needs {s.needed})"
                    if s.hits >= MIN_SEEN
                    else "(too few to weigh: the step times above measure it without them)"
                ),
                f"gain if it logs every {RARE_LOGS} steps: {fmt_gain(s.bound)} (Amdahl over "
                f"{fmt_factor(RARE_LOGS / s.periodic.period)} fewer such steps)",
            ],
            "; ".join(_fixes(s.advice)) + ".",
            FRAMEWORK_SOURCE,
        )
    # Under the level, the step clock's A/B of the logging's steps is said, not a share of it.
    periodic = [periodic_evidence(s.periodic)] if s.periodic is not None else []
    if s.clocked:
        caught = (
            f"{names}: in {s.hits} of the {s.samples} stack samples taken over the run; with the "
            f"{s.dense} taken over the steps after the profiler window, too few for a share (it "
            f"needs {s.needed})"
        )
        return words(
            "The framework logs or draws progress inside its loop: its share was not measured",
            [caught, *periodic],
            "; ".join(_fixes(s.advice))
            + ". To measure its share first, sample the whole run (`--lines all`).",
            FRAMEWORK_SOURCE,
        )
    return words(
        "The framework logs or draws progress inside its loop: its share was not measured",
        [
            f"{names}: in {s.hits} of the {s.samples} stack samples taken over the run at the "
            "program's own switch interval (a sample that waits for the GIL lands on the next "
            "call that releases it: the count says the logging ran, not how much it takes)",
            f"the steps sampled densely after the profiler window gave {s.dense} stack samples; "
            f"a share needs {s.needed}",
            *periodic,
        ],
        "; ".join(_fixes(s.advice))
        + ". To measure its share first, sample the whole run (`--lines all`).",
        FRAMEWORK_SOURCE,
    )
