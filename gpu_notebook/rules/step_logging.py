"""Work the step repeats for humans: logging every step, and validation inside every step.

Framework overhead (``framework_overhead``): logging, callbacks and progress bars that run
inside Lightning's or the HF Trainer's loop, read from the sampled stacks
(analysis/framework_stacks.py), since the cell's lines show only ``trainer.fit(...)``.

Thresholds: TraceML's residual levels (warn 10%, critical 20%, ``diagnostics/step_time/policy.py``)
and the seed articles' advice "validate and log every N steps, not every step". Validation
inside every step is found in the source (``model.eval()``, a ``torch.no_grad()`` block, a
validation loop or an ``evaluate(...)`` call in the training loop, not behind an ``if``); its
share is the step's time outside the training phases.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.framework_stacks import (
    LOGGED,
    USER_HOOK,
    CallbackHook,
    Clock,
    LogCaller,
    by_log_line,
    count_overhead,
    dense_sampled,
    log_callers,
    loop_time,
    sampled_stacks,
    share_clock,
    without_ours,
)
from gpu_notebook.analysis.level_range import Level
from gpu_notebook.cell.facts import LightningLog, Origin, SourceFacts, SourceLine
from gpu_notebook.cell.hooks import hook_defs
from gpu_notebook.cell.step_logs import training_logs
from gpu_notebook.cell.words import ACCUMULATION_KEYS, OTHER_HOOKS
from gpu_notebook.records import (
    Analysis,
    Finding,
    PeriodicCost,
    PhaseBreakdown,
    RawStacks,
    Run,
    Said,
    Severity,
)
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    SUGGEST,
    EveryStepLines,
    found,
    gain_bound,
    gain_range,
    level_in,
    level_of,
    severity_of,
    share,
    shares_sum,
)
from gpu_notebook.rules.syncs import (
    EVERY,
    MIN_LINE_SAMPLES,
    MIN_SHARE_SAMPLES,
    drawn_share,
    every_n,
    judged_share,
    lines_share,
    loop_lines,
)


@dataclass(frozen=True)
class PerStepLogging(EveryStepLines):
    """Logging calls on every step (``lines``; ``own``: their own sampled time)."""

    # Lines that flush (``print(..., flush=True)``, ``sys.stdout.flush()``): in a Jupyter
    # kernel each flush waits for the kernel's output thread to send the text, where a plain
    # print is batched (benchmarks/README: a 0.4 ms step took 0.77 ms at load 8, 7.6 ms at 26).
    flushed: tuple[int, ...] = ()


@dataclass(frozen=True)
class PeriodicLogging(Said):
    """A plain loop's ``if step % N == 0:`` block (logging, validation, a checkpoint save or
    other work: ``cell.blocks.WORK_KINDS``), its cost read from the step clock."""

    line: int
    text: str
    cost: PeriodicCost
    bound: float | None  # running it EVERY times less often
    work: str = "logging"
    origin: Origin | None = None  # in a function the cell calls (cell.calls)
    setting: str | None = None  # the framework keyword that sets its period (HF eval_steps)


@dataclass(frozen=True)
class ValidationEveryStep(Said):
    lines: tuple[SourceLine, ...]  # validation inside the training loop, on every step
    phases: PhaseBreakdown | None
    other: float | None  # time outside the training phases (None: not measured)
    bound: float | None


@dataclass(frozen=True)
class Advice:
    """One setting to change in a framework's loop (words/step_logging.py words it)."""

    kind: Literal[
        "self-log", "callback-log", "log-every-n", "lightning-bar", "logging-steps",
        "disable-tqdm", "tqdm-interval", "callback-hook",
    ]  # fmt: skip
    share: float | None = None  # of the sampled time
    value: float | None = None  # the setting as it is now (None: not read)
    # Lightning's log calls run on every step ("self-log": a LightningModule's; "callback-log":
    # a Callback hook's), each with the share of the sampled time under its line (None: not
    # read), largest first.
    logs: tuple[tuple[LightningLog, float | None], ...] = ()
    # "callback-hook": the user's callback hooks the framework's loop calls on every step, each
    # with its share of the sampled time (None: not read), largest first.
    hooks: tuple[tuple[CallbackHook, float | None], ...] = ()
    # The step each of ``hooks`` reads by its own argument where the cell defines it
    # (``tr.global_step`` for ``def on_train_batch_end(self, tr, ...)``: cell.hooks), by
    # function; a hook not read there is worded with its framework's usual name.
    steps: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class FrameworkOverhead(Said):
    overhead: float  # framework logging, callbacks, progress bars: share of the sampled time
    samples: int
    parts: tuple[tuple[str, float], ...]  # by label (framework_stacks.OVERHEAD), largest first
    top: tuple[tuple[str, float], ...]  # the functions that took most
    bound: float | None
    advice: tuple[Advice, ...]  # empty: the settings already log rarely
    settings: tuple[str, ...]  # the framework settings the source sets, ``key=value``
    sparse: int = 0  # of ``samples``: the clocked ones over the rest of the run (sampled_stacks)
    # The logging's steps (logging_steps=N, log_every_n_steps=N) against the others, from the
    # step clock alone (_periodic): None where N is 1, not read, or its steps are not slower.
    periodic: PeriodicCost | None = None
    # What a sample's time was (framework_stacks.share_clock): "cpu" the loop thread's CPU time
    # over its own time, "own" its wall time less its wait for a core, "wall" as sampled.
    clock: Clock = "wall"
    # Read off fewer than MIN_LINE_SAMPLES samples: the least the share can be (judged_share),
    # which its level was given by; None from that many on.
    least: float | None = None


@dataclass(frozen=True)
class ProgressRedraw(Said):
    """Progress-bar calls that redraw the bar on every step (``bar.set_postfix(...)``: tqdm's
    refresh=True default skips its mininterval), and the share of the sampled time in the bar
    library's frames below them."""

    lines: tuple[SourceLine, ...]
    drawn: float | None  # of the sampled time: the library's frames under ``lines`` (None: no
    # line samples)
    libraries: tuple[str, ...]  # "tqdm", "rich"
    bound: float | None
    reads: bool  # the lines also read device values (``loss.item()`` in the postfix)
    residual: float | None = None  # without line samples: the host time outside the model


@dataclass(frozen=True)
class FrameworkSeen(Said):
    """Framework logging caught by a default run's sparse samples: no share read (``_seen``)."""

    hits: int  # sparse samples in the framework's logging, callbacks or bars
    samples: int  # the loop's sparse samples
    dense: int  # the loop's dense samples (the few steps after the window)
    needed: int  # dense samples a share needs
    labels: tuple[str, ...]  # ids of framework_stacks.OVERHEAD, most samples first
    advice: tuple[Advice, ...]
    clocked: bool = False  # the sparse samples fell on a clock (too few of all for a share)
    periodic: PeriodicCost | None = None  # as FrameworkOverhead's: the share, where it is one
    bound: float | None = None  # logging every RARE_LOGS steps, Amdahl over ``periodic``


def per_step_logging(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """print / logger / tracker / progress-bar calls on every step (no tensor read: syncs covers those)."""
    lines = loop_lines(facts, facts.logging)
    flushed = tuple(s.line for s in lines if s.kind == "print" and _FLUSH.search(s.text))
    return every_step_lines("logging.per_step", PerStepLogging, lines, analysis, flushed=flushed)


# clear_output() flushes the cell's streams before it sends its message (ipykernel's
# ZMQDisplayPublisher.clear_output): each call waits as a flush does.
_FLUSH = re.compile(r"flush\s*=\s*True|\.flush\(\)|\bclear_output\(")


def every_step_lines(
    rule_id: str,
    record: type[EveryStepLines],
    lines: tuple[SourceLine, ...],
    analysis: Analysis,
    **extra: object,
) -> Finding | None:
    """Host lines run on every step (logging calls, checkpoint saves), gated by the fix to one
    step in ``EVERY``. The range: from the stack sampler's time on the lines (a lower figure) to
    the host time outside the model (a superset: it holds other host work)."""
    if not lines:
        return None
    residual = shares_sum(analysis, RESIDUAL_PHASES)
    removed = every_n(residual)
    own = lines_share(analysis, lines)
    least = every_n(min(own, residual)) if own is not None and residual is not None else None
    low, bound = gain_range(least, removed, analysis)
    said = record(lines, analysis.phases, residual, own, low, bound, **extra)
    if bound is None:
        # Nothing measured the host time that holds the lines: said, not offered (issue 26: a
        # fix whose gain nothing bounds is no recommendation).
        return found(rule_id, "info", said, line=lines[0].line)
    severity: Level | Severity = level_in(analysis, RESIDUAL_PHASES, residual, low=0.0) or "low"
    return found(rule_id, severity, said,
                 phase_share=removed, bound=bound, line=lines[0].line, fix_id="log_every_n",
                 fix_params={"every": EVERY}, low=low)  # fmt: skip


def validation_every_step(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Validation runs inside each training step."""
    lines = loop_lines(facts, facts.validation)
    if not lines:
        return None  # validation behind an `if` (every N steps) is what we would advise
    # No hook of ours sits on modules, so model calls are not counted: a validation pass runs
    # under no_grad, where autograd numbers no op, and lands outside the inferred forward, in
    # "other" (the step's time outside data, forward, backward and optimizer).
    estimate = share(analysis, "other") or None
    removed = every_n(estimate)
    bound = gain_bound(removed, analysis)
    said = ValidationEveryStep(lines, analysis.phases, estimate, bound)
    severity: Level | Severity = level_of(analysis, estimate, low=0.0) or "low"
    if bound is None:
        return found("logging.validation_every_step", severity, said, phase_share=removed,
                     line=lines[0].line)  # fmt: skip
    # The patch gates the validation block every EVERY steps (fixes/codemods_syncs
    # validate_every_n), or says where it cannot.
    return found("logging.validation_every_step", severity, said, phase_share=removed,
                 bound=bound, line=lines[0].line, fix_id="validate_every_n",
                 fix_params={"every": EVERY})  # fmt: skip


def redrawn_lines(facts: SourceFacts) -> tuple[SourceLine, ...]:
    """The cell's per-step progress-bar calls that redraw on each call (``facts.redraws``):
    progress_redraw names their time, so framework_overhead leaves their samples out."""
    return tuple(s for s in loop_lines(facts, facts.redraws) if s.origin is None)


def progress_redraw(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A progress bar redrawn on every step by the cell's own call: ``bar.set_postfix(loss=...)``
    or ``set_description(...)`` (refresh=True by default) writes the bar to the terminal each
    call, bypassing tqdm's mininterval. Its share: the samples in the bar library's frames
    below the line (analysis.framework_stacks.drawn_under), not the line's whole time (its
    ``.item()`` is the sync rule's). Without line samples, as for other per-step logging
    (``every_step_lines``): up to the step clock's host time outside the model, which holds
    the redraw. The fix passes ``refresh=False``: the bar shows the latest values at its next
    redraw, at its own interval. Issue 26 (unseen round 10): this read "[high] reads device
    values every step" on a CPU run, where the bar took the time."""
    lines = redrawn_lines(facts)
    if not lines:
        return None
    drawn, libraries = drawn_share(run, analysis, lines)
    reads = bool({s.line for s in facts.syncs} & {r.line for r in lines})
    line = lines[0].line
    if drawn is None:
        residual = shares_sum(analysis, RESIDUAL_PHASES)
        low, bound = gain_range(None, every_n(residual), analysis)
        said = ProgressRedraw(lines, None, libraries, bound, reads, residual)
        if bound is None:
            return found("logging.progress_redraw", "info", said, line=line)
        level: Level | Severity = level_in(analysis, RESIDUAL_PHASES, residual, low=0.0) or "low"
        return found("logging.progress_redraw", level, said, phase_share=every_n(residual),
                     bound=bound, line=line, fix_id="bar_refresh_off", low=low)  # fmt: skip
    severity = level_of(analysis, drawn, low=SUGGEST)
    if severity is None:
        return None
    # After the fix the bar redraws at its interval (0.1 s: a step in ~100 at 1 ms steps);
    # set_postfix still builds its string every step, in the same frames: the high end
    # assumes that is a tenth of them, as gating the call every EVERY steps would leave.
    removed = every_n(drawn)
    bound = gain_bound(removed, analysis)
    said = ProgressRedraw(lines, drawn, libraries, bound, reads)
    return found("logging.progress_redraw", severity, said, phase_share=removed, bound=bound,
                 line=line, fix_id="bar_refresh_off")  # fmt: skip


def framework_overhead(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Logging, callbacks and progress bars inside a framework's loop, from the sampled stacks.

    Each sampled stack counts once, for its outermost overhead frame (``count_overhead``).
    Stacks past the sampler's ``max_stacks`` are not seen: the share is a lower figure.
    """
    sampled = sampled_stacks(run)
    if not sampled:
        return _seen(run, analysis, 0, facts)
    # Imports are never the loop: a script's `import lightning` (92% of a `--lines all` run's
    # samples) divided the logging's share down to nothing (issue 26, unseen round 3).
    loops = [loop_time(raw) for raw in sampled]
    samples, loop_us = sum(n for n, _us in loops), sum(us for _n, us in loops)
    if samples < MIN_SHARE_SAMPLES or loop_us <= 0:
        # A share read off a handful of samples measures nothing (one sample in a logging call
        # read "100%, up to 10x" [high]).
        return _seen(run, analysis, loops[0][0] if dense_sampled(run) else 0, facts)
    by_label: dict[str, int] = {}
    functions: dict[str, int] = {}
    frameworks: set[str] = set()
    named = frozenset(s.line for s in redrawn_lines(facts))
    logged = _logged_lines(facts)
    under: dict[int, int] = {}
    elsewhere: dict[LogCaller, int] = {}
    hooks: dict[CallbackHook, int] = {}
    for raw in sampled:
        callers = log_callers(raw)
        count_overhead(raw, by_label, functions, frameworks, named=named, logged=logged,
                       hooks=hooks, log_hooks=_log_hooks(raw, facts, callers))  # fmt: skip
        for line, us in by_log_line(raw, logged).items():
            under[line] = under.get(line, 0) + us
        for caller, us in callers.items():
            elsewhere[caller] = elsewhere.get(caller, 0) + us
    total = sum(by_label.values())
    overhead = total / loop_us
    judged = judged_share(overhead, samples)
    if judged is None:
        return _seen(run, analysis, loops[0][0] if dense_sampled(run) else 0, facts)
    severity = level_of(analysis, judged, low=SUGGEST)
    if severity is None:
        return None
    removed = every_n(overhead)
    bound = gain_bound(removed, analysis)
    parts = sorted(by_label.items(), key=lambda kv: -kv[1])
    top = sorted(functions.items(), key=lambda kv: -kv[1])[:4]
    read = _step_logs_read(
        facts,
        {line: us / loop_us for line, us in under.items()},
        {caller: us / loop_us for caller, us in elsewhere.items()},
    )
    fixes = _framework_advice(
        frameworks,
        {k: v / loop_us for k, v in by_label.items()},
        facts,
        read,
        {hook: us / loop_us for hook, us in hooks.items()},
    )
    said = FrameworkOverhead(
        overhead,
        samples,
        tuple((label, us / loop_us) for label, us in parts),
        tuple((name, us / loop_us) for name, us in top),
        bound,
        tuple(fixes),
        _settings_now(facts),
        samples - (loops[0][0] if dense_sampled(run) else 0),
        _periodic(analysis, frameworks, facts),
        clock=share_clock(run, sampled),
        least=judged if samples < MIN_LINE_SAMPLES else None,
    )
    if not fixes:
        return found("logging.framework_overhead", "info", said)
    gate = _hook_gate(fixes)
    # No patch for log_every_n_steps (fixes/codemods_framework.lightning_log_every_n, said as
    # advice): it spaces the logger's writes alone, and on lightning_sync_every_step (log_dict
    # of six values every step, a CSVLogger, log_every_n_steps=1) raising it to 50 measured
    # 0.94x and 1.16x in two runs by hand (round ratios' median 1.05x over 9 rounds, fit's
    # CPU clock) and 1.12x undecided by --try-fixes, where removing the log_dict call measured
    # 3.21x (benchmarks/lightning_log_every_n.py): no gain shown beyond the noise.
    if gate is None:
        logs = _log_gate(fixes, facts)
        return found("logging.framework_overhead", severity, said, phase_share=removed, bound=bound,
                     fix_id="gate_training_log" if logs else None, fix_params=logs)  # fmt: skip
    params, hooked = gate
    # The gate removes its hooks' share alone: the low end (the rest of the overhead stays).
    low = gain_bound(hooked * (1 - 1 / RARE_LOGS), analysis) if hooked is not None else None
    return found("logging.framework_overhead", severity, said, phase_share=removed, bound=bound,
                 fix_id="gate_callback_hook", fix_params=params,
                 low=min(low, bound) if low is not None and bound is not None else None)  # fmt: skip


def _hook_gate(
    advice: list[Advice],
) -> tuple[dict[str, str | int | float | bool | None], float | None] | None:
    """The gate's parameters for the user's callback hooks the advice names (their own work,
    and a Lightning Callback's hooks that call log: fixes/codemods_framework), with the share
    of the sampled time they took where one was read."""
    hooks: dict[str, str] = {}  # Class.method -> framework
    cells: dict[str, int] = {}  # Class.method -> the cell that defined it (In[N])
    shares: list[float] = []
    for a in advice:
        for hook, part in a.hooks:
            name = ".".join(hook.function.split(".")[-2:])
            hooks.setdefault(name, hook.framework)
            if hook.cell_number is not None:
                cells.setdefault(name, hook.cell_number)
            shares += [part] if part is not None else []
        if a.kind == "callback-log":
            for log, part in a.logs:
                if log.owner and log.hook:
                    hooks.setdefault(f"{log.owner}.{log.hook}", "lightning")
                    shares += [part] if part is not None else []
    if not hooks:
        return None
    framework = next(iter(hooks.values()))
    names = [name for name, fw in hooks.items() if fw == framework]
    params: dict[str, str | int | float | bool | None] = {"hooks": ",".join(names), "framework": framework,
                                    "every": RARE_LOGS}  # fmt: skip
    if any(n in cells for n in names):
        params["cells"] = ",".join(str(cells.get(n, "")) for n in names)
    return params, sum(shares) if shares else None


def _log_gate(
    advice: list[Advice], facts: SourceFacts
) -> dict[str, str | int | float | bool | None] | None:
    """The parameters of the gate of training_step's log calls (fixes/codemods_framework
    ``gate_training_log``) where the patch reaches every module log call the advice names: each
    a call of this cell in the ``training_step`` of the module class the cell's Trainer fits,
    one a gate changes only in how often it runs (cell/step_logs). None: not offered."""
    named = [log for a in advice if a.kind == "self-log" for log, _part in a.logs]
    if not named or facts.tree is None:
        return None
    read = training_logs(facts.tree, RARE_LOGS)
    if read.why is not None:
        return None
    gated = {log.line for log in read.logs if log.why is None}
    reached = all(
        log.at.origin is None
        and log.owner == read.owner
        and log.hook == "training_step"
        and log.at.line in gated
        for log in named
    )
    return {"every": RARE_LOGS} if reached else None


# The sparse samples (Run.framework_stacks) of a run that leaned (not clocked), or too few of
# any: they say that the framework's logging ran, not how much of the step it took: at least
# this many of them, and this share of the loop's.
MIN_SEEN = 3


def _seen(run: Run, analysis: Analysis, dense: int, facts: SourceFacts) -> Finding | None:
    """Framework logging caught by a default run's sparse samples, where the samples cannot
    read its share (issue 26: a short Lightning fit logging every step got 2-16 dense samples
    and no word of its self.log): too few of them, or not taken on a clock
    (``sampled_stacks``). It says the logging ran, and the fix, at no level and no gain, unless
    the step clock reads the logging's steps (``_periodic``); ``--lines all`` measures its share.
    """
    raw = run.framework_stacks
    if raw is None or not raw.stacks:
        return None
    raw = without_ours(raw)  # our capture's samples are not the loop's, here as for a share
    samples, _loop_us = loop_time(raw)
    by_label: dict[str, int] = {}
    frameworks: set[str] = set()
    named = frozenset(s.line for s in redrawn_lines(facts))
    logged = _logged_lines(facts)
    callers = log_callers(raw, weigh=False)
    hooks: dict[CallbackHook, int] = {}
    hits = count_overhead(raw, by_label, {}, frameworks, weigh=False, named=named, logged=logged,
                          hooks=hooks, log_hooks=_log_hooks(raw, facts, callers))  # fmt: skip
    if hits < MIN_SEEN or hits < SUGGEST * samples:
        return _periodic_alone(analysis, hits, samples, dense, facts, clocked=raw.clocked)
    # Which settings and lines to name: by the samples' counts; no share is said (None).
    shares = {k: n / samples for k, n in by_label.items()}
    caught = _step_logs_read(
        facts,
        {line: n / samples for line, n in by_log_line(raw, logged, weigh=False).items()},
        {caller: n / samples for caller, n in callers.items()},
    )
    advice = [
        _unweighed(a)
        for a in _framework_advice(
            frameworks, shares, facts, caught, {h: n / samples for h, n in hooks.items()}
        )
    ]
    if not advice:
        return None  # the settings already log rarely: nothing to turn down, no share to say
    labels = tuple(sorted(by_label, key=lambda k: -by_label[k]))
    periodic = _periodic(analysis, frameworks, facts)
    seen = FrameworkSeen(
        hits, samples, dense, MIN_LINE_SAMPLES, labels, tuple(advice), raw.clocked, periodic
    )
    severity = severity_of(periodic.share, low=SUGGEST) if periodic is not None else None
    if periodic is None or severity is None:
        return found("logging.framework_overhead", "info", seen)
    # The samples read no share, the step clock does: the logging's steps against the others.
    # Logging every RARE_LOGS steps instead of every ``period`` leaves period/RARE_LOGS of it.
    removed = periodic.share * max(0.0, 1.0 - periodic.period / RARE_LOGS)
    bound = gain_bound(removed, analysis)
    seen = dataclasses.replace(seen, bound=bound)
    logs = _log_gate(advice, facts)
    return found("logging.framework_overhead", severity, seen, phase_share=removed, bound=bound,
                 fix_id="gate_training_log" if logs else None, fix_params=logs)  # fmt: skip


# The settings that make a framework's loop log every N steps, by the framework its samples
# name: the step clock's steps that ran that logging against the others (analysis.run_trend);
# the label its logging's samples carry (framework_stacks.OVERHEAD) and the advice that sets it.
_PERIOD_SETTINGS = (
    ("transformers", "TrainingArguments", "logging_steps"),
    ("lightning", "Trainer", "log_every_n_steps"),
)
_PERIOD_ADVICE = {"transformers": ("hf-logging", "logging-steps"),
                  "lightning": ("lightning-log", "log-every-n")}  # fmt: skip


def _periodic_alone(
    analysis: Analysis, hits: int, samples: int, dense: int, facts: SourceFacts, *, clocked: bool
) -> Finding | None:
    """The step clock's A/B where the sparse samples caught the logging too few times to say it
    ran (the CI's fresh clone caught none of a Lightning fit's writes every 5 steps): the steps
    at the period the cell's own setting names took longer than the others by a rank test. Only
    a period the advice would lengthen (under ``RARE_LOGS``)."""

    for framework, cls, key in _PERIOD_SETTINGS:
        every = facts.framework_setting(cls, key)
        if not (isinstance(every, int) and 2 <= every < RARE_LOGS):
            continue
        cost = next((c for c in analysis.periodic if c.period == every), None)
        severity = severity_of(cost.share, low=SUGGEST) if cost is not None else None
        if cost is None or severity is None:
            continue
        label, kind = _PERIOD_ADVICE[framework]
        advice = tuple(
            _unweighed(a)
            for a in _framework_advice({framework}, {label: cost.share}, facts, [])
            if a.kind == kind
        )
        if not advice:
            continue
        removed = cost.share * max(0.0, 1.0 - cost.period / RARE_LOGS)
        bound = gain_bound(removed, analysis)
        seen = FrameworkSeen(
            hits, samples, dense, MIN_LINE_SAMPLES, (label,), advice, clocked, cost, bound
        )
        return found("logging.framework_overhead", severity, seen, phase_share=removed, bound=bound)
    return None


def _periodic(analysis: Analysis, frameworks: set[str], facts: SourceFacts) -> PeriodicCost | None:
    """The periodic logging's cost from the step times (``Analysis.periodic``): where the
    setting is 1 every step logs and there is nothing to set it against (the stack samplers
    measure it); a setting the source does not give literally is not read."""
    for framework, cls, key in _PERIOD_SETTINGS:
        every = facts.framework_setting(cls, key)
        if framework in frameworks and isinstance(every, int) and every >= 2:
            cost = next((c for c in analysis.periodic if c.period == every), None)
            if cost is not None:
                return cost
    return None


RARE_LOGS = 10 * EVERY // 2  # every 50 steps: Lightning's own default
RARE_REDRAW_S = 1.0  # a tqdm bar redrawn at most once a second (its default is 0.1 s)


def _logged_lines(facts: SourceFacts) -> frozenset[int]:
    """The cell's lines that call Lightning's log on a training step (``facts.step_logs``)."""
    return frozenset(
        log.at.line for log in facts.step_logs if log.at.kind != "epoch" and log.at.origin is None
    )


def _log_hooks(
    raw: RawStacks, facts: SourceFacts, callers: dict[LogCaller, int]
) -> frozenset[tuple[str, str]]:
    """(filename, qualified name) of the user's hooks that call Lightning's log: the cell's
    (``facts.step_logs``) and those the samples caught elsewhere. Their time is the log
    calls' (named as such), not a callback hook's own work."""
    cell = raw.cell_filename or raw.root_filename or ""
    here = {(cell, f"{log.owner}.{log.hook}") for log in facts.step_logs if log.owner and log.hook}
    return frozenset(here | {(c.filename, c.function) for c in callers})


def _unweighed(a: Advice) -> Advice:
    """``a`` without its shares: read off samples that say what ran, not how long."""
    return dataclasses.replace(
        a,
        share=None,
        logs=tuple((log, None) for log, _ in a.logs),
        hooks=tuple((hook, None) for hook, _ in a.hooks),
    )


def _step_logs_read(
    facts: SourceFacts, lines: dict[int, float], elsewhere: dict[LogCaller, float]
) -> list[tuple[LightningLog, float | None]]:
    """Lightning's log calls run on a training step, each with the share under its line where
    one was read: the cell's (``facts.step_logs``, ``lines`` by line), then those the samples
    caught in the user's code outside the cell (``elsewhere``: a Callback or LightningModule
    defined in an earlier cell or a user's file, named by its frame)."""
    out = [(log, lines.get(log.at.line)) for log in facts.step_logs if log.at.kind != "epoch"]
    for caller, part in elsewhere.items():
        owner, _, hook = caller.function.rpartition(".")
        if hook in OTHER_HOOKS:
            continue
        # Its place as the words say a line of another cell or file (Origin.line_there: the
        # line itself).
        origin = Origin(caller.filename, caller.function, caller.cell_number, caller.in_file,
                        first_line=1, offset=0, text="")  # fmt: skip
        at = SourceLine(caller.line, caller.text, "on_step", origin=origin)
        out.append((LightningLog(at, hook, owner or None, caller.callback), part))
    return out


def _framework_advice(
    frameworks: set[str],
    shares: dict[str, float],
    facts: SourceFacts,
    read: list[tuple[LightningLog, float | None]],
    user_hooks: dict[CallbackHook, float] | None = None,
) -> list[Advice]:
    """What to change, per framework, naming the setting as it is now; never a setting that
    already holds (logging_steps=500 is not told to become 50). ``read``: Lightning's log calls
    on a training step, with the share of the sampled time under each (``_step_logs_read``).
    ``user_hooks``: the user's callback hooks the loop called, with their shares: gated in the hook
    (no framework setting spaces a callback's own work)."""
    out: list[Advice] = []
    if user_hooks and shares.get(USER_HOOK, 0.0) >= SUGGEST / 2:
        ranked = tuple(sorted(user_hooks.items(), key=lambda kv: -kv[1]))
        out.append(Advice("callback-hook", shares[USER_HOOK], hooks=ranked,
                          steps=_hook_steps(facts, [hook for hook, _ in ranked])))  # fmt: skip
    if "lightning" in frameworks:
        logged = shares.get("lightning-log", 0.0) + shares.get(LOGGED, 0.0)
        # No log call in the source and under half the bar's floor: Lightning's own per-step
        # bookkeeping (unseen lightning_heavy_callback, which logs nothing, read "self.log on
        # every step (1%)"), not a call to gate.
        if logged and (read or (not facts.step_logs and logged >= SUGGEST / 2)):
            # Every per-step log line is named, a Callback's hook's apart from the module's:
            # Lightning runs each call in full on every step (its checks, the value's detach
            # and the result collection's update; on_step=False accumulates for the epoch,
            # also every step), whatever log_every_n_steps says: that spaces only the logger's
            # writes (lightning/pytorch/core/module.py log, logger_connector.py).
            module = tuple(sorted(((log, part) for log, part in read if not log.callback),
                                  key=lambda r: -(r[1] or 0.0)))  # fmt: skip
            hooks = tuple(sorted(((log, part) for log, part in read if log.callback),
                                 key=lambda r: -(r[1] or 0.0)))  # fmt: skip
            logs: list[Advice] = []
            if module or not read:
                share_of = _sum_read(module)
                # No line read (the samples fell in Lightning's frames under no frame of the
                # user's code): the label's share.
                share_of = logged if share_of is None and not hooks else share_of
                logs.append(Advice("self-log", share_of, logs=module))
            if hooks:
                logs.append(Advice("callback-log", _sum_read(hooks), logs=hooks))
            out += sorted(logs, key=lambda a: -(a.share or 0.0))  # the larger said first
        every = facts.framework_setting("Trainer", "log_every_n_steps")
        if logged and isinstance(every, int) and every < RARE_LOGS:
            out.append(Advice("log-every-n", value=every))
        elif logged and every is None:
            out.append(Advice("log-every-n"))
        bar = facts.framework_setting("Trainer", "enable_progress_bar")
        drawn = shares.get("lightning-bar", 0.0) + shares.get("tqdm-bar", 0.0)
        if drawn >= SUGGEST / 2 and bar is not False:
            # The bar's rate as the callbacks list sets it (TQDMProgressBar(refresh_rate=1)):
            # the argument to change, said as it is now.
            rate = facts.framework_setting("TQDMProgressBar", "refresh_rate")
            now = float(rate) if isinstance(rate, int) and not isinstance(rate, bool) else None
            out.append(Advice("lightning-bar", drawn, value=now))
    if "transformers" in frameworks:
        logged = shares.get("hf-logging", 0.0) + shares.get("hf-callbacks", 0.0)
        steps = facts.framework_setting("TrainingArguments", "logging_steps")
        if logged and isinstance(steps, (int, float)) and 0 < steps < RARE_LOGS:
            out.append(Advice("logging-steps", logged, value=steps))
        elif logged and steps is None:
            out.append(Advice("logging-steps", logged))
        tqdm = facts.framework_setting("TrainingArguments", "disable_tqdm")
        if shares.get("tqdm-bar", 0.0) >= SUGGEST / 2 and tqdm is not True:
            out.append(Advice("disable-tqdm"))
    if "tqdm" in frameworks and not out and shares.get("tqdm-bar", 0.0) >= SUGGEST / 2:
        interval = facts.framework_setting("tqdm", "mininterval")
        if isinstance(interval, (int, float)) and interval >= RARE_REDRAW_S:
            out.append(Advice("tqdm-interval", value=float(interval)))  # redraws rarely already
        else:
            out.append(Advice("tqdm-interval"))
    return out


def _hook_steps(facts: SourceFacts, hooks: list[CallbackHook]) -> tuple[tuple[str, str], ...]:
    """(function, the step it reads by its own argument) of the hooks the cell defines."""
    if facts.tree is None:
        return ()
    out = []
    for hook in hooks:
        found = hook_defs(facts.tree, hook.function, hook.framework)
        if len(found) == 1 and found[0].step is not None:
            out.append((hook.function, found[0].step))
    return tuple(out)


def _sum_read(logs: tuple[tuple[LightningLog, float | None], ...]) -> float | None:
    """The sum of the shares read, once a line (None: none was)."""
    by_line = {(log.at.origin, log.at.line): part for log, part in logs if part is not None}
    return sum(by_line.values()) if by_line else None


def _settings_now(facts: SourceFacts) -> tuple[str, ...]:
    """The logging settings the source sets, as ``key=value`` (accumulation is not one)."""
    now = [
        f"{key}={value}"
        for cls, key, value in facts.framework_settings
        if value is not None and key not in ACCUMULATION_KEYS
    ]
    return tuple(dict.fromkeys(now))


def periodic_logging(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """A loop's logging every N steps (``if step % N == 0: print(loss.item())``) whose steps are
    slower than the others: its share from the step clock alone (``Analysis.periodic``). Steps
    that stall at that period are the run's periodic stall (rules/run_shape.py), said there."""
    return _periodic_block(analysis, facts, logging=True)


def periodic_work(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The same A/B for a block that validates, saves a checkpoint or does other work every N
    steps: a validation pass that makes its steps 1.5x the others is no stall (rules/run_shape
    reads steps over 3x the median), yet costs the run a measurable share."""
    return _periodic_block(analysis, facts, logging=False)


def _periodic_block(analysis: Analysis, facts: SourceFacts, *, logging: bool) -> Finding | None:
    from gpu_notebook.cell.blocks import PROFILER_SETTING, periodic_blocks

    shape = analysis.shape
    for block in periodic_blocks(facts.tree, facts.live.ints):
        if (block.work == "logging") != logging or block.every < 2:
            continue
        # The stalls periodic_stall reads (each step's own time where every step read its
        # wait for a core): a block whose steps stall is said there, with its extra time.
        own = shape.own if shape is not None else None
        stalls = own.stalls if own is not None else shape.stalls if shape is not None else None
        if stalls is not None and stalls.period_steps and stalls.period_steps % block.every == 0:
            continue
        cost = next((c for c in analysis.periodic if c.period == block.every), None)
        if cost is None:
            continue
        severity = severity_of(cost.share, low=SUGGEST)
        if severity is None:
            continue
        if block.setting == PROFILER_SETTING:
            severity = "low"  # the cell's own profiler: its cost, not the training's (run_shape)
        removed = every_n(cost.share)
        bound = gain_bound(removed, analysis)
        said = PeriodicLogging(
            block.line, block.text, cost, bound, block.work, block.origin, block.setting
        )
        rule_id = "logging.periodic" if logging else "run.periodic_work"
        return found(rule_id, severity, said, phase_share=removed, bound=bound,
                     line=block.line)  # fmt: skip
    return None


TIE = 50  # where its findings tie: the verdict table's order (rules._families)
RULES = (
    per_step_logging, validation_every_step, progress_redraw, framework_overhead,
    periodic_logging, periodic_work,
)  # fmt: skip
