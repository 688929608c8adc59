"""What ``--try-fixes`` says, before it is worded: one record per message, its figures typed.

The trials decide and hand these up (``TryFixes.said``, ``FixTrial.said``, and the progress
callback's argument); ``views/tryfix_text`` words them into ``TryFixes.notes``/``FixTrial.note``
and the progress lines, as ``gpu_notebook.words`` words a finding's ``Said``. The JSON holds the
worded text (``Report.to_dict`` drops these records), so a report read back reads the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_notebook.records import TrialMarginSource, TrialSaid

__all__ = [
    "BaselineFailed",
    "BoundTooSmall",
    "BudgetEndedRun",
    "BudgetFixesCut",
    "BudgetNotReached",
    "BudgetRanOut",
    "BudgetRoundsCut",
    "DecidedAfter",
    "FollowerRank",
    "MarginRead",
    "NoPatch",
    "NothingToTry",
    "PatchBroke",
    "PerSample",
    "RunEnded",
    "RunTooShort",
    "RunsSized",
    "StepsUnfinished",
    "StillUndecided",
    "TooBusy",
    "TooFewRuns",
    "TooFewSteps",
    "TooSmallHere",
    "TrialSaid",
    "Trying",
    "TryingBaseline",
    "Undecided",
    "WarmupStalled",
]


# -- the trials as a whole (TryFixes.said) ---------------------------------------------------


@dataclass(frozen=True)
class NothingToTry(TrialSaid):
    """No offered fix had a patch and a bound worth measuring."""


@dataclass(frozen=True)
class NoPatch(TrialSaid):
    """An offered fix left untried: no patch of the script could be written."""

    title: str
    refusal: str | None


@dataclass(frozen=True)
class BoundTooSmall(TrialSaid):
    """A patch left untried: its model's bound is within what two runs of the script differ by."""

    title: str
    bound: float | None  # the model's ends (Finding.gain_bound / gain_low)
    low: float | None
    stated_high: float | None  # the range two runs may read (the model's, widened by the margin)
    stated_low: float | None
    run_to_run: float


@dataclass(frozen=True)
class RunTooShort(TrialSaid):
    """An offered fix left untried: the script's run ends after ``steps`` steps, before a trial
    run times ``needed`` steps past its warm-up of ``warmup`` (a per-step gain is not
    measurable on a run this short; not a failure of the fix)."""

    title: str
    steps: int
    warmup: int
    needed: int


@dataclass(frozen=True)
class BaselineFailed(TrialSaid):
    """The script as it is did not give a run to compare against (every fix: not measured)."""

    why: Literal["timed out", "broke", "no steps"]
    error_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class BudgetFixesCut(TrialSaid):
    """The budget fits only some of the offered fixes."""

    budget_s: float
    per_run_s: float
    kept: int
    offered: int
    rounds: int


@dataclass(frozen=True)
class BudgetRoundsCut(TrialSaid):
    """The budget fits every fix in fewer rounds than asked."""

    budget_s: float
    rounds: int
    asked: int


@dataclass(frozen=True)
class BudgetRanOut(TrialSaid):
    """The budget ran out before every planned run."""


@dataclass(frozen=True)
class RunsSized(TrialSaid):
    """How many steps each run measured, and why (``plan.run_size``): sized by the time they
    cover, ``asked`` (--try-fixes N) the least."""

    steps: int
    asked: int
    step_s: float | None  # the script's median step they were sized on (None: not known)
    target_s: float  # the measured time a run was sized to
    held_by: Literal["asked", "time", "budget", "script", "cap"]
    pilot_steps: int | None = None  # the first run ran this many to size them: not compared


@dataclass(frozen=True)
class StillUndecided(TrialSaid):
    """Fixes still undecided after the rounds added to decide them."""

    added: int
    titles: tuple[str, ...]
    capped: bool  # the cap of added rounds ended it (else the budget)
    cap: int


@dataclass(frozen=True)
class FollowerRank(TrialSaid):
    """A rank other than 0 under torchrun ran what rank 0 posted."""

    runs: int


# -- progress (the progress callback's argument) ----------------------------------------------


@dataclass(frozen=True)
class TryingBaseline(TrialSaid):
    """The first run of the script as it is, which sizes the plan."""

    warmup: int
    steps: int


@dataclass(frozen=True)
class Trying(TrialSaid):
    """One run of one arm (``title`` None: the script as it is); ``retry_s``: its warm-up again."""

    title: str | None
    retry_s: float | None = None


# -- one fix's trial (FixTrial.said) ------------------------------------------------------------


@dataclass(frozen=True)
class WarmupStalled(TrialSaid):
    """Its warm-up did not end within the limit, tried twice."""

    warmup: int
    limit_s: float


@dataclass(frozen=True)
class StepsUnfinished(TrialSaid):
    """A run of it did not end its timed steps within its limit (``factor`` times the slowest
    run so far) after its warm-up ended: stopped there, and not measured (a stopped run is no
    sample of the fix; its partial steps, said, are not compared)."""

    limit_s: float
    factor: float
    timed: int  # timed steps it had ended when stopped
    asked: int
    median_s: float | None  # of those (None: none ended)
    baseline_median_s: float | None  # the script as it is's step in its trial runs


@dataclass(frozen=True)
class BudgetEndedRun(TrialSaid):
    """A run of it was stopped at what was left of the budget (under a run's usual limit)
    before it ended its steps: not measured."""

    limit_s: float
    warmed: bool  # its warm-up had ended
    timed: int
    asked: int
    per_run_s: float  # what a run of the script as it is took


@dataclass(frozen=True)
class BudgetNotReached(TrialSaid):
    """Skipped: the budget did not reach it."""


@dataclass(frozen=True)
class PatchBroke(TrialSaid):
    """The patched script failed where the script as it is ran."""


@dataclass(frozen=True)
class TooFewRuns(TrialSaid):
    """Fewer runs of the fix finished than a comparison needs."""

    finished: int
    # The budget could not afford its next run (its runs take about ``run_s``): said, with
    # what would.
    budget_out: bool = False
    run_s: float | None = None


@dataclass(frozen=True)
class TooFewSteps(TrialSaid):
    """Too few timed steps to compare."""


@dataclass(frozen=True)
class Undecided(TrialSaid):
    """Its interval holds both 1x and its predicted gain after the rounds it had."""

    rounds: int
    low: float
    high: float
    why: Literal["budget", "cap", "no round"]
    cap: int
    # The rounds' spread against the gain to tell from none (``sequential.rounds_to_decide``),
    # and about how many rounds in all would decide it at that spread (None: none would). Not
    # read (fewer than 3 rounds): None.
    spread: float | None = None
    gain: float | None = None
    rounds_needed: int | None = None
    round_s: float | None = None  # what one more round takes (a run of each arm)


@dataclass(frozen=True)
class TooSmallHere(TrialSaid):
    """The fix's model high end is within what this trial's runs of the script differed by: it
    ended undecided because no gain it can give is larger than the machine's own noise."""

    bound: float  # the model's high end (``Finding.gain_bound``)
    low: float | None  # the model's low end (None: "up to")
    margin: float  # the trial's margin (``base_margin``)
    runs: int  # the script's runs the margin was read from
    source: TrialMarginSource


@dataclass(frozen=True)
class TooBusy(TrialSaid):
    """The arms' runs waited for a core at least half their steps' time (too busy to judge):
    only the interleaved rounds' own spread decides, from 3 rounds."""

    baseline_wait: float  # the script's runs' median wait share
    fix_wait: float
    rounds: int


@dataclass(frozen=True)
class DecidedAfter(TrialSaid):
    """Decided in rounds added after the planned ones."""

    added: int


@dataclass(frozen=True)
class MarginRead(TrialSaid):
    """The margin its range and its planned look were read with (``tryfix.base_margin``): what
    the trial's ``runs`` runs of the script as it is differed by (``spread``, before the 5%
    floor), or the profiled run's where they were too few (``needed``)."""

    margin: float
    source: TrialMarginSource
    runs: int
    spread: float | None
    profiled: float
    needed: int


@dataclass(frozen=True)
class RunEnded(TrialSaid):
    """A run ended (the script's end) before its planned steps."""

    steps: int


@dataclass(frozen=True)
class PerSample(TrialSaid):
    """A step of the fix does ``work`` times the script's samples: read per sample."""

    work: float
