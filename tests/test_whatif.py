"""The what-if arithmetic, pinned by hand-computed numbers, and its honesty when data is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_notebook.analysis import whatif as w
from gpu_notebook.records import (
    Analysis,
    Environment,
    GpuInfo,
    PhaseBreakdown,
    ProfileWindow,
    Report,
    Run,
    SampleSeries,
    StepClockRecord,
    StepPhases,
    StepStats,
    UtilizationStats,
    WhatIf,
)
from gpu_notebook.traces.kineto import load_trace
from gpu_notebook.views.text import render_text
from gpu_notebook.views.wording import (
    baseline_sentence,
    render_whatif,
    whatif_assumptions,
    whatif_interconnect,
    whatif_missing,
)

MB = 10**6
REFERENCE = Path(
    os.environ.get(
        "GPU_NOTEBOOK_REFERENCE_TRACES",
        Path(__file__).parents[1].parent / "shared" / "reference_traces",
    )
)


def env(gpus: tuple[GpuInfo, ...]) -> Environment:
    return Environment("3.11", "linux", 16, "2.13.0", True, True, None, gpus=gpus)


def a100(links: int | None = 12, gen: int | None = 4, width: int | None = 16) -> GpuInfo:
    return GpuInfo(
        0,
        "A100",
        compute_capability="8.0",
        nvlink_links=links,
        pcie_generation=gen,
        pcie_width=width,
    )


A100 = a100()  # the default card of make() (GpuInfo is frozen: one shared value is safe)


def make(
    step_s: float,
    shares: dict[str, float],
    grad_bytes: int | None,
    gpus: tuple[GpuInfo, ...] = (A100,),
) -> tuple[Run, Analysis]:
    total_us = step_s * 1e6
    phase_us = {
        p: shares.get(p, 0.0) * total_us
        for p in (
            "data",
            "copy",
            "forward",
            "backward",
            "optimizer",
            "sync",
            "other",
            "unattributed",
        )
    }
    phases = PhaseBreakdown(
        "trace",
        (StepPhases(0, 0.0, total_us, phase_us),),
        total_us,
        phase_us,
        ("data", "copy", "forward", "backward", "optimizer", "sync", "other", "unattributed"),
    )
    util = UtilizationStats(*([None] * 9))
    run = Run(
        env(gpus),
        "",
        "ok",
        None,
        1.0,
        SampleSeries(0.25, 0.25),
        StepClockRecord("optimizer", 10, grad_bytes=grad_bytes),
        ProfileWindow("recorded", 2, 5),
        "",
    )
    return run, Analysis(StepStats(10, step_s, step_s), phases, None, util)


def test_ring_allreduce_time_by_hand():
    # 2*(4-1)/4 * 100 MB / 80 GB/s = 1.875 ms, plus 2*(4-1) hops of 5 us
    assert w.ring_allreduce_s(100 * MB, 4, 80e9) == pytest.approx(1.875e-3 + 30e-6)
    assert w.ring_allreduce_s(100 * MB, 1, 80e9) == 0.0


def test_interconnect_from_nvml_facts():
    link, bus = w.interconnect(env((a100(links=12),)))
    assert link is not None and link.kind == "nvlink" and bus == pytest.approx(12 * 25e9 * 0.8)
    assert whatif_interconnect(link) == "NVLink x12 (300 GB/s per direction)"
    link, bus = w.interconnect(env((a100(links=None, gen=4, width=16),)))
    assert link is not None and link.kind == "pcie" and bus == pytest.approx(16 * 1.969e9 * 0.8)
    assert whatif_interconnect(link) == "PCIe gen4 x16 (31.5 GB/s)"
    assert w.interconnect(env((a100(links=None, gen=None, width=None),))) == (None, None)


def test_exposed_communication_is_what_backward_cannot_hide():
    assert w.exposed_comm_s(10e-3, 4e-3, 100 * MB) == pytest.approx(6e-3)
    # backward longer than the all-reduce: only the last 25 MiB bucket stays exposed
    assert w.exposed_comm_s(10e-3, 50e-3, 100 * MB) == pytest.approx(
        10e-3 * 25 * 2**20 / (100 * MB)
    )


def test_input_bound_single_gpu_run_fixes_beat_gpus():
    # 100 ms step: half of it waiting for data, 20 ms backward; 400 MB of gradients over
    # 12 NVLinks (240 GB/s usable).
    run, analysis = make(
        0.100, {"data": 0.5, "forward": 0.2, "backward": 0.2, "optimizer": 0.1}, 400 * MB
    )
    r = w.what_if(run, analysis, price_per_gpu_hour=2.0)
    assert r.fixes_speedup == pytest.approx(2.0) and r.fixed_phases == ("data",)
    p4 = next(p for p in r.points if p.gpus == 4)
    ar = 1.5 * 400 * MB / 240e9 + 6 * 5e-6  # 2.53 ms
    assert p4.allreduce_s == pytest.approx(ar)
    exposed = max(
        ar - 0.020, ar * 25 * 2**20 / (400 * MB)
    )  # backward hides all but the last bucket
    assert p4.exposed_comm_s == pytest.approx(exposed)
    assert p4.speedup == pytest.approx(4 * 0.100 / (0.100 + exposed))
    assert p4.speedup_with_fixes == pytest.approx(4 * 0.100 / (0.050 + exposed))
    assert p4.cost_per_1000_steps == pytest.approx(4 * (0.100 + exposed) * 1000 / 3600 * 2.0)
    assert [p.gpus for p in r.points] == [2, 4, 8]
    assert all(0 < p.efficiency <= 1 for p in r.points)
    text = render_whatif(r)
    assert "up to 2.00x" in text and "NVLink x12" in text


def test_cpu_only_says_what_is_missing_instead_of_guessing():
    run, analysis = make(0.05, {"forward": 0.5, "backward": 0.5}, 10 * MB, gpus=())
    r = w.what_if(run, analysis)
    assert r.points == ()
    assert any("no GPU visible" in m for m in whatif_missing(r))
    assert r.fixes_speedup is None  # nothing to fix was measured


def test_unknown_gradient_size_is_missing():
    run, analysis = make(0.05, {"forward": 0.5, "backward": 0.5}, None)
    r = w.what_if(run, analysis)
    assert r.points == () and any("gradient size unknown" in m for m in whatif_missing(r))


def test_real_cpu_run_records_gradient_bytes_and_says_no_gpu(ip):
    ip.run_cell(
        "%%gpucheck -q -o rep\nm = mlp(32, 256); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(10):\n    m(torch.randn(8, 32)).sum().backward(); o.step(); o.zero_grad()"
    )
    rep: Report = ip.user_ns["rep"]
    assert rep.run.steps.grad_bytes == (32 * 256 + 256 + 256 * 1 + 1) * 4
    assert rep.whatif is not None and rep.whatif.points == ()
    assert "no GPU visible" in render_text(rep)


def test_measured_bus_bandwidth_from_a_real_two_rank_nccl_trace():
    path = REFERENCE / "a100_world2_rank0_nccl.json.gz"
    if not path.exists():
        pytest.skip(f"reference traces not found at {REFERENCE}")
    busbw = w.measured_allreduce_bus_bandwidth(load_trace(path))
    # best kernel: 31.5 MB all-reduced by 2 ranks in 2.42 ms -> 13 GB/s, far below NVLink's
    # nominal 240 GB/s usable: why a measured figure beats the nominal one when there is one.
    assert busbw == pytest.approx(13.0e9, rel=0.05)


# ---------------------------------------------------------------- validation against published figures

RESNET50_GRAD_BYTES = (
    25_557_032 * 4
)  # torchvision resnet50 parameters, fp32 gradients (AMP keeps fp32 grads)


def v100(links: int = 6) -> GpuInfo:
    return GpuInfo(
        0, "V100", compute_capability="7.0", nvlink_links=links, pcie_generation=3, pcie_width=16
    )


# NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training
# performance" tables (pytorch-21.03 NGC container); batch per GPU from ConvNets/configs.yml.
# (machine, GPU, batch, 1-GPU img/s, 8-GPU img/s, published strong scaling, model's 8-GPU speedup,
#  how far the model may sit above the published figure)
# Hand computation, A100 (12 NVLinks x 25 GB/s x 0.8 = 240 GB/s):
#   ring at 8 GPUs = 2*7/8 * 102,228,128 B / 240e9 + 14 * 5 us = 0.7454 + 0.0700 = 0.8154 ms
#   backward (2/3 of a 100+ ms step) hides all but the last 25 MiB bucket:
#   exposed = 0.8154 ms * 26,214,400 / 102,228,128 = 0.2091 ms
#   TF32: step 256/938 = 272.92 ms -> 8 * 272.92 / (272.92 + 0.21) = 7.994x   (published 7.72x)
#   AMP:  step 256/2470 = 103.64 ms -> 8 * 103.64 / (103.64 + 0.21) = 7.984x  (published 6.72x)
# V100 (6 NVLinks: 120 GB/s usable): ring 1.4908 + 0.0700 = 1.5608 ms, exposed 0.4002 ms
#   FP32: step 112/367 = 305.18 ms -> 7.990x (published 7.76x)
#   AMP:  step 256/1200 = 213.33 ms -> 7.985x (published 6.93x)
# The published 8-GPU steps are 9-33 ms longer than one GPU's while the whole all-reduce takes
# 0.8-1.6 ms: no link efficiency closes that, and the gap grows with images per second, not
# bytes. FP32/TF32 are within 5%; mixed precision, whose steps are 2-3x shorter for the same host,
# sits 15-19% above: the model is a ceiling, and the margins say by how much.
PUBLISHED_DGX = [
    ("DGX A100 TF32", a100(links=12), 256, 938, 7248, 7.72, 7.994, 0.05),
    ("DGX A100 AMP", a100(links=12), 256, 2470, 16621, 6.72, 7.984, 0.20),
    ("DGX-1 V100 FP32", v100(), 112, 367, 2855, 7.76, 7.990, 0.05),
    ("DGX-1 V100 AMP", v100(), 256, 1200, 8322, 6.93, 7.985, 0.20),
]


@pytest.mark.parametrize(
    "machine,gpu,batch,ips_1,ips_8,published,predicted,margin",
    PUBLISHED_DGX,
    ids=[p[0] for p in PUBLISHED_DGX],
)
def test_published_resnet50_dgx_scaling_stays_under_the_model_within_its_margin(
    machine, gpu, batch, ips_1, ips_8, published, predicted, margin
):
    assert ips_8 / ips_1 == pytest.approx(published, abs=0.02)  # the README's own columns agree
    run, analysis = make(
        batch / ips_1, {"forward": 1 / 3, "backward": 2 / 3}, RESNET50_GRAD_BYTES, gpus=(gpu,)
    )
    p8 = next(p for p in w.what_if(run, analysis).points if p.gpus == 8)
    assert p8.speedup == pytest.approx(predicted, abs=0.001)
    assert published <= p8.speedup <= published * (1 + margin), (
        f"{machine}: the model is a ceiling, {margin:.0%} above at most"
    )


def test_the_published_gap_is_not_the_link():
    # Even at a tenth of the usable NVLink bandwidth (24 GB/s) the all-reduce (7.5 ms) hides
    # behind ResNet-50's backward on A100 in mixed precision (2/3 of 103.6 ms): the 8-GPU
    # prediction moves by under 2%, nowhere near the published 6.72x. Lowering NCCL_EFFICIENCY
    # would not make the model honest; saying what it leaves out does.
    run, analysis = make(256 / 2470, {"forward": 1 / 3, "backward": 2 / 3}, RESNET50_GRAD_BYTES)
    slow = w.what_if(run, analysis, measured_bus_bytes_per_s=24e9)
    p8 = next(p for p in slow.points if p.gpus == 8)
    assert p8.allreduce_s == pytest.approx(1.75 * RESNET50_GRAD_BYTES / 24e9 + 70e-6)
    assert p8.speedup > 7.8 > 6.72 * 1.15
    assert any("ceiling" in a and "mixed precision" in a for a in whatif_assumptions(slow))


# ------------------------------------------------------------- validation against a recorded 2-rank run


def _world2() -> Path:
    path = REFERENCE / "a100_world2_rank0_nccl.json.gz"
    if not path.exists():
        pytest.skip(f"reference traces not found at {REFERENCE}")
    return path


def test_trace_all_reduce_bytes_are_the_resnet50_gradients():
    facts = w.trace_allreduce(load_trace(_world2()))
    assert facts is not None
    # five buckets a step: 2,049,000 + 7,875,584 + 6,563,840 + 6,637,568 + 2,431,040 floats
    # = 25,557,032, torchvision resnet50's parameter count: the job is ResNet-50 DDP on 2 A100s
    assert facts.bytes_per_step == RESNET50_GRAD_BYTES
    # NCCL kernel time a step: 11.95, 12.26, 22.55 ms (the third step's buckets waited on the peer)
    assert facts.kernel_s_per_step == pytest.approx(12.26e-3, rel=0.01)
    assert facts.bus_bytes_per_s == pytest.approx(13.0e9, rel=0.01)


def test_analyze_prefers_the_traced_all_reduce_bytes_over_parameters():
    from gpu_notebook.report.from_trace import report_from_trace

    report, rank, world = report_from_trace(_world2())
    wi = report.whatif
    assert wi is not None and (rank, world) == (0, 2)
    assert wi.grad_bytes == RESNET50_GRAD_BYTES and wi.missing == ()
    assert any("all-reduce message sizes" in a for a in whatif_assumptions(wi))
    assert any("measured in the trace" in a for a in whatif_assumptions(wi))
    # 2 GPUs (today's job) at the measured 12.99 GB/s: ring 102,228,128 / 12.99e9 + 2 * 5 us =
    # 7.877 ms; GPU backward here is ~41 ms a step, so only the last bucket shows:
    # 7.877 * 0.25643 = 2.020 ms
    backward_s = w._backward_s(report.analysis, report.analysis.step_stats.median_s)
    assert backward_s == pytest.approx(41e-3, rel=0.05)
    ar2 = w.ring_allreduce_s(wi.grad_bytes, 2, wi.bus_bandwidth_bytes_per_s)
    assert ar2 == pytest.approx(7.877e-3, rel=0.002)
    assert w.exposed_comm_s(ar2, backward_s, wi.grad_bytes) == pytest.approx(2.020e-3, rel=0.002)


def _step_facts(path: Path) -> list[dict[str, float]]:
    """Per ProfilerStep of the raw trace: last all-reduce end, optimizer start, DDP host work (us)."""
    import gzip
    import json

    with gzip.open(path) as fh:
        events = json.load(fh)["traceEvents"]
    steps = sorted(
        (e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"]
    )
    out = []
    for s in steps:
        a, b = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in events if a <= e.get("ts", -1) < b and "dur" in e]
        ddp = next(e for e in inside if e["name"] == "DistributedDataParallel.forward")
        children = sorted(
            (
                e
                for e in inside
                if e.get("cat") == "cpu_op"
                and ddp["ts"] < e["ts"] < ddp["ts"] + ddp["dur"]
                and e["tid"] == ddp["tid"]
            ),
            key=lambda e: (e["ts"], -e["dur"]),
        )
        top, end = [], -1.0
        for e in children:  # depth 1 under DDP.forward
            if e["ts"] >= end:
                top.append(e)
                end = e["ts"] + e["dur"]
        buffer_sync = sum(
            e["dur"]
            for e in top
            if e["name"]
            in (
                "aten::flatten_dense_tensors",
                "aten::unflatten_dense_tensors",
                "aten::copy_",
                "c10d::broadcast_",
            )
        )
        out.append(
            {
                "step": s["dur"],
                "allreduce_end": max(
                    e["ts"] + e["dur"]
                    for e in inside
                    if e.get("cat") == "kernel" and "AllReduce" in e["name"]
                ),
                "optimizer_start": next(
                    e["ts"] for e in inside if e["name"].startswith("Optimizer.step#")
                ),
                "buffer_sync": buffer_sync,
                "copy_bucket_to_grad": sum(
                    e["dur"]
                    for e in inside
                    if e["name"] == "torch.distributed.ddp.reducer::copy_bucket_to_grad"
                ),
            }
        )
    return out


def test_two_rank_trace_shows_the_models_blind_spot_not_the_all_reduce():
    from gpu_notebook.report.from_trace import report_from_trace

    report, _, _ = report_from_trace(_world2())
    gpu = report.analysis.gpu
    assert gpu is not None
    # GPU compute without NCCL: (162.53 - 46.88 ms) / 3 steps = 38.6 ms a step; the step is 222.4 ms
    # (GPU busy 24%, host-bound under the profiler). A compute-only reading (38.6 + 2.0 ms exposed
    # = 40.6 ms) would miss the real step 5.5x: the what-if starts from the measured step instead.
    compute_s = (gpu.kernel_us - gpu.comm_us) / 3 / 1e6
    assert compute_s == pytest.approx(38.55e-3, rel=0.01)
    assert report.analysis.step_stats.median_s == pytest.approx(222.4e-3, rel=0.005)
    assert report.whatif is not None
    facts = _step_facts(_world2())
    # The model leaves 2.02 ms of the all-reduce exposed; the trace leaves none on the step's
    # critical path: the last all-reduce ends 15-16 ms before the host reaches the optimizer.
    for f in facts:
        assert f["optimizer_start"] - f["allreduce_end"] > 10e3
    # What the model does not see, per step: DDP's buffer broadcast in forward (flatten,
    # broadcast, unflatten, copy back: 35.0 ms) and the reducer's copy_bucket_to_grad in backward
    # (8.75 ms): ~44 ms of the 222 ms step that one GPU never pays (inflated by the profiler's
    # per-op cost, yet the same kind of per-rank work that keeps published scaling under the model).
    # One GPU's step is then at most ~178 ms: the model says 178 + 2.0 = 180 ms on 2 GPUs against
    # 222 ms recorded, 19% optimistic, as it was on the published mixed-precision figures.
    buffer_sync = sorted(f["buffer_sync"] for f in facts)[1]
    copies = sorted(f["copy_bucket_to_grad"] for f in facts)[1]
    assert buffer_sync == pytest.approx(35.0e3, rel=0.05)
    assert copies == pytest.approx(8.75e3, rel=0.05)
    step_us = sorted(f["step"] for f in facts)[1]
    one_gpu_us = step_us - buffer_sync - copies
    wi = report.whatif
    backward_s = w._backward_s(report.analysis, report.analysis.step_stats.median_s)
    exposed_2 = w.exposed_comm_s(
        w.ring_allreduce_s(wi.grad_bytes, 2, wi.bus_bandwidth_bytes_per_s),
        backward_s,
        wi.grad_bytes,
    )
    assert exposed_2 == pytest.approx(2.020e-3, rel=0.002)
    predicted_us = one_gpu_us + exposed_2 * 1e6
    assert predicted_us / step_us == pytest.approx(0.81, abs=0.02)


# ------------------------------------------------------- a trace that is already data-parallel


def test_already_distributed_job_predicts_above_its_world_size_relative_to_itself():
    # One rank of a 2-GPU DDP job: 100 ms step holding 20 ms of data wait, 20 ms of backward;
    # 400 MB of gradients a step, all-reduced at a measured 20 GB/s bus bandwidth.
    run, analysis = make(
        0.100, {"data": 0.2, "forward": 0.3, "backward": 0.2, "optimizer": 0.3}, 400 * MB
    )
    r = w.what_if(run, analysis, measured_bus_bytes_per_s=20e9, world_size=2)
    assert r.world_size == 2 and r.missing == ()
    assert [p.gpus for p in r.points] == [4, 8]  # nothing at or below today's 2 GPUs
    # ring(N) = 2(N-1)/N x 400e6 / 20e9 + 2(N-1) x 5 us; the last bucket is 26,214,400 / 4e8 of it
    #   N=2: 20.00 + 0.01 = 20.01 ms, exposed max(20.01 - 20, 20.01 x 0.065536) = 1.3114 ms
    #   N=4: 30.00 + 0.03 = 30.03 ms, exposed 30.03 - 20 = 10.03 ms
    #   N=8: 35.00 + 0.07 = 35.07 ms, exposed 35.07 - 20 = 15.07 ms
    # The measured 100 ms already holds the 1.3114 ms at 2 GPUs: base = 98.6886 ms.
    #   4 GPUs: step 98.6886 + 10.03 = 108.7186 ms, speedup (4/2) x 100 / 108.7186 = 1.8396x, efficiency 92.0%
    #   8 GPUs: step 98.6886 + 15.07 = 113.7586 ms, speedup (8/2) x 100 / 113.7586 = 3.5162x
    # With the data wait fixed: base 80 - 1.3114 = 78.6886 ms -> 200 / 88.7186 = 2.2543x at 4 GPUs.
    p4, p8 = r.points
    assert p4.allreduce_s == pytest.approx(30.03e-3) and p4.exposed_comm_s == pytest.approx(
        10.03e-3
    )
    assert p4.step_s == pytest.approx(108.71862e-3, rel=1e-6)
    assert p4.speedup == pytest.approx(1.83961, rel=1e-5)
    assert p4.efficiency == pytest.approx(0.919806, rel=1e-5)
    assert p4.speedup_with_fixes == pytest.approx(2.25432, rel=1e-5)
    assert p8.exposed_comm_s == pytest.approx(15.07e-3)
    assert p8.speedup == pytest.approx(3.51622, rel=1e-5)
    # Read as a one-GPU baseline, the same trace would claim 4 x 100 / 110.03 = 3.64x at 4 GPUs.
    naive = next(
        p for p in w.what_if(run, analysis, measured_bus_bytes_per_s=20e9).points if p.gpus == 4
    )
    assert naive.speedup == pytest.approx(3.6354, rel=1e-4)
    text = render_whatif(r)
    assert (
        "one rank of a data-parallel job on 2 GPUs: its step already includes the all-reduce"
        in text
    )
    assert "speedup vs 2 GPUs" in text and "1.84x" in text and "3.52x" in text
    assert not any(line.split()[:1] == ["2"] for line in text.splitlines())  # no row for 2 GPUs


def test_distributed_past_eight_gpus_keeps_doubling_the_job():
    run, analysis = make(0.100, {"forward": 0.3, "backward": 0.7}, 100 * MB)
    r = w.what_if(run, analysis, measured_bus_bytes_per_s=20e9, world_size=8)
    assert [p.gpus for p in r.points] == [16, 32]
    assert all(p.speedup <= p.gpus / 8 for p in r.points)


def test_distributed_job_of_unknown_size_gives_no_numbers():
    run, analysis = make(0.100, {"forward": 0.3, "backward": 0.7}, 100 * MB)
    r = w.what_if(run, analysis, measured_bus_bytes_per_s=20e9, world_size=None)
    assert r.points == () and r.world_size is None
    assert any("records no world size" in m for m in whatif_missing(r))
    assert "distributed job of unknown size" in render_whatif(r)


def test_one_gpu_what_if_says_nothing_about_a_job():
    run, analysis = make(0.100, {"forward": 0.3, "backward": 0.7}, 100 * MB)
    r = w.what_if(run, analysis)
    assert r.world_size == 1 and [p.gpus for p in r.points] == [2, 4, 8]
    assert baseline_sentence(r) is None and "data-parallel job" not in render_whatif(r)


def test_real_two_rank_trace_is_scaled_as_the_two_gpu_job_it_is():
    from gpu_notebook.report.from_trace import report_from_trace
    from gpu_notebook.views.html_report import whatif_section

    report, _, _ = report_from_trace(_world2())
    wi = report.whatif
    assert wi is not None and wi.world_size == 2 and wi.missing == ()
    assert [p.gpus for p in wi.points] == [4, 8]
    # step 222.4 ms holds the model's 2.020 ms exposed at 2 GPUs (see above); at the measured
    # 12.99 GB/s: ring(4) = 1.5 x 102,228,128 / 12.99e9 + 30 us = 11.831 ms, ring(8) = 13.838 ms;
    # backward (~41 ms) hides all but the last bucket (x 0.25643): 3.034 and 3.548 ms exposed.
    #   4 GPUs: 2 x 222.4 / (222.4 - 2.020 + 3.034) = 1.991x; 8 GPUs: 4 x 222.4 / 223.93 = 3.973x
    step = report.analysis.step_stats.median_s
    assert step == pytest.approx(222.4e-3, rel=0.005)
    p4, p8 = wi.points
    assert p4.exposed_comm_s == pytest.approx(3.034e-3, rel=0.002)
    assert p8.exposed_comm_s == pytest.approx(3.548e-3, rel=0.002)
    assert p4.step_s == pytest.approx(step - 2.020e-3 + 3.034e-3, rel=1e-4)
    assert p4.speedup == pytest.approx(1.991, abs=0.002)
    assert p8.speedup == pytest.approx(3.973, abs=0.002)
    text = render_text(report)
    assert (
        "one rank of a data-parallel job on 2 GPUs: its step already includes the all-reduce"
        in text
    )
    assert "gradients 102.2 MB a step" in text and "97.5 MB" not in text
    html = whatif_section(wi)
    assert (
        "This trace is one rank of a data-parallel job on 2 GPUs" in html
        and "speedup vs 2 GPUs" in html
    )
    assert '<td class="num">2</td>' not in html


def test_what_if_sizes_are_decimal_megabytes():
    # ResNet-50's 102,228,128 gradient bytes are 102.2 MB (NCCL's convention), not 97.5 (MiB)
    run, analysis = make(0.272, {"forward": 1 / 3, "backward": 2 / 3}, RESNET50_GRAD_BYTES)
    r = w.what_if(run, analysis)
    text = render_whatif(r)
    assert "gradients 102.2 MB a step" in text and "97.5" not in text
    assert "26.2 MB buckets (bucket_cap_mb=25, which PyTorch counts in MiB)" in text
    from gpu_notebook.views.html_report import whatif_section

    assert "gradients 102.2 MB a step" in whatif_section(r)


# ------------------------------------------------------------------ the host's CPUs, N ranks


def _with_cpu(
    run: Run,
    busy_pct: float,
    idle_pct: float = 100.0,
    cores: int = 16,
    ticks: int = 8,
    wait_share: float | None = None,
) -> Run:
    """``run`` whose 10 steps span 1-2 s of the capture, ``ticks`` sampler ticks at ``busy_pct``
    inside them and as many at ``idle_pct`` before (the imports): 100 = one core. Each step
    waited ``wait_share`` of its time for a core (None: not read)."""
    from dataclasses import replace

    from gpu_notebook.records import Sample, StepTiming

    wait_s = None if wait_share is None else 0.1 * wait_share
    steps = tuple(StepTiming(i, 1.0 + i * 0.1, 0.1, 0, 0, 0, 0, wait_s=wait_s) for i in range(10))
    before = tuple(Sample(i * 0.1, idle_pct, None, None) for i in range(ticks))
    inside = tuple(Sample(1.05 + i * 0.9 / ticks, busy_pct, None, None) for i in range(ticks))
    return replace(
        run,
        env=replace(run.env, cpu_count=cores),
        samples=SampleSeries(0.1, 0.1, before + inside),
        steps=replace(run.steps, steps=steps),
    )


def _what_if_cpu(run: Run, analysis: Analysis, **cpu: float) -> WhatIf:
    """The what-if of ``_with_cpu(run, **cpu)``, its analysis' figures inside the steps read
    from that run's ticks (the what-if reads them there: ``Analysis.utilization.in_steps``)."""
    from dataclasses import replace

    from gpu_notebook.analysis.utilization import run_utilization

    ticked = _with_cpu(run, **cpu)  # type: ignore[arg-type]
    return w.what_if(ticked, replace(analysis, utilization=run_utilization(ticked)))


def _analysed(report: Report) -> Analysis:
    """A recorded report's analysis with the sampler's figures read again (``in_steps``)."""
    from dataclasses import replace

    from gpu_notebook.analysis.utilization import run_utilization

    return replace(report.analysis, utilization=run_utilization(report.run))


def test_ranks_that_need_more_cores_than_the_host_has_share_them():
    run, analysis = make(0.100, {"data": 0.9, "forward": 0.05, "backward": 0.05}, 40 * MB)
    # 6 cores busy while the steps run (1 core during the imports before them): 16 cores hold 2.
    r = _what_if_cpu(run, analysis, busy_pct=600.0)
    assert r.rank_cores == pytest.approx(6.0) and r.host_cores == 16
    by_n = {p.gpus: p for p in r.points}
    assert by_n[2].speedup_this_host == pytest.approx(by_n[2].speedup)  # 12 of 16 cores
    assert by_n[4].speedup_this_host == pytest.approx(by_n[4].speedup * 16 / 24)
    assert by_n[8].speedup_this_host == pytest.approx(by_n[8].speedup * 16 / 48)
    text = render_whatif(r)
    assert "this host" in text and "6.0 of this host's 16 cores" in text
    assert "holds 2 such ranks" in text or "hold 2 such ranks" in text
    assert "loaders sharing the host's CPUs" not in text  # modelled now, not disclaimed
    # A loop that keeps one core busy fits eight ranks on the same host: the column changes nothing.
    one = _what_if_cpu(run, analysis, busy_pct=100.0)
    assert all(p.speedup_this_host == pytest.approx(p.speedup) for p in one.points)
    assert "every count below fits" in render_whatif(one)


def test_the_host_column_counts_the_cores_a_rank_would_use_on_a_quiet_host():
    """Under load a thread waits for a core instead of running: the cores a loaded run kept
    busy understate what it would use on a quiet host. 6 cores busy while each step waited a
    quarter of its time for a core: the same CPU work over steps a quarter shorter is 8 cores;
    never more than the host's (15 busy, half the steps waiting: 16, not 30)."""
    run, analysis = make(0.100, {"data": 0.9, "forward": 0.05, "backward": 0.05}, 40 * MB)
    r = _what_if_cpu(run, analysis, busy_pct=600.0, wait_share=0.25)
    assert r.rank_cores == pytest.approx(8.0) and r.rank_busy_cores == pytest.approx(6.0)
    assert r.rank_wait_share == pytest.approx(0.25)
    by_n = {p.gpus: p for p in r.points}
    assert by_n[2].speedup_this_host == pytest.approx(by_n[2].speedup)  # 16 of 16 cores
    assert by_n[4].speedup_this_host == pytest.approx(by_n[4].speedup * 16 / 32)
    text = render_whatif(r)
    assert "kept 6.0 of this host's 16 cores busy" in text
    assert "on a quiet host it would keep 8.0 busy" in text and "25%" in text
    assert any("would keep busy on a quiet host" in a for a in whatif_assumptions(r))
    full = _what_if_cpu(run, analysis, busy_pct=1500.0, wait_share=0.5)
    assert full.rank_cores == pytest.approx(16.0)
    quiet = _what_if_cpu(run, analysis, busy_pct=600.0, wait_share=0.0)
    assert quiet.rank_cores == pytest.approx(6.0) and "quiet host" not in render_whatif(quiet)


def test_host_cpu_is_not_guessed_from_too_few_ticks_or_the_imports():
    run, analysis = make(0.100, {"data": 0.5, "backward": 0.5}, 40 * MB)
    # Two ticks inside the steps: not enough to read the loop's demand; the imports' ticks
    # (before the first step) are never the loop's.
    r = _what_if_cpu(run, analysis, busy_pct=1500.0, idle_pct=100.0, ticks=2)
    assert r.rank_cores is None and r.host_cores is None
    assert all(p.speedup_this_host is None for p in r.points)
    assert "this host" not in render_whatif(r)


RECORDED_H100_CLI = Path(__file__).parent / "data" / "gpu" / "2026-12-06-nvidia-h100-cli"


def test_recorded_h100_input_bound_script_fills_its_host_so_a_second_gpu_there_adds_nothing():
    """The H100 of 2026-12-06 (16 cores): gpu_train's 0-worker loader with a per-item CPU
    transform kept ~15.9 cores busy while its steps ran (the whole run's mean, imports included,
    read 831%). The model alone predicts 1.96x on two GPUs; on that host the two ranks share
    its 16 cores, ~1.0x. The GPU-bound script keeps one core busy: its column is the model's."""
    train = Report.from_json((RECORDED_H100_CLI / "gpu_train.report.json").read_text())
    r = w.what_if(train.run, _analysed(train))
    assert r.rank_cores is not None and 15.0 < r.rank_cores <= 16.0
    assert train.analysis.utilization.process_cpu_mean_pct < 100 * r.rank_cores * 0.6
    two = next(p for p in r.points if p.gpus == 2)
    assert two.speedup > 1.9 and two.speedup_this_host is not None
    assert two.speedup_this_host < 1.05
    assert all(p.speedup_this_host < 1.05 for p in r.points)
    bound = Report.from_json((RECORDED_H100_CLI / "gpu_bound.report.json").read_text())
    b = w.what_if(bound.run, _analysed(bound))
    assert b.rank_cores is not None and b.rank_cores < 1.5
    assert all(p.speedup_this_host == pytest.approx(p.speedup) for p in b.points)


def test_host_column_reaches_the_html_report_escaped():
    from gpu_notebook.views.html_report import whatif_section

    run, analysis = make(0.100, {"data": 0.9, "backward": 0.1}, 40 * MB)
    html = whatif_section(_what_if_cpu(run, analysis, busy_pct=1200.0))
    assert "on this host" in html and "Host CPU: this run kept 12.0 of this host&#39;s 16" in html
