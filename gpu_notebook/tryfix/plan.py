"""The report's offered fixes -> the variants to try, the order the runs go in, and how many
steps a run measures."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpu_notebook.analysis.compare_samples import measurable
from gpu_notebook.records import Finding, Report
from gpu_notebook.tryfix import RUN_STEPS_S

__all__ = [
    "BASELINE",
    "MAX_RUN_STEPS",
    "RUN_STEPS_BUDGET_SHARE",
    "RUN_STEPS_S",
    "RunSize",
    "Variant",
    "measurable",
    "offered_variants",
    "run_size",
    "schedule",
    "unmeasurable",
]

BASELINE = 0  # index of the script as it is in a schedule


@dataclass(frozen=True)
class Variant:
    """One offered fix: the finding that offers it and the whole patched script."""

    finding: Finding
    source: str

    @property
    def title(self) -> str:
        p = self.finding.proposal
        return p.title if p is not None else self.finding.title


def offered_variants(report: Report) -> list[Variant]:
    """Every finding whose fix is a patch (a refusal offers nothing to run) and whose gain
    bound is above the run-to-run margin (``compare_samples.measurable``; an uncertain range,
    whose low end is not, is tried: that is what a trial settles), in the report's order (most
    important first), one variant per distinct patched script."""
    seen: set[str] = set()
    out = []
    for f in report.findings:
        p = f.proposal
        if p is None or p.source_after is None or p.source_after in seen or not measurable(f):
            continue
        seen.add(p.source_after)
        out.append(Variant(f, _without_magic(p.source_after, report.run.magic_line)))
    return out


def _without_magic(source: str, magic_line: str | None) -> str:
    """A script has no ``%%gpucheck`` line; a notebook cell's patched source keeps it."""
    if magic_line and source.startswith(magic_line + "\n"):
        return source[len(magic_line) + 1 :]
    return source


def schedule(variants: int, rounds: int) -> list[int]:
    """Run order: the script as it is (0) then every variant (1..n), the order reversed every
    other round (A B C | C B A | A B C), so a drift of the machine over the trials weighs on
    every arm alike and each variant runs next to a baseline run."""
    one = list(range(variants + 1))
    order: list[int] = []
    for r in range(rounds):
        order.extend(one if r % 2 == 0 else one[::-1])
    return order


def declined(report: Report) -> list[Finding]:
    """The findings whose fix could not be written as a patch of this script (the proposal's
    refusal says why), where a patch would have been worth trying."""
    return [
        f
        for f in report.findings
        if f.proposal is not None
        and f.proposal.source_after is None
        and f.proposal.refusal
        and measurable(f)
    ]


def unmeasurable(report: Report) -> list[Finding]:
    """The patches left untried because their gain bound is within the run-to-run margin."""
    return [
        f
        for f in report.findings
        if f.proposal is not None and f.proposal.source_after is not None and not measurable(f)
    ]


# A run's measured steps should cover about RUN_STEPS_S (1 s; in tryfix/__init__, which
# --try-fixes' help reads). A neighbour's CPU burst on a shared machine lasts tens to hundreds
# of ms: plain_logging's 60 steps of 0.33 ms (~20 ms a run) were shorter than one, so one burst
# decided a round (the loaded ledger of 2026-12-06 01:30: rounds 1.09, 0.56, 0.84, 0.76, 1.28
# where the quiet run read 1.13x). A second of steps spreads a burst over a fraction of the run.

# The planned runs' measured steps may take at most this share of --try-budget: the rest is each
# run's start-up and warm-up, and the rounds added to decide a fix.
RUN_STEPS_BUDGET_SHARE = 0.25
# At most this many measured steps a run: each is a float in the report's JSON, every run.
MAX_RUN_STEPS = 5000


@dataclass(frozen=True)
class RunSize:
    """How many steps each trial run measures, and what decided it."""

    steps: int
    asked: int  # --try-fixes N: the least a run measures
    step_s: float | None  # the script's step the count was read from (None: not known)
    # "asked": N steps already cover the time wanted (or the step is not known); "time": sized
    # to ``RUN_STEPS_S``; "budget": to the budget's share a run; "script": the script has no
    # more steps past the warm-up; "cap": ``MAX_RUN_STEPS``.
    held_by: Literal["asked", "time", "budget", "script", "cap"]
    target_s: float  # the measured time a run was sized to


def run_size(
    asked: int,
    step_s: float | None,
    budget_s: float,
    runs: int,
    script_steps: int | None = None,
    warmup: int = 0,
) -> RunSize:
    """Measured steps a run: at least ``asked``, and as many as cover ``RUN_STEPS_S`` of the
    script's step (``step_s``, its median step), no more than the budget's share over the
    ``runs`` planned (``RUN_STEPS_BUDGET_SHARE``), the steps the script has past the warm-up
    (``script_steps``, its whole run's count where known) and ``MAX_RUN_STEPS``. A slow step
    keeps ``asked``: 60 steps of 50 ms are 3 s already."""
    target_s = min(RUN_STEPS_S, RUN_STEPS_BUDGET_SHARE * budget_s / max(1, runs))
    held: Literal["time", "budget"] = "time" if target_s >= RUN_STEPS_S else "budget"
    if step_s is None or not step_s > 0 or not math.isfinite(step_s):
        return RunSize(asked, asked, None, "asked", target_s)
    want = math.ceil(target_s / step_s)
    if want <= asked:
        return RunSize(asked, asked, step_s, "asked", target_s)
    steps = want
    why: Literal["time", "budget", "script", "cap"] = held
    if steps > MAX_RUN_STEPS:
        steps, why = MAX_RUN_STEPS, "cap"
    if script_steps is not None and script_steps > 0 and steps > script_steps - warmup:
        steps, why = script_steps - warmup, "script"
    if steps <= asked:
        return RunSize(asked, asked, step_s, "asked", target_s)
    return RunSize(steps, asked, step_s, why, target_s)
