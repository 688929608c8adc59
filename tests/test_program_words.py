"""A report names the program the user ran: a ``gpucheck run`` report says "script" (its text,
its HTML page and its JSON messages), a ``%%gpucheck`` report says "cell". Real unseen programs
through the real command line, and a real cell through the magic (words/program.py)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.records import Report
from gpu_notebook.views.html_report import render_html
from gpu_notebook.views.text import render_text
from gpu_notebook.words.program import said_of
from tests.test_cli import gpucheck

UNSEEN = Path(__file__).resolve().parents[1] / "benchmarks" / "unseen_programs"

# Sentences that speak of a notebook cell, or of a script, as such: kept on either report.
NOTEBOOK_FACTS = ("a notebook pays them in the first cell that imports",)
SCRIPT_FACTS = ("as a script under torchrun",)
_CODE = re.compile(r"`[^`\n]*`")  # the user's code, or a command line, as the report quotes it


def _words(text: str, kept: tuple[str, ...], word: str) -> list[str]:
    """The sentences of ``text`` that name ``word`` (outside code and the kept facts)."""
    text = _CODE.sub("", text)
    for fact in kept:
        text = text.replace(fact, "")
    found = re.compile(rf"\b{word}s?\b", re.IGNORECASE)
    return [line for line in text.splitlines() if found.search(line)]


class _Text(HTMLParser):
    """The page's words as a reader sees them: no script or style, nor the user's code (a
    <pre>, a line of the source beside its time bar)."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[str] = []
        self._skip: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        code_line = tag == "td" and "white-space:pre;" in (dict(attrs).get("style") or "")
        if tag in ("script", "style", "pre") or code_line:
            self._skip.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skip and self._skip[-1] == tag:
            self._skip.pop()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.out.append(data)


def _page_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return "\n".join(parser.out)


def _messages(data: dict[str, Any]) -> str:
    """Every sentence of a report's JSON: the verdict, the findings with their fixes' titles
    and refusals (never the patched source or its diff), the GPU estimate, the notes."""
    v = data["verdict"]
    out = [v["headline"], v["more_gpus"], *v["evidence"], *data["run"]["notes"]]
    for f in data["findings"]:
        out += [f["title"], *f["evidence"], f["fix"], f["source"]]
        p = f["proposal"]
        if p is not None:
            out += [p["title"], *p["why"], (p["refusal"] or "").split("\n")[0]]
    if data["gpu_estimate"] is not None:
        out.append(data["gpu_estimate"]["limited_by"])
    return "\n".join(out)


def test_a_text_worded_for_a_cell_is_said_of_a_script_and_code_is_kept():
    said = said_of(
        "script",
        "line 4 `cell = 2` of this cell sets it: an earlier cell, an imported module or a "
        "library did; run the patched cell",
    )
    assert said == (
        "line 4 `cell = 2` of this script sets it: an imported module or a library did; run "
        "the patched script"
    )
    assert said_of("script", "Most of the cell's time (a notebook pays them in the first cell "
                   "that imports, not again)") == ("Most of the script's time (a notebook pays "
                                                   "them in the first cell that imports, not again)")  # fmt: skip
    # A refusal's sketch after its first line is code: kept as written.
    assert said_of("script", "no loop in this cell:\n# this cell\n") == (
        "no loop in this script:\n# this cell\n"
    )
    assert said_of("cell", "two runs of the same script differ") == (
        "two runs of the same cell differ"
    )


@pytest.mark.parametrize(
    "program", ["best_state_deepcopy", "iterable_text_stream", "arrays_from_function"]
)
def test_a_script_report_says_script_not_cell(program, tmp_path):
    out_json, out_html = tmp_path / "r.json", tmp_path / "r.html"
    res = gpucheck(
        "run",
        "--json",
        str(out_json),
        "--html",
        str(out_html),
        str(UNSEEN / f"{program}.py"),
        cwd=tmp_path,
        timeout=600,
    )
    assert out_json.exists(), res.stderr[-3000:]
    data = json.loads(out_json.read_text())
    assert data["run"]["program"] == "script"
    report_text = res.stderr[res.stderr.index("gpucheck: ") :]
    assert _words(report_text, NOTEBOOK_FACTS, "cell") == []
    assert _words(_messages(data), NOTEBOOK_FACTS, "cell") == []
    assert _words(_page_text(out_html.read_text()), NOTEBOOK_FACTS, "cell") == []
    assert "script" in report_text  # said of the script where it was of the cell


def test_a_cell_report_says_cell_not_script(ip):
    ip.user_ns.pop("rep", None)
    body = (UNSEEN / "best_state_deepcopy.py").read_text().replace("range(100)", "range(30)")
    ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    report: Report = ip.user_ns["rep"]
    assert report.run.program == "cell"
    assert _words(render_text(report), SCRIPT_FACTS, "script") == []
    assert _words(_messages(json.loads(report.to_json())), SCRIPT_FACTS, "script") == []
    assert _words(_page_text(render_html(report)), SCRIPT_FACTS, "script") == []


def test_the_magics_options_are_said_as_gpucheck_runs_on_a_script():
    """Unseen round 12 (pickle_whole_per_item under gpucheck run): "profile the steps that hold
    most of the time (%%gpucheck -w N starts the window later)" on a script's report. The
    options are one table (options.py): a script's report names them on gpucheck run."""
    text = "profile later steps (%%gpucheck -w N starts the window later); -s N (%%gpucheck -s 10)"
    assert said_of("script", text) == (
        "profile later steps (gpucheck run -w N starts the window later); -s N (gpucheck run -s 10)"
    )
    assert said_of("cell", text) == text
