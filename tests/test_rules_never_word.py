"""Only the views and ``gpu_notebook.words`` word: the stages below hand figures up.

What this checks: every string literal of ``gpu_notebook/rules``, ``analysis``, ``report``,
``capture``, ``traces`` and ``tryfix`` (f-strings included, docstrings not) is read with ``ast``; one of
three words or more is a sentence. Rules hold none: a rule hands its figures up
(``records.Said``) and ``gpu_notebook.words`` words them. The other stages still build some (the
a comparison's lines, the capture's notes): ``STILL_WORDING``
counts them by module, and the counts only fall. A module not listed that words, or a listed one
that words more, fails; so does one that words less than its count, until the count is lowered
(a module at 0 leaves the list). Not counted: a fix a module keeps beside its check
(``Fix(...)``, its codemod's ``Declined(...)`` / ``Edited(...)``) words itself as the fixes
catalog does; an exception's message is worded where it is raised (an error says what to do
next, nvitop's habit), not a report's sentence. The import side (rules and analysis never
import the words or the views) is pyproject's import-linter contract "Analysis and rules never
word"; ``tests/test_layers.py`` lists the functions below the views that return text.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpu_notebook"
BELOW_THE_WORDS = ("rules", "analysis", "report", "capture", "traces", "tryfix")

# Sentences still built below the words, by module: each count only falls. Rule modules hold
# none (attach_fixes' proposals moved to words/proposals.py). Some counted literals are data that
# reads as words (a card's name and datasheet, a regular expression with spaces, an option's
# help).
STILL_WORDING: dict[str, int] = {
    "analysis/compare_samples.py": 5,
    "analysis/gpu_estimate.py": 11,
    "analysis/lines.py": 1,
    "analysis/phases.py": 1,
    "report/compare.py": 3,
    "report/consistency.py": 7,
    "report/from_trace.py": 2,
    "report/job.py": 1,
    "capture/children.py": 1,
    "capture/nvml.py": 13,
    "capture/profiler.py": 3,
    "capture/sampler.py": 3,
    # 10: the window notes of a within-step window are worded from records.WithinStep by
    # words/window.py (issue 23); the session's own notes remain.
    "capture/session.py": 10,
    "capture/stepclock.py": 13,
    "traces/kineto.py": 1,
    "traces/source.py": 11,
    "tryfix/child.py": 1,
    "tryfix/cli_hook.py": 3,
    "tryfix/samples.py": 3,
    "tryfix/sequential.py": 1,
    "tryfix/trials.py": 3,
}


# Calls whose text is a fix's (the catalog's records and a codemod's outcome).
FIX_TEXT = {"Fix", "Declined", "Edited"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            out.update(id(n) for n in ast.walk(node.exc))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FIX_TEXT
        ):
            out.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def sentences(source: str) -> list[str]:
    """The string literals of ``source`` (docstrings aside) that read as a sentence."""
    tree = ast.parse(source)
    skip = _docstrings(tree)  # and a fix's own text
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and id(node) not in skip:
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            skip.update(id(v) for v in node.values)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        ):
            text = node.value
        else:
            continue
        if len(text.split()) >= 3:
            found.append(text)
    return found


def _wording_modules() -> dict[str, list[str]]:
    return {
        f"{stage}/{p.name}": s
        for stage in BELOW_THE_WORDS
        for p in sorted((PACKAGE / stage).glob("*.py"))
        if (s := sentences(p.read_text()))
    }


def test_the_check_sees_a_sentence_and_not_an_id_or_a_docstring():
    source = 'def r(n):\n    """A docstring of words."""\n    return f"{n} steps took long", "input.loader_workers"\n'
    assert sentences(source) == ["{} steps took long"]


def test_a_fix_words_itself():
    source = 'FIX = Fix("x", "Make tensors on the GPU", ("a b c",), "u", f)\n'
    assert sentences(source) == []


def test_an_exception_message_is_not_counted():
    source = 'def f(n):\n    if n < 1:\n        raise ValueError(f"--steps must be at least 1 (got {n})")\n'
    assert sentences(source) == []


def test_only_the_listed_modules_write_sentences():
    wording = _wording_modules()
    unlisted = {name: s[:2] for name, s in wording.items() if name not in STILL_WORDING}
    assert not unlisted, f"hand the figures up and word them in words/ or views/: {unlisted}"
    assert not any(name.startswith("rules/") for name in STILL_WORDING)


def test_no_listed_module_words_more_than_its_count():
    wording = _wording_modules()
    more = {
        n: (len(s), STILL_WORDING[n])
        for n, s in wording.items()
        if len(s) > STILL_WORDING.get(n, 0)
    }
    assert not more, f"more sentences below the views (found, listed): word them in views/: {more}"


def test_the_counts_only_fall():
    wording = _wording_modules()
    fewer = {
        n: (len(wording.get(n, [])), c)
        for n, c in STILL_WORDING.items()
        if len(wording.get(n, [])) < c
    }
    assert not fewer, (
        f"fewer sentences (found, listed): lower STILL_WORDING (0: take it off): {fewer}"
    )


def test_the_report_words_its_findings_and_its_json_keeps_only_the_text():
    """A rule's figures and the rules' notes are worded in order; the JSON holds the text alone."""
    import dataclasses

    from gpu_notebook.records import Report
    from gpu_notebook.rules import LowConfidence, SmallGain
    from gpu_notebook.rules.common import found
    from gpu_notebook.rules.memory import NearOom
    from gpu_notebook.words import word_finding
    from tests.scenarios import synthetic as syn

    said = NearOom(peak_bytes=9 * 2**30, total_bytes=10 * 2**30, autocast=True)
    raw = dataclasses.replace(
        found("memory.near_oom", "high", said),
        notes=(LowConfidence(2, "low"), SmallGain(1.02, None, 0.05)),
    )
    assert raw.title == "" and raw.evidence == ()  # the rule wrote no word
    f = word_finding(raw)
    assert f.said is None and f.notes == () and f.title == "GPU memory peaks at 90% of the card"
    assert f.evidence[-1].startswith("low confidence: shares from only 2 profiled step(s)")
    assert f.evidence[2] == "autocast is already on"
    assert f.fix.startswith("Small: may have no measurable effect") and "checkpointing" in f.fix
    report = Report(syn.make_run(""), syn.make_analysis(), syn.VERDICT, findings=(raw, f))
    for data in report.to_dict()["findings"]:
        assert "said" not in data and "notes" not in data


def test_every_message_of_every_rule_has_its_words():
    """A rule's record with no wording would fail the report: each one is registered."""
    import inspect

    import gpu_notebook.rules as rules
    from gpu_notebook.records import Said
    from gpu_notebook.words.common import WORDERS

    notes = {rules.SmallGain, rules.StallsLeftOut, rules.ProfilingFactor, rules.LowConfidence}
    messages = {
        cls
        for family in rules.FAMILIES
        for _, cls in inspect.getmembers(family, inspect.isclass)
        if issubclass(cls, Said) and cls is not Said and cls.__module__ == family.__name__
    }
    assert len(messages) >= 30
    assert not messages - set(WORDERS) - notes, messages - set(WORDERS)


def test_every_answer_and_line_of_the_verdict_has_its_words():
    """The verdict hands figures up (``analysis/verdict_said.py``); a record with no wording
    would fail the report: each one is registered in words/verdict_answers.py or
    words/verdict_lines.py."""
    import inspect

    from gpu_notebook.analysis import verdict_said
    from gpu_notebook.records import VerdictAnswer, VerdictLine
    from gpu_notebook.words.verdict_answers import answer_words
    from gpu_notebook.words.verdict_lines import line_words

    records = [cls for _, cls in inspect.getmembers(verdict_said, inspect.isclass)]
    answers = [c for c in records if issubclass(c, VerdictAnswer) and c is not VerdictAnswer]
    lines = [c for c in records if issubclass(c, VerdictLine) and c is not VerdictLine]
    assert len(answers) >= 20 and len(lines) >= 30
    assert not [
        c for c in answers if answer_words.dispatch(c) is answer_words.dispatch(VerdictAnswer)
    ]
    assert not [c for c in lines if line_words.dispatch(c) is line_words.dispatch(VerdictLine)]
