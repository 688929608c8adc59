"""One decode of each trace file per report: every reader takes the report's decoded traces.

Each decode of a file reads its bytes through ``trace.source.read_input`` (the decoders, and
formerly each reader that parsed the JSON again, all do): counting its calls per trace file over
one whole report counts the decodes, whichever reader asked.
"""

from __future__ import annotations

import gc
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook import cli
from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.capture.session import CaptureOptions
from gpu_notebook.records import Report
from gpu_notebook.report.build import build_report
from gpu_notebook.traces import source
from tests.test_run_shape_cells import measured_loop


@pytest.fixture
def trace_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Reads of each ``*.trace.json`` file (a window's trace) from now on, by file name."""
    reads: Counter[str] = Counter()
    real = source.read_input

    def counted(path: Any, *args: Any, **kwargs: Any) -> bytes:
        if ".trace.json" in Path(path).name:
            reads[Path(path).name] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(source, "read_input", counted)
    return reads


# A CPU loop (the GPU estimate reads the window too) whose window holds one stalled step (the
# rules then size the operators over the steady steps, from the window's trace again).
STALLED_WINDOW = """
import time, torch
from torch import nn
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randn(32, 1)
for i in range(40):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if i == 4:
        time.sleep(0.1)
"""


def test_a_gpucheck_cell_report_decodes_its_window_trace_once(ip, trace_reads):
    ip.user_ns.pop("rep", None)
    gc.collect()
    ip.run_cell(f"%%gpucheck -q -o rep -w 2 -s 5\n{STALLED_WINDOW}")
    rep: Report = ip.user_ns["rep"]
    # Every reader ran: the analysis, the rules over the steady steps, the GPU estimate.
    assert rep.analysis.phases is not None and rep.analysis.phases.source == "trace"
    assert without_stalls(rep.analysis)[1] > 0
    assert rep.gpu_estimate is not None
    assert trace_reads == {"window.trace.json": 1}


def test_a_report_of_several_windows_decodes_each_window_once(tmp_path: Path, trace_reads):
    run = measured_loop(CaptureOptions(window_budget_share=math.inf), 300, scratch=str(tmp_path))
    assert run.more_windows, "the schedule gave no later window"
    rep = build_report(run)
    assert rep.gpu_estimate is not None  # a CPU run: the estimate reads the window too
    names = [Path(w.trace_path).name for w in (run.window, *run.more_windows) if w.trace_path]
    assert trace_reads == dict.fromkeys(names, 1)


def test_gpucheck_analyze_of_a_trace_and_its_companion_decodes_the_trace_once(
    tmp_path: Path, trace_reads, capsys
):
    """With a companion report and ``--gpu``: the rank picks the companion, the estimate sizes
    the operators; before, the trace was decoded for each and again for the companion."""
    run = measured_loop(CaptureOptions(more_windows=False), 40, scratch=str(tmp_path))
    (tmp_path / "run.report.json").write_text(build_report(run).to_json())
    trace_reads.clear()
    assert cli.main(["analyze", str(tmp_path), "--gpu", "t4"]) == 0
    assert "Would a GPU help?" in capsys.readouterr().out
    assert trace_reads == {"window.trace.json": 1}


def test_only_the_reports_traces_decode_a_trace_file():
    """The readers take the report's ``WindowTraces``: no module of the package calls the
    decoder itself but ``traces/windows.py`` (and ``analyze_trace_file``, the one-file entry of
    the benchmarks and tests), so no reader can decode a window's file a second time."""
    import ast

    package = Path(__file__).resolve().parent.parent / "gpu_notebook"
    calls = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                    if name in {"load_trace", "load_trace_dict"}:
                        calls.add(f"{path.relative_to(package)}:{fn.name}")
    assert "traces/windows.py:load" in calls  # the scan sees a call
    assert calls <= {
        "traces/windows.py:load",
        "traces/kineto.py:load_trace",  # its own fallback through the generic reader
        "analysis/analyze.py:analyze_trace_file",
    }, calls
