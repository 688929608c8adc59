"""The findings' sentences: each rule family's figures (``records.Said``) worded, one module a family.

Rules compute and decide; they hand their figures up as one typed record per message and write
no sentence (pyproject's import-linter contract "Analysis and rules never word", and
tests/test_layers.py). The report words its findings here when it is built
(``report.build``), so the report, its JSON (``rep.to_json()``) and every view hold the same
text; a report read back from JSON holds it already. This package stands between the report
and the rules: the views' own wording of the other records is ``views/wording.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from gpu_notebook.records import Finding
from gpu_notebook.words import (
    backend_flags,
    batch,
    copies,
    debug_apis,
    distributed,
    inference,
    input_pipeline,
    launch,
    machine,
    memory,
    precision,
    recompiles,
    run_shape,
    shapes,
    step_logging,
    syncs,
)
from gpu_notebook.words.common import WORDERS, Words

__all__ = ["Words", "word_finding", "word_findings", "worded"]

_FAMILIES = (
    backend_flags,
    batch,
    copies,
    debug_apis,
    distributed,
    inference,
    input_pipeline,
    launch,
    machine,
    memory,
    precision,
    recompiles,
    run_shape,
    shapes,
    step_logging,
    syncs,
)  # imported for their @worder registrations


def word_finding(finding: Finding) -> Finding:
    """The finding with its figures worded: title and source, then its evidence before what the
    rules' notes appended, and its fix after a note's prefix (``Small: ...``)."""
    said = finding.said
    if said is None:
        return finding
    words = WORDERS[type(said)](said)
    return dataclasses.replace(
        finding,
        title=words.title,
        evidence=(*words.evidence, *finding.evidence),
        fix=finding.fix + words.fix,
        source=words.source,
        said=None,
    )


def word_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Each finding worded (``word_finding``), in order."""
    return tuple(word_finding(f) for f in findings)


def worded(finding: Finding | None) -> Finding | None:
    """One rule's outcome worded (None: it found nothing)."""
    return None if finding is None else word_finding(finding)
