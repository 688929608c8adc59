"""The findings' sentences: each rule family's figures (``records.Said``) worded, one module a family.

Rules compute and decide; they hand their figures up as one typed record per message and write
no sentence (pyproject's import-linter contract "Analysis and rules never word", and
tests/test_rules_never_word.py). The report words its findings here when it is built
(``report.build``), so the report, its JSON (``rep.to_json()``) and every view hold the same
text; a report read back from JSON holds it already. This package stands between the report
and the rules: the views' own wording of the other records is ``views/wording.py``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Iterable

from gpu_notebook.records import Finding
from gpu_notebook.words.common import WORDERS, Words
from gpu_notebook.words.notes import fix_prefix, note_lines

__all__ = ["Words", "word_finding", "word_findings", "worded"]

# Each family's module registers its wordings (@worder) when imported: every module of this
# package is, so a new rule family's wording is its one new module here, listed nowhere else.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def word_finding(finding: Finding) -> Finding:
    """The finding with its figures worded: its title and source, its evidence, then the lines of
    the rules' notes, then what was appended to it as text; its fix after a note's prefix
    (``Small: ...``). A finding without figures keeps its text and gets its notes."""
    said = finding.said
    if said is None and not finding.notes:
        return finding
    if said is None:
        base = Words(finding.title, finding.evidence, finding.fix, finding.source)
        appended: tuple[str, ...] = ()
    else:
        base = WORDERS[type(said)](said)
        appended = finding.evidence
    notes = [line for note in finding.notes for line in note_lines(note)]
    return dataclasses.replace(
        finding,
        title=base.title,
        evidence=(*base.evidence, *notes, *appended),
        fix=fix_prefix(finding.notes) + base.fix,
        source=base.source,
        said=None,
        notes=(),
    )


def word_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Each finding worded (``word_finding``), in order."""
    return tuple(word_finding(f) for f in findings)


def worded(finding: Finding | None) -> Finding | None:
    """One rule's outcome worded (None: it found nothing)."""
    return None if finding is None else word_finding(finding)
