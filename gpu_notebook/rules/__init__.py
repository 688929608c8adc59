"""Rules: from a Run and its Analysis to ranked Findings with evidence, gain bounds and fixes.

``run_rules(run, analysis, verdict, namespace=shell.user_ns)`` scans the cell's source, reads
the live objects it names (when given the namespace), runs every rule of every family and ranks
the findings: severity first, then the gain bound (largest first; unbounded findings after
bounded ones). Rules decide on the typical step (a stalled minority of profiled steps left out)
and rank by that reading; the bound they show is the larger of the typical and the all-steps
reading, so it stays an upper bound. A finding names its fix by id (``RULE_FIXES``: the fixes
rule modules own beside their check); ``gpu_notebook.words.proposals.attach_fixes`` turns it
into the patched cell. A rule module is found, not listed: any module here with ``RULES``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN, measurable, uncertain
from gpu_notebook.analysis.steady import with_steady_ops, without_stalls
from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.cell.scan import CELL_LINE_OFFSET, cell_facts
from gpu_notebook.fixes.records import Fix
from gpu_notebook.records import Analysis, Finding, Run, Said, Verdict
from gpu_notebook.rules.common import (
    FEW_STEPS,
    SEVERITY_RANK,
    Rule,
    found,
    profiled_steps,
)
from gpu_notebook.traces.windows import WindowTraces


def _families() -> tuple[ModuleType, ...]:
    """Every module of this package that declares ``RULES``, listed nowhere else. Their order
    only breaks ties between findings of equal severity and bound: each module's ``TIE`` (the
    verdict table's order), then by name."""
    found = [
        module
        for info in pkgutil.iter_modules(__path__)
        if hasattr(module := importlib.import_module(f"{__name__}.{info.name}"), "RULES")
    ]
    return tuple(sorted(found, key=lambda m: (getattr(m, "TIE", _UNTIED), _short(m))))


_UNTIED = 10**6  # after every family's TIE


def _short(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[1]


FAMILIES = _families()
RULES: tuple[Rule, ...] = tuple(rule for family in FAMILIES for rule in family.RULES)
# Fixes a rule module owns beside its check (any module-level ``Fix``; its findings pass it as
# ``found(..., fix=FIX)``), by id. The catalog's own fixes are fixes.FIXES.
RULE_FIXES: dict[str, Fix] = {
    fix.fix_id: fix for family in FAMILIES for fix in vars(family).values() if isinstance(fix, Fix)
}

# Findings whose fix gains memory (a step that fits, a run that does not grow), not step time:
# an unbounded speed gain says nothing of them.
MEMORY_RULES = ("memory.", "run.memory_creep")

# Profiled steps this much slower than unprofiled ones are worth a word in the evidence.
NOTABLE_PROFILING_FACTOR = 1.2


def run_rules(
    run: Run,
    analysis: Analysis,
    verdict: Verdict,
    *,
    namespace: Mapping[str, Any] | None = None,
    line_offset: int = CELL_LINE_OFFSET,
    rules: Sequence[Rule] = RULES,
    facts: SourceFacts | None = None,
    traces: WindowTraces | None = None,
) -> tuple[Finding, ...]:
    """Every finding of every rule for this run, ranked (see the module docstring).

    ``line_offset`` is 0 for a source that is not a ``%%gpucheck`` cell body (the CLI's
    examples). ``facts``: the cell's facts when the caller has read them already, so live
    objects are read once. ``traces``: the report's decoded window traces (without them the
    window's file is decoded here if needed).
    """
    if facts is None:
        facts = cell_facts(run.cell_source, namespace, line_offset=line_offset)
    steady, stalls = without_stalls(analysis)
    if stalls:
        steady = with_steady_ops(steady, run, traces)
    confidence = _confidence_note(steady, verdict)
    # On a GPU the host's profiling overhead mostly hides behind kernels; the note is for CPU runs.
    factor = analysis.profiling_factor if analysis.gpu is None else None
    ranked: list[tuple[tuple[int, int, float], int, Finding]] = []
    for position, rule in enumerate(rules):
        try:
            found = rule(run, steady, facts)
        except Exception as exc:  # noqa: BLE001 - our bug: the other rules and the cell stand
            found = _rule_failed(rule, exc)
        if found is None:
            continue
        # Ranked by the typical step's reading; the bound shown may be the larger, safe one.
        key = rank_key(found)
        if stalls:
            found = _conservative_bound(
                found, rule(run, analysis, facts), stalls, profiled_steps(analysis)
            )
        if factor is not None:
            found = _profiling_note(found, factor)
        if confidence is not None and found.phase_share is not None:
            found = dataclasses.replace(found, notes=(*found.notes, confidence))
        unsized = _unsized(found, run)
        if unsized is not found:
            ranked.append((rank_key(unsized), position, unsized))
            continue
        found = _with_margin(found, analysis.run_margin)
        small = _small_gain(found)
        if small is not found:
            found, key = small, rank_key(small)
        ranked.append((key, position, found))
    return tuple(f for _, _, f in sorted(ranked, key=lambda item: (item[0], item[1])))


@dataclass(frozen=True)
class RuleFailed(Said):
    """A rule raised on this run (a bug of ours, never the user's): said at info level with
    what it raised, so the report keeps every other finding and the cell its own outcome
    (a rule reading a fact another module had not yet grown failed the user's cell with our
    AttributeError)."""

    rule: str  # module.function
    error: str  # ExceptionType: message


def _rule_failed(rule: Rule, exc: Exception) -> Finding:
    name = f"{getattr(rule, '__module__', '?')}.{getattr(rule, '__qualname__', repr(rule))}"
    message = str(exc).splitlines()[0][:200] if str(exc) else ""
    said = RuleFailed(name.removeprefix("gpu_notebook.rules."), f"{type(exc).__name__}: {message}")
    return found("internal.rule_failed", "info", said)


@dataclass(frozen=True)
class SmallGain(Said):
    """The fix's bound is within what two runs of the same script differ by (``bound``,
    ``low``: the model's range); ``measured_low``: where only its own interval's low end is
    (``Finding.bound_low``), else None."""

    bound: float | None
    low: float | None
    run_to_run: float
    measured_low: float | None = None
    # The range as two runs of this script may read it (widened by the run's margin), where
    # it differs from the model's: said beside it, never as the small figure.
    read_high: float | None = None
    read_low: float | None = None


@dataclass(frozen=True)
class UncertainGain(Said):
    """The fix's range runs from within what two runs of the same script differ by (``low``,
    the stated low end) to well above it (``bound``, the model's): a measurement must settle
    it. ``low`` None: a range "up to ``bound``" within the run's own margin (``run_to_run``)."""

    bound: float | None
    low: float | None
    run_to_run: float


@dataclass(frozen=True)
class UnboundedGain(Said):
    """No figure of this run bounds what the fix gains (compile, anomaly detection off,
    inference mode, ...): no recommendation, only "measure it" (``--try-fixes``)."""


@dataclass(frozen=True)
class Margin(Said):
    """The fix's range widened by what two runs of the code differ by here (``margin``); the
    high end said (``high``) is widened no further than ``Finding.gain_ceiling``."""

    margin: float
    bound: float
    low: float | None
    run_to_run: float
    high: float


@dataclass(frozen=True)
class StallsLeftOut(Said):
    """Stalled steps left out to decide the finding; ``full_bound``: the larger bound given."""

    stalls: int
    steps: int
    full_bound: float | None


@dataclass(frozen=True)
class ProfilingFactor(Said):
    """Profiled steps took this many times as long as unprofiled ones."""

    factor: float


@dataclass(frozen=True)
class LowConfidence(Said):
    """Too few profiled steps (``steps``), or the verdict's own low confidence."""

    steps: int | None
    confidence: str


@dataclass(frozen=True)
class TooShortToSize(Said):
    """The run ended after ``steps`` steps, ``warmup`` of them the profiler's warm-up: fewer
    than the ``needed`` steps past it that size a per-step gain. The fix is kept, unsized."""

    steps: int
    warmup: int
    needed: int


def _unsized(found: Finding, run: Run) -> Finding:
    """A fix whose gain is per step, on a run whose steps are fewer than the profiler's warm-up
    and the ``FEW_STEPS`` a bound needs past it, cannot be sized on this run: its figures rest
    on the first steps, which carry one-time costs (first calls, a framework's set-up, a
    loader's first batches), and a share from one or two steps is no bound. It is kept at
    severity info with no range, and says why (unseen hf_trainer_2_steps, ``max_steps=2``:
    "[high] up to 1.84x" for workers from its two steps' data wait, which a trial of warm-up
    and timed steps could never measure). A fix whose gain is memory is not judged here; a
    run whose steps were not counted (0) neither."""
    steps, warmup = run.steps.step_count, run.window.warmup_steps
    if found.fix_id is None or found.rule_id.startswith(MEMORY_RULES):
        return found
    if not 0 < steps < warmup + FEW_STEPS:
        return found
    note = TooShortToSize(steps, warmup, FEW_STEPS)
    return dataclasses.replace(
        found, severity="info", gain_bound=None, gain_low=None, bound_low=None,
        gain_ceiling=None, notes=(*found.notes, note),
    )  # fmt: skip


def _small_gain(found: Finding) -> Finding:
    """A fix bounded within what two runs of the same script differ by is no recommendation: it
    may have no measurable effect (``--try-fixes`` does not try it). It is kept, at severity
    info, and says so first. The bound is read with its own interval where the rule gave one
    (``Finding.bound_low``), so a bound at the line reads Small in a quiet and a loaded run
    alike. A fix whose range only *starts* there is uncertain, not small: it keeps its severity
    and ``--try-fixes`` measures it. An unbounded fix says first that nothing bounds it (a fix
    whose gain is memory, not step time, is not judged here)."""
    if found.fix_id is None:
        return found
    if found.gain_bound is None:
        if found.rule_id.startswith(MEMORY_RULES):
            return found
        return dataclasses.replace(found, notes=(*found.notes, UnboundedGain()))
    margin = max(RUN_TO_RUN, found.gain_margin)
    if not measurable(found):
        bound = found.gain_bound
        below = found.bound_low if bound is not None and bound > 1.0 + RUN_TO_RUN else None
        # Small is the model's bound against the 5% (``measurable``): that is the figure said;
        # the range widened by the run's margin goes beside it (a busy run's "Small (up to
        # 8.79x; ...)" for a fix of up to 1.00x).
        small = SmallGain(
            found.gain_bound, found.gain_low, RUN_TO_RUN, below,
            read_high=found.stated_high, read_low=found.stated_low,
        )  # fmt: skip
        return dataclasses.replace(found, severity="info", notes=(*found.notes, small))
    if uncertain(found):
        if found.gain_low is None:
            wide = UncertainGain(found.gain_bound, None, margin)
        else:
            wide = UncertainGain(found.gain_bound, found.stated_low, margin)
        return dataclasses.replace(found, notes=(*found.notes, wide))
    return found


def _with_margin(found: Finding, margin: float | None) -> Finding:
    """The finding's range as a measurement of its fix may read it: widened on both sides by
    what two runs of this code differ by on this machine (``compare_samples.run_margin``). The
    model's ends stay in ``gain_low``/``gain_bound``; the user reads ``stated_low``/
    ``stated_high``: noise may read a fix above its model, never above what it can do."""

    if margin is None or found.fix_id is None or found.gain_bound is None:
        return found
    widened = dataclasses.replace(found, gain_margin=margin)
    high = widened.stated_high
    assert high is not None  # the bound is known
    note = Margin(margin, found.gain_bound, found.gain_low, RUN_TO_RUN, high)
    return dataclasses.replace(widened, notes=(*found.notes, note))


def _conservative_bound(steady: Finding, full: Finding | None, stalls: int, steps: int) -> Finding:
    """The steady-steps finding, with the larger bound of the two readings and a note on it.

    Stalled steps are left out to decide *whether* a rule fires (one 8 ms pause must not make a
    0.4 ms step look input-bound), but a "stall" can be the cost itself (a print that flushes
    every few steps), and the measured speedup after a fix counts every step: the bound stays
    an upper bound either way."""

    if steady.phase_share is None and steady.gain_bound is None:
        return steady
    if (
        full is not None
        and full.gain_bound is not None
        and (steady.gain_bound is None or full.gain_bound > steady.gain_bound)
    ):
        note = StallsLeftOut(stalls, steps, full.gain_bound)
        return dataclasses.replace(
            steady,
            phase_share=full.phase_share,
            gain_bound=full.gain_bound,
            gain_ceiling=None
            if steady.gain_ceiling is None or full.gain_ceiling is None
            else max(steady.gain_ceiling, full.gain_ceiling),
            notes=(*steady.notes, note),
        )
    return dataclasses.replace(steady, notes=(*steady.notes, StallsLeftOut(stalls, steps, None)))


def _profiling_note(found: Finding, factor: float) -> Finding:
    """Say when profiled steps ran notably slower than unprofiled ones (shares come from them).

    Seen on 2 cores: a per-step print took ~50% of a profiled step and ~67% of an unprofiled
    one, and the measured speedup of the fix (all steps) beat the Amdahl bound of the profiled
    share. The bound stays the Amdahl bound of what was measured; the note says how far the
    unprofiled steps are from it.
    """
    if found.phase_share is None or factor < NOTABLE_PROFILING_FACTOR:
        return found
    return dataclasses.replace(found, notes=(*found.notes, ProfilingFactor(factor)))


def rank_key(finding: Finding) -> tuple[int, int, float]:
    """Severity first; then bounded findings by their bound, largest first; unbounded last."""
    bound = finding.gain_bound
    return (SEVERITY_RANK[finding.severity], 0 if bound is not None else 1, -(bound or 0.0))


def _confidence_note(analysis: Analysis, verdict: Verdict) -> LowConfidence | None:
    steps = profiled_steps(analysis)
    if steps >= FEW_STEPS and verdict.confidence != "low":
        return None
    return LowConfidence(steps if steps < FEW_STEPS else None, verdict.confidence)


__all__ = [
    "FAMILIES",
    "RULES",
    "cell_facts",
    "rank_key",
    "run_rules",
]
