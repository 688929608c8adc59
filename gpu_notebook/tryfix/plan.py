"""The report's offered fixes -> the variants to try, and the order the runs go in."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.compare_samples import measurable
from gpu_notebook.records import Finding, Report

__all__ = ["BASELINE", "Variant", "measurable", "offered_variants", "schedule", "unmeasurable"]

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
