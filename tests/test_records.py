"""The records: the contract between stages, independent of the views, with a JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import get_args

import msgspec
import pytest

from gpu_notebook.records import PHASES, SCHEMA_VERSION, Phase, Report
from gpu_notebook.views.html_report import render_html
from gpu_notebook.views.text import render_text
from tests.test_views import synthetic_comparison, synthetic_gpu_report


def test_every_profiler_window_is_one_record() -> None:
    """The first window and the later ones are one ``ProfileWindow`` (there were two records,
    merged again by the analysis, the run trend and the charts): ``Run.windows`` has them all."""
    import typing

    from gpu_notebook import records
    from gpu_notebook.records import ProfileWindow, Run

    hints = typing.get_type_hints(Run)
    assert hints["window"] is ProfileWindow
    assert hints["more_windows"] == tuple[ProfileWindow, ...]
    assert not hasattr(records, "ExtraWindow")


def test_importing_the_records_imports_no_view_and_repr_names_the_text_view() -> None:
    code = (
        "import sys\n"
        "from gpu_notebook.records import Report\n"
        "assert not [m for m in sys.modules if m.startswith('gpu_notebook.views')], sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_repr_of_a_report_is_the_text_report_once_the_views_are_imported() -> None:
    report = synthetic_gpu_report()
    assert repr(report) == render_text(report)  # what `%%gpucheck -o r` then `r` shows
    assert "gpucheck: INPUT-BOUND" in repr(report)


def _with_unbounded_gain() -> Report:
    report = synthetic_gpu_report()
    finding = dataclasses.replace(report.findings[0], phase_share=1.0, gain_bound=math.inf)
    return dataclasses.replace(report, findings=(finding, *report.findings[1:]))


def test_a_report_round_trips_through_valid_json_an_unbounded_gain_included() -> None:
    report = _with_unbounded_gain()
    text = report.to_json()
    # Strict JSON: Python's parser refuses the Infinity/NaN literals json.dumps would write.
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert data["findings"][0]["gain_bound"] == "Infinity"
    back = Report.from_json(text)
    assert back == report
    assert back.findings[0].gain_bound == math.inf
    assert Report.from_json(report.to_json(indent=2)) == report


def test_decoding_rejects_a_bad_literal_and_names_where() -> None:
    data = synthetic_gpu_report().to_dict()
    data["verdict"]["category"] = "fast-enough"
    with pytest.raises(msgspec.ValidationError, match=r"\$\.verdict\.category"):
        Report.from_json(json.dumps(data))


def test_decoding_rejects_a_string_where_a_number_goes_but_ignores_unknown_fields() -> None:
    data = synthetic_gpu_report().to_dict()
    data["run"]["wall_s"] = "fast"
    with pytest.raises(msgspec.ValidationError, match=r"\$\.run\.wall_s"):
        Report.from_json(json.dumps(data))
    data = synthetic_gpu_report().to_dict()
    data["run"]["written_by_a_newer_version"] = 1
    assert Report.from_json(json.dumps(data)) == synthetic_gpu_report()


def test_another_schema_version_is_refused_before_decoding() -> None:
    data = synthetic_gpu_report().to_dict()
    data["schema_version"] = 99
    del data["run"]
    with pytest.raises(ValueError, match="schema version 99 is not supported"):
        Report.from_json(json.dumps(data))


def test_phases_are_the_phase_literal_in_display_order() -> None:
    assert get_args(Phase) == PHASES
    assert PHASES[0] == "data" and PHASES[-1] == "unattributed"


def test_the_text_report_shows_the_before_after_comparison_with_one_gain_wording() -> None:
    report = synthetic_gpu_report(comparison=synthetic_comparison())
    text = render_text(report)
    assert "Before / after:" in text
    assert "(predicted: up to 1.82x)" in text  # the same words as the findings and the page
    assert "up to 1.82x" in render_html(report)


def test_a_report_written_before_the_one_window_record_still_reads() -> None:
    """Schema 1 as first written: ``window.requested_steps``, and later windows of three fields
    (``ExtraWindow``): read as one ``ProfileWindow`` each, ``profile_steps`` the knob's name."""
    from gpu_notebook.records import ProfileWindow

    report = synthetic_gpu_report()
    later = ProfileWindow("recorded", 66, 3, first_step=66, recorded_steps=3, trace_path="w2.json")
    report = dataclasses.replace(report, run=dataclasses.replace(report.run, more_windows=(later,)))
    data = report.to_dict()
    data["schema_version"] = 1
    data["run"]["window"]["requested_steps"] = data["run"]["window"].pop("profile_steps")
    data["run"]["more_windows"] = [{"first_step": 66, "recorded_steps": 3, "trace_path": "w2.json"}]
    old = Report.from_json(json.dumps(data))
    assert old == dataclasses.replace(report, whatif=None, gpu_estimate=None, comparison=None)
    assert report.run.windows == (report.run.window, later)


def test_a_report_the_previous_release_wrote_reads_and_compares() -> None:
    """tests/data/report_schema1.json: ``gpucheck run --json`` of a 40-step MLP at 49da5c6
    (schema 1: later windows of three fields, the what-if's reasons as sentences). It reads as
    schema 2 (its worded sections dropped, its steps as written), and ``gpucheck compare`` of
    it against itself gives a before/after instead of "cannot read"."""
    path = Path(__file__).parent / "data" / "report_schema1.json"
    written = json.loads(path.read_text())
    assert written["schema_version"] == 1 and written["whatif"] is not None
    report = Report.from_json(path.read_text())
    assert report.schema_version == SCHEMA_VERSION == 2
    assert report.whatif is None and report.gpu_estimate is None
    assert report.run.window.profile_steps == written["run"]["window"]["requested_steps"]
    assert len(report.run.steps.steps) == len(written["run"]["steps"]["steps"]) > 0
    out = subprocess.run(
        [sys.executable, "-m", "gpu_notebook", "compare", str(path), str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "cannot read" not in out.stderr and "1.00x" in out.stdout
