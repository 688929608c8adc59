"""Does the profiled window represent the run, on a partial GPU timeline (analysis.analyze's
``_gpu_paced``)?

The fp32 MLP on the H100 (tests/data/gpu) issues its profiled steps faster than the GPU runs
them; the window represents the run at the GPU's pace (its timeline's window a step). A partial
timeline bounds that pace below only where its unclocked work may have run past the clocked
work's end: then it cannot tell. Where a stream's launch order puts every unclocked kernel
before a clocked one (every second kernel lost), the end is measured and so is the pace.
Synthesised as tests/test_recorded_no_gpu_clock.py does.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.analysis.verdict import decide
from gpu_notebook.views.html_report import render_html
from gpu_notebook.views.text import render_text
from tests.test_recorded_no_gpu_clock import H100, _rebuilt, _recorded

STEM = "fp32-matmul.baseline"


def _tail_unclocked_copy(trace: Path, out: Path) -> Path:
    """Every second kernel at ts 0, dur 0, and each stream's last ten kernels too."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    lost = kernels[1::2]
    by_stream: dict[object, list[dict[str, object]]] = {}
    for e in kernels:
        by_stream.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for events in by_stream.values():
        lost += sorted(events, key=lambda e: float(e["ts"]))[-10:]  # type: ignore[arg-type]
    for event in lost:
        event["ts"], event["dur"] = 0, 0
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def test_every_second_kernel_lost_leaves_the_gpu_pace_measured(tmp_path: Path) -> None:
    """Each lost kernel ran before a clocked one on its stream: the window's end is measured,
    the window represents the run at the GPU's pace, as on the complete trace."""
    whole = _recorded(H100, STEM, False, tmp_path)
    half = _recorded(H100, STEM, True, tmp_path)
    assert whole.analysis.shape is not None and whole.analysis.shape.window_gpu_paced
    g, shape = half.analysis.gpu, half.analysis.shape
    assert g is not None and g.partial and g.unclocked_tail == 0
    assert shape is not None and shape.represents and shape.window_gpu_paced
    assert not shape.window_undecided


def test_a_lost_tail_leaves_whether_the_window_represents_the_run_unknown(tmp_path: Path) -> None:
    """The streams' last kernels lost too: the GPU may have run on past the clocked work for
    any time, its pace only bounded below. Represents is not said (neither way), the verdict
    says it cannot tell, at most medium confidence."""
    trace = _tail_unclocked_copy(H100 / f"{STEM}.trace.json.gz", tmp_path / "tail.json.gz")
    report = _rebuilt(H100, STEM, trace)
    g, shape = report.analysis.gpu, report.analysis.shape
    assert g is not None and g.partial and g.unclocked_tail >= 10
    assert shape is not None and shape.represents is None and shape.window_undecided
    assert not shape.window_gpu_paced
    # Its lost kernels ran (their launches had work): not a graph capture's launches.
    whole = _recorded(H100, STEM, False, tmp_path).analysis.gpu
    assert whole is not None and not g.capture
    assert g.launches_without_work == whole.launches_without_work
    v = report.verdict
    assert v.category == "gpu-bound" and v.confidence != "high"
    assert any(
        e.startswith("cannot tell whether the profiled window represents") for e in v.evidence
    )
    # How long the GPU ran on after the host: at least the clocked work's, in words and text.
    assert g.host_ahead_us > 0
    ahead = [e for e in v.evidence if "the host ran ahead" in e]
    assert all("finished the steps' work at least" in e for e in ahead)
    assert "finished the steps' work at least" in render_text(report)
    lines = decide(report.run, report.analysis).lines
    notes = [x for x in lines if isinstance(x, said.UndecidedWindow)]
    assert len(notes) == 1 and notes[0].gpu_pace_s > notes[0].window_median_s


def test_the_gpu_time_by_phase_of_a_partial_timeline_is_said_as_a_lower_bound(
    tmp_path: Path,
) -> None:
    """Each phase's GPU time a step, in the text's table and the HTML's column: at least, on a
    partial timeline; as measured on the complete one."""
    whole = _recorded(H100, STEM, False, tmp_path)
    half = _recorded(H100, STEM, True, tmp_path)
    assert half.analysis.gpu is not None and half.analysis.gpu.gpu_phase_us
    said = "the clocked events only, the timeline is partial"
    assert said not in render_text(whole) and said in render_text(half)
    rows = render_text(half).split("GPU time by phase", 1)[1].splitlines()[1:3]
    assert rows and all(">=" in r for r in rows)
    assert "each phase's GPU time is a lower bound" in render_html(half)
    assert "each phase's GPU time is a lower bound" not in render_html(whole)
