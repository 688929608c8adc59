"""The what-if's all-reduce on a partial multi-rank trace (every second kernel unclocked).

A message size needs no clock: the all-reduce bytes a step count every collective, clocked or
not (placed by its launch), and the best clocked kernel's bus bandwidth is a lower bound, so the
more-GPUs speedups range up past it. Synthesised the way tests/test_recorded_no_gpu_clock.py
does, on the recorded ResNet-50 DDP rank (2 A100s) of tests/test_whatif.py.
"""

from __future__ import annotations

from pathlib import Path

from gpu_notebook.analysis import whatif as w
from gpu_notebook.report.from_trace import report_from_trace
from gpu_notebook.traces.kineto import load_trace
from gpu_notebook.views.wording import render_whatif
from tests.test_recorded_no_gpu_clock import _half_unclocked_copy
from tests.test_whatif import RESNET50_GRAD_BYTES, _world2


def _half(tmp_path: Path) -> Path:
    return _half_unclocked_copy(_world2(), tmp_path / "world2.half.json.gz")


def test_a_partial_traces_all_reduce_bytes_count_the_unclocked_kernels(tmp_path: Path) -> None:
    """Every second kernel unclocked leaves about half the all-reduce buckets without a clock:
    the step's bytes are still ResNet-50's 25,557,032 floats, not the clocked half's."""
    facts = w.trace_allreduce(load_trace(_half(tmp_path)))
    assert facts is not None and facts.unclocked > 0
    assert facts.bytes_per_step == RESNET50_GRAD_BYTES
    assert facts.kernel_s_per_step is None  # the unclocked kernels' time is not known
    assert facts.bus_bytes_per_s is not None  # the best of the clocked ones: a lower bound


def test_a_partial_traces_scaling_ranges_past_its_clocked_bandwidth(tmp_path: Path) -> None:
    """The what-if on the partial trace: the measured gradients, and each point's speedup a
    range whose high end is past the one read at the clocked kernels' best bandwidth."""
    report, _, world = report_from_trace(_half(tmp_path))
    wi = report.whatif
    assert wi is not None and world == 2 and wi.missing == ()
    assert wi.grad_bytes == RESNET50_GRAD_BYTES and wi.grads_measured and wi.bus_low
    assert wi.points
    for p in wi.points:
        assert p.speedup_low == p.speedup
        assert p.speedup_high is not None and p.speedup_high > p.speedup
    text = render_whatif(wi)
    assert "up to" in text and "partial GPU timeline" in text and "at least" in text
