"""The records: the contract between stages, independent of the views, with a JSON round trip."""

from __future__ import annotations

import subprocess
import sys

from gpu_notebook.views.text import render_text
from tests.test_views import synthetic_gpu_report


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
