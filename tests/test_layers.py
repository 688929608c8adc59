"""Views alone write words: no function of ``analysis/`` or ``report/`` returns text.

What this checks, and what it does not: every function (module level, nested or a method) in
``gpu_notebook/analysis`` and ``gpu_notebook/report`` is read with ``ast``; one whose return
annotation is text (``str``, ``tuple[str, ...]``, ``list[str]``, ``Sequence[str]``, any of them
``| None``) must be listed below, either as text that is no sentence (a name, a label, a file
format) or as a sentence not yet moved into ``views/``. A new sentence-returning function fails
the test; so does a listed one that no longer exists, so the lists only shrink. mypy strict makes
every function annotated, so none slips through unannotated. It does not see sentences stored in
a record's string fields (``JobReport.notes``, ``Run.notes``): those
are named in ``SENTENCES_IN_RECORDS`` and checked to exist the same way.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpu_notebook"
BELOW_THE_VIEWS = ("analysis", "report")

# Text that is data, not a sentence a user reads.
NOT_SENTENCES = {
    "analysis/optimizer_split.py:optimizer_class": "an optimizer's class name from its range",
    "analysis/lines.py:_module_path": "a frame's module path",
    "analysis/lines.py:file_label": "a frame's file label (flame graph, speedscope)",
    "analysis/lines.py:frame_label": "a frame's label 'file:function:line'",
    "analysis/lines.py:_clean": "a source line cleaned for a label",
    "analysis/lines.py:_installed_prefixes": "path prefixes of the installed packages",
    "analysis/lines.py:_own_package": "path prefixes of this package's own files",
    "analysis/framework_stacks.py:_real_path": "a frame file's real path (our own files by it)",
    "analysis/lines.py:to_collapsed": "Brendan Gregg's folded-stacks file format",
    "analysis/phases.py:_measured": "names of the phases a trace measures",
    "analysis/elsewhere.py:defined_not_run": "names of the cell's functions and classes",
    "analysis/elsewhere.py:_call_name": "a called function's name, read from the cell",
    "report/compare.py:normalize_cell": "the cell's source, normalised for comparison",
    "report/compare.py:family": "a rule id's family",
    "report/from_trace.py:_started_at": "an ISO timestamp",
    "report/consistency.py:contradictions": "a self-check's messages for the tests, never shown",
}

# Sentences still built below the views (left for a later change; each one moves into views/ as
# its record learns to carry the figures instead).
STILL_SENTENCES: dict[str, str] = {}

# Record fields that still carry sentences built below the views, as (record, field): by the
# report (a job's notes and its ranks' roles, a comparison's
# findings), the capture (its notes, a window that did not record, NVML's state) and %gpustatus. Each moves into views/ as its record learns to carry the figures instead.
SENTENCES_IN_RECORDS = {
    ("JobReport", "notes"),
    ("JobReport", "roles"),
    ("Run", "notes"),
    ("ProfileWindow", "message"),
    ("SampleSeries", "notes"),
    ("Environment", "nvml_message"),
    ("MachineStatus", "message"),
    ("GpuStatus", "note"),
}

_TEXT = {"str", "tuple[str, ...]", "list[str]", "Sequence[str]"}


def _returns_text(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if fn.returns is None:
        return False
    parts = {p.strip() for p in ast.unparse(fn.returns).split("|")} - {"None"}
    return bool(parts) and parts <= _TEXT


def _text_functions() -> set[str]:
    found = set()
    for stage in BELOW_THE_VIEWS:
        for path in sorted((PACKAGE / stage).glob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _returns_text(node):
                    found.add(f"{stage}/{path.name}:{node.name}")
    return found


def test_the_check_sees_a_function_that_returns_text():
    fn = ast.parse("def describe(x: int) -> str | None: ...").body[0]
    typed = ast.parse("def figures(x: int) -> tuple[float, str]: ...").body[0]
    assert isinstance(fn, ast.FunctionDef) and isinstance(typed, ast.FunctionDef)
    assert _returns_text(fn) and not _returns_text(typed)


def test_no_function_below_the_views_returns_a_sentence():
    found = _text_functions()
    unlisted = found - set(NOT_SENTENCES) - set(STILL_SENTENCES)
    assert not unlisted, f"text built below the views: move it into views/wording.py: {unlisted}"


def test_the_lists_name_only_functions_that_exist():
    found = _text_functions()
    gone = (set(NOT_SENTENCES) | set(STILL_SENTENCES)) - found
    assert not gone, f"listed but no longer returning text: take them off the list: {gone}"


def test_the_records_still_carrying_sentences_exist():
    import dataclasses

    from gpu_notebook import records

    for record, name in SENTENCES_IN_RECORDS:
        cls = getattr(records, record)
        assert name in {f.name for f in dataclasses.fields(cls)}, (record, name)


def test_views_word_what_analysis_used_to():
    """The sentences this change moved live in the views' wording module, not in analysis."""
    from gpu_notebook.analysis import gpu_estimate, host, lines, whatif
    from gpu_notebook.report import compare
    from gpu_notebook.views import wording

    for module, name in (
        (whatif, "render_whatif"),
        (whatif, "baseline_sentence"),
        (whatif, "speedup_label"),
        (gpu_estimate, "describe"),
        (host, "describe"),
        (lines, "describe_line"),
        (compare, "describe"),
        (compare, "outcome_line"),
    ):
        assert not hasattr(module, name), f"{module.__name__}.{name}"
    for name in wording.__all__:
        assert callable(getattr(wording, name))
