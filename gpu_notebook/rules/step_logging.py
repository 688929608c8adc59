"""Work the step repeats for humans: logging every step, and validation inside every step.

Framework overhead (``framework_overhead``): logging, callbacks and progress bars that run
inside Lightning's or the HF Trainer's loop, read from the stack sampler's stacks by file and
function, since the cell's lines show only ``trainer.fit(...)``.

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

import re

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    RESIDUAL_PHASES,
    SUGGEST,
    finding,
    gain_bound,
    gain_range,
    phase_source,
    severity_of,
    share,
    shares_sum,
)
from gpu_notebook.rules.syncs import EVERY, lines_share, loop_lines, residual_evidence

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
    # The range: from what the logging lines themselves took (the stack sampler's time on them,
    # a lower figure: in `gpucheck run` the sampler also covers the script's set-up) to the host
    # time outside the model (a superset: it holds other host work).
    own = lines_share(analysis, lines)
    kept = 1 - 1 / EVERY
    low, bound = gain_range(
        min(own, residual) * kept if own is not None and residual is not None else None,
        removed,
        analysis,
    )
    first = lines[0]
    evidence = [
        f"{len(lines)} logging call(s) run on every step: line(s) "
        + ", ".join(str(s.line) for s in lines[:6]),
        f"line {first.line}: `{first.text}`",
        residual_evidence(analysis, residual),
    ]
    if own is not None:
        evidence.append(f"the logging lines themselves: {fmt_share(own)} of the sampled time")
    evidence.append(
        f"gain if the logs run every {EVERY} steps: {fmt_gain(bound, low)} (low end: the logging "
        "lines' own sampled time; high end: all host time outside the model, which also holds "
        "other host work)"
    )
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
        low=low,
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
    # No hook of ours sits on modules, so model calls are not counted: a validation pass runs
    # under no_grad, where autograd numbers no op, and lands outside the inferred forward, in
    # "other" (the step's time outside data, forward, backward and optimizer).
    estimate: float | None = None
    other = share(analysis, "other")
    if other:
        estimate = other
        evidence.append(
            f"time outside the training phases: {fmt_share(other)} of the step ({phase_source(analysis)}; "
            "the validation's no_grad forward is counted there)"
        )
    else:
        evidence.append("validation share: not measured (no time outside the training phases)")
    removed = estimate * (1 - 1 / EVERY) if estimate is not None else None
    bound = gain_bound(removed, analysis)
    evidence.append(f"gain if validation runs every {EVERY} steps: {fmt_gain(bound)}")
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


# Framework code that logs, reports or draws progress on the step (not training work), found
# by its file and function in the stack sampler's stacks: the cell's own lines do not show it
# when Lightning's `self.log` or the HF Trainer's `logging_steps=1` run inside `fit`/`train`.
# (label, framework, file substring(s), function pattern or None for the whole file)
_OVERHEAD: tuple[tuple[str, str, tuple[str, ...], re.Pattern[str] | None], ...] = (
    ("Lightning self.log / logger connector", "lightning", ("lightning/pytorch/", "pytorch_lightning/"),
     re.compile(r"LightningModule\.log|_LoggerConnector|_ResultCollection|_ResultMetric|log_metrics|"
                r"update_train_step_metrics|Logger\.|_log_dict_through_fabric")),
    ("Lightning loggers", "lightning", ("lightning/pytorch/loggers/", "lightning/fabric/loggers/"), None),
    ("Lightning progress bar", "lightning", ("lightning/pytorch/callbacks/progress/",), None),
    ("HF Trainer logging", "transformers", ("transformers/trainer.py",),
     re.compile(r"_maybe_log_save_evaluate|Trainer\.log\b|_nested_gather|_get_learning_rate")),
    # The callbacks' own files only: transformers/integrations/ also holds model code (the
    # attention kernels' sdpa_attention_forward, flash/flex attention), which is training work.
    ("HF Trainer callbacks", "transformers", ("transformers/trainer_callback.py",
     "transformers/integrations/integration_utils.py", "transformers/utils/notebook.py"), None),
    ("tqdm progress bar", "tqdm", ("/tqdm/",), None),
)  # fmt: skip
FRAMEWORK_SOURCE = (
    "TraceML step_time policy (residual warn 10%, critical 20%); Lightning docs (log_every_n_steps, "
    "TQDMProgressBar refresh_rate); HF TrainingArguments (logging_steps, disable_tqdm)"
)


def _overhead_label(filename: str, function: str) -> tuple[str, str] | None:
    if function == "<module>":
        return None  # a module's import (Lightning's loggers import tensorboard): not per step
    path = filename.replace("\\", "/")
    for label, framework, files, pattern in _OVERHEAD:
        if any(f in path for f in files) and (pattern is None or pattern.search(function)):
            return label, framework
    return None


def framework_overhead(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Logging, callbacks and progress bars inside a framework's loop, from the sampled stacks.

    Each sampled stack counts once, for the outermost frame that is such overhead, so nested
    calls (the Trainer's log -> a callback -> tqdm) are not counted twice. Stacks past the
    sampler's ``max_stacks`` are not seen: the share is a lower figure.
    """
    raw = run.stacks
    if raw is None or raw.time_us <= 0 or not raw.stacks:
        return None
    labels = [_overhead_label(ref.filename, ref.function) for ref in raw.functions]
    by_label: dict[str, int] = {}
    functions: dict[str, int] = {}
    frameworks: set[str] = set()
    for stack in raw.stacks:
        for index, _line in stack.frames:
            hit = labels[index]
            if hit is not None:
                by_label[hit[0]] = by_label.get(hit[0], 0) + stack.time_us
                name = raw.functions[index].function
                functions[name] = functions.get(name, 0) + stack.time_us
                frameworks.add(hit[1])
                break
    total = sum(by_label.values())
    overhead = total / raw.time_us
    severity = severity_of(overhead, low=SUGGEST)
    if severity is None:
        return None
    removed = overhead * (1 - 1 / EVERY)
    bound = gain_bound(removed, analysis)
    parts = sorted(by_label.items(), key=lambda kv: -kv[1])
    top = sorted(functions.items(), key=lambda kv: -kv[1])[:4]
    evidence = [
        f"framework logging, callbacks and progress bars: {fmt_share(overhead)} of the sampled time "
        f"({raw.samples} stack samples)",
        "; ".join(f"{label}: {fmt_share(us / raw.time_us)}" for label, us in parts),
        "where: " + ", ".join(f"{name} ({fmt_share(us / raw.time_us)})" for name, us in top),
        f"gain if they run every {EVERY} steps: {fmt_gain(bound)} (Amdahl over that share)",
    ]
    fixes = _framework_advice(frameworks, {k: v / raw.time_us for k, v in by_label.items()}, facts)
    if not fixes:
        evidence.append(
            "the logging settings already log rarely (" + _settings_now(facts) + "): what is "
            "left is the framework's own per-step bookkeeping"
        )
        return finding(
            "logging.framework_overhead",
            "The framework's logging and callbacks take time on every step",
            "info",
            evidence,
            "Nothing to turn down in the logging settings (" + _settings_now(facts) + ").",
            FRAMEWORK_SOURCE,
        )
    return finding(
        "logging.framework_overhead",
        "The framework logs or draws progress on every step",
        severity,
        evidence,
        "; ".join(fixes) + ".",
        FRAMEWORK_SOURCE,
        phase_share=removed,
        bound=bound,
    )


_RARE_LOGS = 10 * EVERY // 2  # every 50 steps: Lightning's own default


def _framework_advice(
    frameworks: set[str], shares: dict[str, float], facts: SourceFacts
) -> list[str]:
    """What to change, per framework, naming the setting as it is now; never a setting that
    already holds (logging_steps=500 is not told to become 50)."""
    out: list[str] = []
    if "lightning" in frameworks:
        parts = []
        logs = [s for s in facts.step_logs if s.kind == "on_step"]
        logged = shares.get("Lightning self.log / logger connector", 0.0)
        if logged and (logs or not facts.step_logs):
            where = f"; line {logs[0].line}: `{logs[0].text}`" if logs else ""
            parts.append(
                f"self.log on every step ({fmt_share(logged)} of the sampled time{where}): "
                "self.log(..., on_step=False, on_epoch=True) for what you read per epoch"
            )
        every = facts.framework_setting("Trainer", "log_every_n_steps")
        if logged and isinstance(every, int) and every < _RARE_LOGS:
            parts.append(f"Trainer(log_every_n_steps={_RARE_LOGS}) (log_every_n_steps={every} now)")
        elif logged and every is None:
            parts.append(f"Trainer(log_every_n_steps={_RARE_LOGS}) if it is lower now")
        bar = facts.framework_setting("Trainer", "enable_progress_bar")
        drawn = shares.get("Lightning progress bar", 0.0) + shares.get("tqdm progress bar", 0.0)
        if drawn >= SUGGEST / 2 and bar is not False:
            parts.append(
                f"the progress bar ({fmt_share(drawn)}): TQDMProgressBar(refresh_rate={EVERY * 2}) "
                "or enable_progress_bar=False"
            )
        if parts:
            out.append("Lightning: " + "; ".join(parts))
    if "transformers" in frameworks:
        parts = []
        logged = shares.get("HF Trainer logging", 0.0) + shares.get("HF Trainer callbacks", 0.0)
        steps = facts.framework_setting("TrainingArguments", "logging_steps")
        if logged and isinstance(steps, (int, float)) and 0 < steps < _RARE_LOGS:
            parts.append(
                f"logging_steps={steps:g} now: the Trainer logs every "
                f"{'step' if steps == 1 else f'{steps:g} steps'} ({fmt_share(logged)} of the "
                f"sampled time): TrainingArguments(logging_steps={_RARE_LOGS})"
            )
        elif logged and steps is None:
            parts.append(
                f"TrainingArguments(logging_steps={_RARE_LOGS}) if it logs more often now "
                f"({fmt_share(logged)} of the sampled time)"
            )
        tqdm = facts.framework_setting("TrainingArguments", "disable_tqdm")
        if shares.get("tqdm progress bar", 0.0) >= SUGGEST / 2 and tqdm is not True:
            parts.append("disable_tqdm=True")
        if parts:
            out.append("HF: " + "; ".join(parts))
    if "tqdm" in frameworks and not out and shares.get("tqdm progress bar", 0.0) >= SUGGEST / 2:
        out.append("tqdm(..., mininterval=1.0), or update the bar every N steps")
    return out


def _settings_now(facts: SourceFacts) -> str:
    now = [f"{key}={value}" for cls, key, value in facts.framework_settings if value is not None]
    return ", ".join(dict.fromkeys(now)) or "the settings could not be read from the source"


RULES = (per_step_logging, validation_every_step, framework_overhead)
