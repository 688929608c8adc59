"""The user's program as the report names it: a ``%%gpucheck`` cell, or a ``gpucheck run`` script.

The findings, notes and refusals are worded once, for a cell ("no line of this cell sets it");
a script's report (``Run.program == "script"``) says them of the script ("this script", "the
script's time", "line 7"). Rewording here, as the report is built, keeps that in one place for
the report, its JSON and every view (the views pass their own sentences through ``said_of``),
where naming the program in each sentence would need the program handed to every worder. A
notebook's own notions (an earlier cell, In[3]) have no script counterpart: their phrases are
said of what a script has in their place (an imported module). The converse holds for the few
sentences worded for a script ("two runs of the same script") on a cell's report.

Text in backticks is the user's code, and a multi-line text's lines after its first are a code
sketch or a diff: neither is reworded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Literal

from gpu_notebook.records import Finding, FixProposal, Report

Program = Literal["cell", "script"]

# Kept as they are on a script: the sentence speaks of a notebook's cell itself.
_NOTEBOOK_FACTS = ("a notebook pays them in the first cell that imports",)

# Ordered: the notebook's notions first, then the longer phrases, then the noun itself.
_ON_SCRIPT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), said)
    for pattern, said in (
        # The magic's options are gpucheck run's (options.py, one table): "-w N" as such.
        (r"%%gpucheck (?=-)", "gpucheck run "),
        (r"an earlier cell, an imported module or a library did", "an imported module or a library did"),
        (r"an earlier cell's (torch\.set_default_dtype\([^)]*\)), or a module's, did", r"a module's \1 did"),
        (r"an earlier cell's (torch\.set_num_threads\(1\))", r"a module's \1"),
        (r"an earlier cell's profiler", "a profiler started before the script"),
        (r"no line of this cell turns it on: an earlier cell did", "no line of this script turns it on: an imported module did"),
        (r"the earlier cell's", "the module's"),
        (r"[Pp]ut %%gpucheck on the cell that calls", "run gpucheck on the script that calls"),
        (r"\(it stays set for the cells after it\)", "(it stays set for the rest of the process)"),
        (r"it stays set for the cells after it", "it stays set for the rest of the process"),
        (r", and outlives the cell\)", ")"),
        (r"run that cell again", "run the script again"),
        (r"run that cell", "edit it"),
        (r"(?:a|an|the) (?:earlier|other) cell", "an imported module"),
        (r"another cell", "another module"),
        (r"earlier cells", "imported modules"),
        (r"(?:in )?a cell of its own", "in a script of its own"),
        (r"\bcell line\b", "line"),
        (r"\bCell\b", "Script"),
        (r"\bcells\b", "scripts"),
        (r"\bcell\b", "script"),
    )
)  # fmt: skip

_ON_CELL: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), said)
    for pattern, said in (
        (r"\b(the same|this) script\b", r"\1 cell"),
        (r"\bmade by a call of the script\b", "made by a call of the cell"),
    )
)

# A span of the user's code (`...`), kept as written.
_CODE = re.compile(r"`[^`\n]*`")


def said_of(program: Program, text: str) -> str:
    """``text`` (worded for a cell) as said of ``program``: see the module docstring."""
    table = _ON_SCRIPT if program == "script" else _ON_CELL
    first, newline, rest = text.partition("\n")
    out: list[str] = []
    at = 0
    for code in _CODE.finditer(first):
        out.append(_reworded(table, first[at : code.start()]))
        out.append(code.group())
        at = code.end()
    out.append(_reworded(table, first[at:]))
    return "".join(out) + newline + rest


def said_of_lines(program: Program, text: str) -> str:
    """Each line of ``text`` as ``said_of`` says it: a view's own text, no code in it but in
    backticks (a template's, the text report's)."""
    return "\n".join(said_of(program, line) for line in text.split("\n"))


def _reworded(table: tuple[tuple[re.Pattern[str], str], ...], prose: str) -> str:
    for i, fact in enumerate(_NOTEBOOK_FACTS):  # a stand-in no phrase matches, put back after
        prose = prose.replace(fact, f"\0{i}\0")
    for pattern, said in table:
        prose = pattern.sub(said, prose)
    for i, fact in enumerate(_NOTEBOOK_FACTS):
        prose = prose.replace(f"\0{i}\0", fact)
    return prose


def report_said_of(report: Report) -> Report:
    """The report with every worded text said of its program (``Run.program``): the verdict,
    the findings with their fixes' titles and refusals, the GPU estimate's limit, the notes.
    The user's code (the source, a patched source, a diff, an error) is never touched."""
    program = report.run.program
    say: Callable[[str], str] = lambda text: said_of(program, text)  # noqa: E731
    v = report.verdict
    verdict = dataclasses.replace(
        v,
        headline=say(v.headline),
        more_gpus=say(v.more_gpus),
        evidence=tuple(map(say, v.evidence)),
    )
    estimate = report.gpu_estimate
    if estimate is not None:
        estimate = dataclasses.replace(estimate, limited_by=say(estimate.limited_by))
    return dataclasses.replace(
        report,
        run=dataclasses.replace(report.run, notes=tuple(map(say, report.run.notes))),
        verdict=verdict,
        findings=tuple(_finding_said(f, say) for f in report.findings),
        gpu_estimate=estimate,
    )


def _finding_said(f: Finding, say: Callable[[str], str]) -> Finding:
    p: FixProposal | None = f.proposal
    if p is not None:
        p = dataclasses.replace(
            p,
            title=say(p.title),
            why=tuple(map(say, p.why)),
            refusal=None if p.refusal is None else say(p.refusal),
        )
    return dataclasses.replace(
        f,
        title=say(f.title),
        evidence=tuple(map(say, f.evidence)),
        fix=say(f.fix),
        source=say(f.source),
        proposal=p,
    )
