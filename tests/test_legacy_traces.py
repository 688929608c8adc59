"""Traces from the wild: Kineto files of torch 1.8/1.9 (legacy category names), ROCm, and the
wording of a report made from a file.

The legacy fixtures are built here from the reference traces by renaming categories as the
first Kineto writers named them (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``;
record_function ranges, ``ProfilerStep#N`` included, were operators too) and dropping
``deviceProperties`` (written only since torch 1.10). The traces themselves are never committed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from gpu_notebook.report.from_trace import report_from_trace
from gpu_notebook.traces import load_trace
from gpu_notebook.views.text import render_text

OLD_NAMES = {
    "cpu_op": "Operator",
    "user_annotation": "Operator",
    "cuda_runtime": "Runtime",
    "kernel": "Kernel",
    "gpu_memcpy": "Memcpy",
    "gpu_memset": "Memset",
}


def _legacy(reference: Path, out: Path, *, keep_device_properties: bool = False) -> Path:
    doc = json.loads(gzip.decompress(reference.read_bytes()))
    for ev in doc["traceEvents"]:
        if ev.get("cat") in OLD_NAMES:
            ev["cat"] = OLD_NAMES[ev["cat"]]
    if not keep_device_properties:
        doc.pop("deviceProperties", None)
    out.write_text(json.dumps(doc))
    return out


def test_legacy_category_names_read_as_todays(reference_traces: Path, tmp_path: Path) -> None:
    modern = load_trace(reference_traces / "v100_world1_rank0.json.gz")
    old = load_trace(_legacy(reference_traces / "v100_world1_rank0.json.gz", tmp_path / "old.json"))
    assert set(old.categories) >= {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy"}
    assert not set(old.categories) & set(OLD_NAMES.values())
    assert (
        int(old.category_mask("kernel").sum()) == int(modern.category_mask("kernel").sum()) > 4000
    )
    np.testing.assert_array_equal(old.gpu_mask, modern.gpu_mask)


def test_a_legacy_gpu_trace_gets_its_steps_gpu_and_a_verdict(
    reference_traces: Path, tmp_path: Path
) -> None:
    path = _legacy(reference_traces / "v100_world1_rank0.json.gz", tmp_path / "old.json")
    report, _, _ = report_from_trace(path)
    assert report.verdict.category != "unknown", report.verdict
    phases = report.analysis.phases
    assert phases is not None and [s.index for s in phases.steps] == [101, 102, 103, 104, 105]
    assert report.analysis.gpu is not None and report.analysis.gpu.busy_share > 0.9
    # No deviceProperties: the GPU the kernels ran on is still there, unnamed.
    assert [g.name for g in report.run.env.gpus] == ["GPU 0 (not named in this trace)"]
    text = render_text(report)
    for wrong in ("this cell", "NVML", "no GPU visible", "step clock"):
        assert wrong not in text, wrong


def test_gpu_name_memory_and_sms_come_from_device_properties(
    reference_traces: Path, tmp_path: Path
) -> None:
    path = _legacy(
        reference_traces / "v100_world1_rank0.json.gz",
        tmp_path / "old.json",
        keep_device_properties=True,
    )
    report, _, _ = report_from_trace(path)
    (gpu,) = report.run.env.gpus  # the one device its events ran on, of the eight listed
    assert gpu.name == "Tesla V100-SXM2-32GB" and gpu.sm_count == 80
    assert gpu.memory_total_bytes == 34079637504 and gpu.compute_capability == "7.0"

    rocm, _, _ = report_from_trace(reference_traces / "mi250_rocm_toy.json.gz")
    assert rocm.run.env.gpus and rocm.run.env.gpus[0].sm_count == 104
    assert rocm.verdict.category != "unknown"


def test_a_file_without_steps_is_spoken_of_as_a_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"traceEvents": []}))
    report, _, _ = report_from_trace(path)
    assert report.verdict.category == "unknown"
    assert "this trace" in report.verdict.headline
    assert "cell" not in report.verdict.headline + report.verdict.more_gpus
