"""The tensor-core share on a partial GPU timeline is a range (``analysis.tc_share``): an
unclocked kernel is tensor-core or not by name, only its time is unknown, bounded by the room its
stream's clocked events leave in the window. The precision finding fires only where the range's
top is under its line, and says the range.

Built from the recorded H100/H200 kit runs (tests/data/gpu): the float32 MLP and its bf16
autocast fix, with kernels made unclocked (ts 0, dur 0) as CUPTI leaves them. On main the share
was the clocked kernels' ratio, said as exact, and the bf16 run whose tensor-core kernels lost
their clock read "float32 math leaves the tensor cores idle"; its nvjet GEMMs (cuBLASLt on an
H100) were not read as tensor-core work at all (1.4%).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.analysis.gpu_timeline import TENSOR_CORE_PATTERN
from gpu_notebook.analysis.tc_share import tensor_core_share
from gpu_notebook.cell.scan import cell_facts
from gpu_notebook.records import GpuTimeline, Report
from gpu_notebook.rules import run_rules
from tests.test_recorded_no_gpu_clock import _rebuilt

DATA = Path(__file__).parent / "data" / "gpu"
H100 = DATA / "2026-12-06-nvidia-h100"
H200 = DATA / "2026-12-04-nvidia-h200"
BASE, BF16 = "fp32-matmul.baseline", "fp32-matmul.fix-autocast-bf16"


def _unclocked(src: Path, out: Path, picks: Callable[[int, dict[str, Any]], bool]) -> Path:
    """``src`` with the kernels ``picks`` (by index among kernels, event) at ts 0, dur 0."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for i, e in enumerate(kernels):
        if picks(i, e):
            e["ts"], e["dur"] = 0, 0
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _every_second(i: int, e: dict[str, Any]) -> bool:
    return i % 2 == 1


def _tensor_core(i: int, e: dict[str, Any]) -> bool:
    return bool(TENSOR_CORE_PATTERN.search(e["name"]))


def _report(folder: Path, stem: str, tmp: Path, picks: Callable[..., bool] | None,
            run_of: str | None = None) -> Report:  # fmt: skip
    trace = folder / f"{stem}.trace.json.gz"
    if picks is not None:
        trace = _unclocked(trace, tmp / f"{folder.name}-{stem}-{picks.__name__}.json.gz", picks)
    return _rebuilt(folder, run_of or stem, trace)


def _gpu(report: Report) -> GpuTimeline:
    assert report.analysis.gpu is not None
    return report.analysis.gpu


def test_the_h100s_bf16_gemms_are_tensor_core_work(tmp_path: Path) -> None:
    """cuBLASLt ran the bf16 autocast MLP's GEMMs in ``nvjet_sm90_...`` kernels (wgmma): read
    as tensor-core work they are most of the kernel time. Main: 1.4% (only 9 cutlass kernels)."""
    share = tensor_core_share(_gpu(_report(H100, BF16, tmp_path, None)))
    assert share is not None and share.measured
    assert share.low == share.high > 0.3


@pytest.mark.parametrize("folder", [H100, H200])
@pytest.mark.parametrize("stem", [BASE, BF16])
def test_the_partial_range_holds_the_complete_timelines_share(
    tmp_path: Path, folder: Path, stem: str
) -> None:
    """Half the kernels unclocked, the range holds the share the whole timeline measured, and
    it is a range only on the side whose kind of kernel lost its clock."""
    whole = tensor_core_share(_gpu(_report(folder, stem, tmp_path, None)))
    half_gpu = _gpu(_report(folder, stem, tmp_path, _every_second))
    assert half_gpu.partial and whole is not None
    half = tensor_core_share(half_gpu)
    assert half is not None and not half.measured
    assert half.low - 1e-9 <= whole.low <= half.high + 1e-9, (half, whole)
    if half.unclocked_tensor_core == 0:  # the float32 MLP: nothing lost could lift it
        assert half.high == pytest.approx(half_gpu.tensor_core_kernel_us / half_gpu.kernel_us)
    else:
        assert half.high > half.low


def _fired_without_autocast(report: Report) -> bool:
    """The precision rule's reading of ``report`` for a cell with no torch.autocast: the model
    cast with ``.to(torch.bfloat16)`` (the kit's cell has ``autocast(enabled=...)``, which the
    rule reads as autocast on)."""
    facts = dataclasses.replace(cell_facts(report.run.cell_source, None), autocast=False)
    found = run_rules(report.run, report.analysis, report.verdict, facts=facts)
    return "precision.fp32_tensor_cores" in {f.rule_id for f in found}


def test_unclocked_tensor_core_kernels_keep_the_precision_finding_silent(tmp_path: Path) -> None:
    """The bf16 run read for a cell with no autocast, its tensor-core kernels' clock lost: the
    clocked kernels hold no tensor-core work, but the lost ones could be most of it. Not
    flagged: whether the tensor cores idled is not known. Main flagged it even on the whole
    trace (its nvjet GEMMs unread: 1.4% tensor-core), and on the partial one said 0%."""
    assert not _fired_without_autocast(_report(H100, BF16, tmp_path, None))
    lost = _report(H100, BF16, tmp_path, _tensor_core)
    share = tensor_core_share(_gpu(lost))
    assert share is not None and share.low == 0.0 and share.high >= 0.10
    assert share.unclocked_tensor_core > 0 and share.unclocked_other == 0
    assert not _fired_without_autocast(lost)
    # The float32 run, its float32 kernels' clock lost in the same way, is still flagged.
    assert _fired_without_autocast(_report(H100, BASE, tmp_path, _every_second))


@pytest.mark.parametrize("folder", [H100, H200])
def test_the_float32_mlps_finding_says_the_share_as_a_range(tmp_path: Path, folder: Path) -> None:
    """The float32 MLP with half its kernels unclocked: every lost kernel is float32 by name, so
    the share's top is its clocked 0% and the finding fires, saying the share is not measured.
    Main: 'tensor-core kernels: 0% of the kernel time', as if measured."""
    report = _report(folder, BASE, tmp_path, _every_second)
    f = next(f for f in report.findings if f.rule_id == "precision.fp32_tensor_cores")
    said = next(e for e in f.evidence if e.startswith("tensor-core kernels:"))
    assert "at most 0%" in said and "not measured" in said, said
    assert "0 of them tensor-core" in said, said


def _timeline(**kw: Any) -> GpuTimeline:
    base = dict(window_us=1000.0, busy_us=800.0, idle_us=200.0, idle_host_wait_us=0.0,
                idle_kernel_wait_us=0.0, idle_other_us=0.0, kernel_us=800.0, comm_us=0.0,
                memset_us=0.0, tensor_core_kernel_us=40.0, unclocked_events=10)  # fmt: skip
    return GpuTimeline(**{**base, **kw})


def test_the_range_reads_each_kind_on_its_own_room() -> None:
    """Measured without unclocked kernels; a kind's end moves by its streams' room, and a room
    not known (no stream) opens that end to 0 or 100%."""
    measured = tensor_core_share(_timeline(unclocked_events=0))
    assert measured is not None and measured.low == measured.high == 0.05
    both = tensor_core_share(
        _timeline(unclocked_tensor_core_kernels=3, unclocked_other_kernels=2,
                  unclocked_tensor_core_room_us=200.0, unclocked_other_room_us=200.0)
    )  # fmt: skip
    assert both is not None
    assert both.low == pytest.approx(40 / 1000) and both.high == pytest.approx(240 / 1000)
    open_ends = tensor_core_share(
        _timeline(unclocked_tensor_core_kernels=1, unclocked_other_kernels=1,
                  unclocked_tensor_core_room_us=None, unclocked_other_room_us=None)
    )  # fmt: skip
    assert open_ends is not None and (open_ends.low, open_ends.high) == (0.0, 1.0)
    other_only = dataclasses.replace(
        _timeline(), unclocked_other_kernels=4, unclocked_other_room_us=200.0
    )
    share = tensor_core_share(other_only)
    assert share is not None and share.high == 0.05 and share.low == pytest.approx(0.04)
