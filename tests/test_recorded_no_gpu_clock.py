"""The verdict when a real GPU trace has no usable GPU timeline (tests/data/gpu H100 and H200 runs).

CUPTI wrote ``ts 0, dur 0`` for every GPU event and CUDA call of each pageable-copy baseline
recorded so far (two on an H200, two on an H100). The busy share then comes from NVML, which
counts any time a kernel ran: the H100's first kit call read `item-per-step` (an MLP whose GPU
time is about its launch time, ``.item()`` twice a step) gpu-bound on NVML's 82% with no GPU
timeline, the second call host-bound on its trace's 49% (NVML 69%). The same code, two answers.

Each test here takes a recorded trace with a good GPU timeline, writes the copy CUPTI would have
written (every CUPTI event at ts 0, dur 0: GPU activity, runtime and driver calls, overhead),
and reads the recorded live report again on it with its NVML samples: the host's own waits on
the GPU decide what NVML's reading alone cannot.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from gpu_notebook.analysis.host_waits import host_waits
from gpu_notebook.records import (
    Analysis,
    GpuSample,
    InSteps,
    Report,
    Sample,
    SampleSeries,
    from_jsonable,
)
from gpu_notebook.report.build import build_report

DATA = Path(__file__).parent / "data" / "gpu"
H100 = DATA / "2026-12-06-nvidia-h100"
H200 = DATA / "2026-12-04-nvidia-h200"
# Every category the profiler takes from CUPTI: the copies CUPTI left unclocked had all of them
# at 0 (pageable-copy.baseline.trace.json.gz: 190 events), the host's operators kept their clock.
CUPTI = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "overhead"})


def _unclocked_copy(trace: Path, out: Path) -> Path:
    """``trace`` as CUPTI wrote the pageable-copy loop's: its CUPTI events at ts 0, dur 0."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    for event in doc["traceEvents"]:
        if event.get("cat") in CUPTI:
            event["ts"], event["dur"] = 0, 0
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _half_unclocked_copy(trace: Path, out: Path) -> Path:
    """``trace`` with every second kernel at ts 0, dur 0: a partial GPU timeline."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for event in kernels[1::2]:
        event["ts"], event["dur"] = 0, 0
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _samples(folder: Path, stem: str) -> SampleSeries:
    return from_jsonable(SampleSeries, json.loads((folder / f"{stem}.samples.json").read_text()))


def _util_mean(series: SampleSeries) -> float:
    util = [g.utilization_pct for s in series.samples for g in s.gpus if g.utilization_pct]
    return sum(util) / len(util)


def _scaled(series: SampleSeries, mean_pct: float) -> SampleSeries:
    """The recorded series with every GPU utilization reading scaled to ``mean_pct`` on average
    (the first kit call's reading of the same loop), the rest of each tick as recorded."""
    k = mean_pct / _util_mean(series)

    def gpu(g: GpuSample) -> GpuSample:
        pct = g.utilization_pct
        return dataclasses.replace(g, utilization_pct=None if pct is None else min(100.0, pct * k))

    def tick(s: Sample) -> Sample:
        return dataclasses.replace(s, gpus=tuple(gpu(g) for g in s.gpus))

    return dataclasses.replace(series, samples=tuple(tick(s) for s in series.samples))


def _rebuilt(folder: Path, stem: str, trace: Path, samples: SampleSeries | None = None) -> Report:
    """The recorded live report of ``stem`` built again on ``trace`` (and ``samples``)."""
    run = Report.from_json((folder / f"{stem}.report.json").read_text()).run
    window = dataclasses.replace(run.window, trace_path=str(trace))
    later = tuple(dataclasses.replace(w, trace_path=None) for w in run.more_windows)
    run = dataclasses.replace(run, window=window, more_windows=later)
    if samples is not None:
        run = dataclasses.replace(run, samples=samples)
    return build_report(run)


# The recorded reports rebuilt, with every second kernel unclocked where ``half``: built once a
# test session (tests/test_partial_timeline_*.py share them).
_REPORTS: dict[tuple[str, str, bool], Report] = {}


def _recorded(folder: Path, stem: str, half: bool, tmp: Path) -> Report:
    key = (folder.name, stem, half)
    if key not in _REPORTS:
        trace = folder / f"{stem}.trace.json.gz"
        if half:
            trace = _half_unclocked_copy(trace, tmp / f"{folder.name}-{stem}.half.json.gz")
        _REPORTS[key] = _rebuilt(folder, stem, trace)
    return _REPORTS[key]


def _marked_partial(
    analysis: Analysis, *, busy: float | None = None, nvml: float | None = None
) -> Analysis:
    """``analysis`` with its GPU timeline marked partial (100 events unclocked), its clocked busy
    share ``busy`` where given, and NVML read inside the steps at ``nvml`` (None: not read)."""
    gpu = analysis.gpu
    assert gpu is not None and gpu.window_us > 0
    busy_us = gpu.busy_us if busy is None else busy * gpu.window_us
    gpu = dataclasses.replace(gpu, unclocked_events=100, busy_us=busy_us)
    pct = None if nvml is None else 100 * nvml
    steps = InSteps(ticks=20 if nvml is not None else 1, min_ticks=3, gpu_util_mean_pct=pct,
                    ours_cores=None)  # fmt: skip
    util = dataclasses.replace(analysis.utilization, in_steps=steps)
    return dataclasses.replace(analysis, gpu=gpu, utilization=util)


@pytest.mark.parametrize("nvml_pct", [None, 82.0, 95.0])
def test_the_h100_item_loop_without_gpu_timestamps_is_not_gpu_bound_on_nvml(
    tmp_path: Path, nvml_pct: float | None
) -> None:
    """Its clocked trace reads host-bound (GPU busy 49%); unclocked, with NVML at its recorded
    69%, at the first call's 82% or past it, it stays host-bound: the host waited on the GPU 8%
    of its step (the two ``.item()`` syncs) and its operators are a few us each (no launch
    waited for a full queue). NVML's reading past the line is said, at low confidence."""
    stem = "item-per-step.baseline"
    clocked = _rebuilt(H100, stem, H100 / f"{stem}.trace.json.gz")
    assert clocked.verdict.category == "host-bound"
    assert clocked.analysis.gpu is not None and clocked.analysis.gpu.busy_share < 0.6

    trace = _unclocked_copy(H100 / f"{stem}.trace.json.gz", tmp_path / "unclocked.json.gz")
    series = _samples(H100, stem)
    if nvml_pct is not None:
        series = _scaled(series, nvml_pct)
    report = _rebuilt(H100, stem, trace, series)
    g = report.analysis.gpu
    assert g is not None and g.window_us == 0.0 and g.unclocked_events > 100
    nvml = report.analysis.utilization.gpu_util_mean_pct
    assert nvml is not None and nvml == pytest.approx(nvml_pct or 69.4, abs=0.5)

    v = report.verdict
    assert v.category == "host-bound", v
    waits = host_waits(report.analysis)
    assert waits.sync is not None and 0.04 < waits.sync < 0.2 and waits.never_waited
    assert any("on NVML" in e for e in v.evidence)
    if nvml >= 80:
        assert v.confidence == "low"
        assert v.headline.startswith("The host sets the pace")
        assert any("the host waited on the GPU" in e for e in v.evidence)


def test_the_h200_item_loop_without_gpu_timestamps_reads_its_recorded_nvml_as_host_bound(
    tmp_path: Path,
) -> None:
    """The same loop on the H200: its trace read 64% busy and NVML, in the same run, 83%.
    Unclocked, that NVML reading alone made it gpu-bound."""
    stem = "item-per-step.baseline"
    clocked = _rebuilt(H200, stem, H200 / f"{stem}.trace.json.gz")
    assert clocked.verdict.category == "host-bound"
    assert _util_mean(clocked.run.samples) >= 80  # NVML past the line, the trace under it

    report = _rebuilt(H200, stem, _unclocked_copy(H200 / f"{stem}.trace.json.gz", tmp_path / "u"))
    assert report.analysis.gpu is not None and report.analysis.gpu.window_us == 0.0
    assert report.verdict.category == "host-bound", report.verdict
    assert report.verdict.confidence == "low"


@pytest.mark.parametrize(
    ("folder", "stem"),
    [(H100, "launch-bound.baseline"), (H100, "item-per-step.fix-item-every-n")],
)
def test_a_host_that_never_waits_is_not_gpu_bound_whatever_nvml_reads(
    tmp_path: Path, folder: Path, stem: str
) -> None:
    """Loops of other shapes: 24 tiny layers at batch 32 (its trace 6% busy), and the item loop
    with its syncs gone (no wait at all). Unclocked and with NVML read at 90%, neither waited on
    the GPU: neither is gpu-bound."""
    trace = _unclocked_copy(folder / f"{stem}.trace.json.gz", tmp_path / "u.json.gz")
    report = _rebuilt(folder, stem, trace, _scaled(_samples(folder, stem), 90.0))
    assert report.analysis.gpu is not None and report.analysis.gpu.window_us == 0.0
    assert host_waits(report.analysis).never_waited
    assert report.verdict.category == "host-bound", report.verdict
    assert report.verdict.confidence == "low"


def test_the_fp32_loop_without_gpu_timestamps_stays_gpu_bound(tmp_path: Path) -> None:
    """The other side: a 4096-wide fp32 MLP the GPU sets the pace of (its trace 100% busy).
    Unclocked, the host's own time for the window's steps (3.4 ms) against the run's steps
    (32 ms) says it waited on the GPU most of each step: NVML's 100% stands, at medium at most
    (the host's reading, not the GPU's)."""
    stem = "fp32-matmul.baseline"
    trace = _unclocked_copy(H100 / f"{stem}.trace.json.gz", tmp_path / "u.json.gz")
    report = _rebuilt(H100, stem, trace)
    assert report.analysis.gpu is not None and report.analysis.gpu.window_us == 0.0
    waits = host_waits(report.analysis)
    assert waits.waited and waits.elsewhere is not None and waits.elsewhere > 0.8
    assert report.verdict.category == "gpu-bound", report.verdict
    assert report.verdict.confidence in ("medium", "low")
    assert any("the host waited on the GPU" in e for e in report.verdict.evidence)


@pytest.mark.parametrize("folder", [H100, H200])
def test_the_real_unclocked_pageable_copy_still_reads_input_bound(folder: Path) -> None:
    """The traces CUPTI really wrote without timestamps: the copies (timed by their operators)
    hold ~70% of the step, and the host never waits on the GPU."""
    stem = "pageable-copy.baseline"
    report = _rebuilt(folder, stem, folder / f"{stem}.trace.json.gz")
    assert report.analysis.gpu is not None and report.analysis.gpu.window_us == 0.0
    assert report.analysis.gpu.unclocked_events > 50
    assert report.verdict.category == "input-bound", report.verdict


def test_a_gpu_bound_timeline_missing_half_its_kernels_stays_gpu_bound(tmp_path: Path) -> None:
    """Half the fp32 MLP's kernels unclocked: the rest read the GPU 54% busy, a lower bound,
    and host-bound at medium confidence against NVML's 100%. The GPU still ran the clocked work
    long after the host issued it (the host was ahead): gpu-bound."""
    stem = "fp32-matmul.baseline"
    trace = _half_unclocked_copy(H100 / f"{stem}.trace.json.gz", tmp_path / "half.json.gz")
    report = _rebuilt(H100, stem, trace)
    g = report.analysis.gpu
    assert g is not None and g.window_us > 0 and g.unclocked_events > 50
    assert g.busy_share < 0.8 <= (report.analysis.utilization.gpu_util_mean_pct or 0) / 100
    assert report.verdict.category == "gpu-bound", report.verdict
    assert report.verdict.confidence in ("medium", "low")


def test_an_item_loop_timeline_missing_half_its_kernels_is_not_gpu_bound(tmp_path: Path) -> None:
    """The item loop with half its kernels unclocked and NVML at the first call's 82%: the
    timeline's share is a lower bound, NVML's reading is not the kernels' time, and the host
    never waited: host-bound, at low confidence."""
    stem = "item-per-step.baseline"
    trace = _half_unclocked_copy(H100 / f"{stem}.trace.json.gz", tmp_path / "half.json.gz")
    report = _rebuilt(H100, stem, trace, _scaled(_samples(H100, stem), 82.0))
    g = report.analysis.gpu
    assert g is not None and g.window_us > 0 and g.unclocked_events > 50
    assert report.verdict.category == "host-bound", report.verdict
    assert report.verdict.confidence == "low"
