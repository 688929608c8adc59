"""GPU busy/idle, idle causes (HTA's definitions), copies and kernel time by phase."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpu_notebook import markers
from gpu_notebook.analysis.gpu_timeline import (
    KERNEL_WAIT_THRESHOLD_US,
    TENSOR_CORE_PATTERN,
    default_window,
    gpu_timeline,
)
from gpu_notebook.analysis.ops import self_time_ns, top_ops
from gpu_notebook.records import PHASES, CopyStats
from gpu_notebook.traces import Trace, load_trace, load_trace_dict
from tests import trace_fixtures as tf


@pytest.fixture(scope="module")
def scenario() -> Trace:
    return load_trace_dict(tf.gpu_scenario())


def test_busy_idle_and_idle_causes_are_exact(scenario: Trace) -> None:
    g = gpu_timeline(scenario, tf.GPU_SCENARIO_WINDOW)
    assert g is not None
    assert g.window_us == 200.0
    assert g.busy_us == 108.0  # 20 + 28 + 5 + 10 + 25 + 20
    assert g.idle_us == 92.0
    # [0,10) + [60,70) + [155,180), less [65,67) when the host was in cudaMemcpyAsync: a copy
    assert (g.idle_host_wait_us, g.idle_data_wait_us, g.idle_sync_wait_us) == (43.0, 2.0, 0.0)
    assert g.idle_kernel_wait_us == 7.0  # [30,32) + [75,80)
    assert g.idle_other_us == 40.0  # [90,130): launched long before, waited on something else
    assert g.busy_share == pytest.approx(0.54)
    assert g.devices == (0,)


def test_the_waits_inside_the_model_are_what_compile_reaches(scenario: Trace) -> None:
    """Host and launch waits while the host thread was in the forward range [0,50): [0,10)
    and the launch gap [30,32); not [60,70) (the optimizer's step, and a copy), nor [75,80) or
    [155,180) (outside every phase range)."""
    g = gpu_timeline(scenario, tf.GPU_SCENARIO_WINDOW)
    assert g is not None
    assert g.idle_model_wait_us == 12.0


def test_kernel_comm_memset_copies_and_tensor_cores(scenario: Trace) -> None:
    g = gpu_timeline(scenario, tf.GPU_SCENARIO_WINDOW)
    assert g is not None
    assert g.kernel_us == 113.0  # H clipped to 20 at the window end; I overlaps H
    assert g.comm_us == 10.0
    assert g.memset_us == 5.0
    assert g.copies == (CopyStats("HtoD (Pageable -> Device)", 1, 5.0, 4096),)
    assert g.tensor_core_kernel_us == 20.0  # volta_h884gemm


def test_kernel_time_is_attributed_to_the_phase_that_launched_it(scenario: Trace) -> None:
    g = gpu_timeline(scenario, tf.GPU_SCENARIO_WINDOW)
    assert g is not None
    assert set(g.gpu_phase_us) == set(PHASES)
    assert g.gpu_phase_us["forward"] == 68.0  # A, B, C, E launched inside the forward range
    assert g.gpu_phase_us["optimizer"] == 20.0  # F launched inside Optimizer.step
    # H and the memset: only their own launch calls cover that time
    assert g.gpu_phase_us["other"] == 25.0
    assert g.gpu_phase_us["copy"] == 5.0  # the copy, launched by cudaMemcpyAsync
    assert g.gpu_phase_us["unattributed"] == 5.0  # I: its launch is not in the trace
    # Copies and memsets too: every GPU activity goes to the phase that launched it.
    copies = sum(c.duration_us for c in g.copies)
    assert sum(g.gpu_phase_us.values()) == g.kernel_us + g.memset_us + copies


def test_idle_after_the_last_launch_is_host_wait(scenario: Trace) -> None:
    g = gpu_timeline(scenario, (0.0, 300.0))
    assert g is not None
    assert g.busy_us == 158.0
    assert g.idle_host_wait_us + g.idle_data_wait_us == 95.0  # 45 + [250,300): nothing launched
    assert (g.idle_kernel_wait_us, g.idle_other_us) == (7.0, 40.0)


def test_default_window_is_the_gpu_activity_span_without_steps(scenario: Trace) -> None:
    assert default_window(scenario) == (10.0, 250.0)
    g = gpu_timeline(scenario)
    assert g is not None
    assert (g.window_us, g.busy_us) == (240.0, 158.0)
    # The window opens with the first kernel; the host was in cudaMemcpyAsync 2 µs of the wait.
    assert (g.idle_host_wait_us, g.idle_data_wait_us) == (33.0, 2.0)


def test_default_window_is_the_step_span_when_steps_are_marked() -> None:
    doc = tf.gpu_scenario()
    doc["traceEvents"] += [tf.step_mark(0, 0.0), tf.step_mark(1, 100.0), tf.step_mark(2, 200.0)]
    trace = load_trace_dict(doc)
    assert default_window(trace) == (0.0, 200.0)
    g = gpu_timeline(trace)
    # H_long_kernel, launched at 170 inside the steps, runs to 250: the window runs on with it.
    assert g is not None and (g.window_us, g.host_ahead_us) == (250.0, 50.0)
    assert g.busy_us == 158.0 and g.window_source == "steps"


def _host_ahead_trace(*, backlog_us: float, kernel_us: float, steps: int = 3) -> Trace:
    """A host that issues each step in 1 ms (marks every 1000 µs, three launches a step) while
    the GPU runs each step's kernels back to back for ``kernel_us`` each, after ``backlog_us``
    of work launched before the profiler started (not in the trace)."""
    events = [tf.step_mark(i, 1000.0 * i) for i in range(steps + 1)]
    gpu_at = backlog_us
    corr = 0
    for i in range(steps):
        for k in range(3):
            corr += 1
            events.append(tf.launch(1000.0 * i + 100.0 + 300.0 * k, corr))
            events.append(tf.kernel(f"gemm_{corr}", gpu_at, kernel_us, corr))
            gpu_at += kernel_us
    return load_trace_dict(tf.trace_dict(events))


def test_a_host_running_ahead_is_judged_on_the_gpus_time_for_its_steps() -> None:
    """Seen on an H200: an fp32 MLP whose steps the host issues in 3.5 ms and the GPU runs in
    32 ms read 0% busy in the host's window (the kernels ran after it, behind the steps
    launched before profiling). The window runs on to the last kernel the steps launched, and
    opens after the first one's wait behind unrecorded work."""
    trace = _host_ahead_trace(backlog_us=20_000.0, kernel_us=3_000.0)
    g = gpu_timeline(trace)
    assert g is not None and g.window_source == "steps"
    assert g.host_ahead_us == 20_000.0 + 9 * 3_000.0 - 3_000.0
    # It opens where the first recorded kernel starts, after 19.9 ms queued from its launch.
    assert g.queued_before_trace_us == 20_000.0 - 100.0
    assert (g.window_start_us, g.window_us) == (20_000.0, 9 * 3_000.0)
    assert g.busy_us == g.kernel_us == g.window_us and g.idle_host_wait_us == 0.0


def test_a_host_that_waits_for_its_kernels_keeps_the_host_window() -> None:
    """Kernels that end inside their step: nothing runs on past the steps, and a first kernel
    that starts late (CUPTI's first activity, ~0.4 ms) is not read as unrecorded work."""
    events = [tf.step_mark(i, 1000.0 * i) for i in range(4)]
    for i in range(3):
        events.append(tf.launch(1000.0 * i + 100.0, i + 1))
        late = 500.0 if i == 0 else 0.0
        events.append(tf.kernel(f"k{i}", 1000.0 * i + 110.0 + late, 200.0, i + 1))
    g = gpu_timeline(load_trace_dict(tf.trace_dict(events)))
    assert g is not None and (g.window_us, g.host_ahead_us) == (3000.0, 0.0)
    assert g.queued_before_trace_us == 0.0 and g.busy_us == 600.0


def test_the_kernel_wait_threshold_decides_short_gaps(scenario: Trace) -> None:
    g = gpu_timeline(scenario, tf.GPU_SCENARIO_WINDOW, kernel_wait_threshold_us=50.0)
    assert g is not None
    assert (g.idle_kernel_wait_us, g.idle_other_us) == (47.0, 0.0)
    assert KERNEL_WAIT_THRESHOLD_US == 30.0  # HTA's default consecutive_kernel_delay


def test_a_trace_without_device_activity_has_no_timeline() -> None:
    trace = load_trace_dict(tf.trace_dict([tf.op("aten::mm", 0.0, 10.0)]))
    assert gpu_timeline(trace) is None
    copies_only = load_trace_dict(
        tf.trace_dict([tf.memcpy("DtoH (Device -> Pinned)", 0.0, 4.0, 1, nbytes=None)])
    )
    g = gpu_timeline(copies_only)
    assert g is not None
    assert g.tensor_core_kernel_us is None and g.kernel_us == 0.0
    assert g.copies == (CopyStats("DtoH (Device -> Pinned)", 1, 4.0, None),)


def test_tensor_core_names() -> None:
    yes = [
        "volta_h884gemm_64x64_ldg8_nn",
        "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
        "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x128x32_stage4_warpsize2x2x1",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_wgmma",
        "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn",
    ]
    no = [
        "volta_sgemm_128x64_nn",
        "void at::native::vectorized_elementwise_kernel<4>",
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        "void cudnn::bn_bw_1C11_kernel_new<float>",
        # float32 on the CUDA cores, named xmma (H200, TF32 off): FFMA, not MMA
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4",
        "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x128x8",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(Params)",
    ]
    yes += [
        "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1",
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16",
    ]
    assert all(TENSOR_CORE_PATTERN.search(n) for n in yes)
    assert not any(TENSOR_CORE_PATTERN.search(n) for n in no)


# ---------------------------------------------------------------------------------------------
# Real traces
# ---------------------------------------------------------------------------------------------

NCCL_TRACES = (
    "a100_world2_rank0_nccl.json.gz",
    "a100_world8_rank3.json.gz",
    "a100_world16_rank0.json.gz",
)


@pytest.mark.parametrize("name", (*NCCL_TRACES, "v100_world1_rank0.json.gz"))
def test_reference_gpu_traces_add_up(reference_traces: Path, name: str) -> None:
    trace = load_trace(reference_traces / name)
    g = gpu_timeline(trace)
    assert g is not None
    assert round((g.busy_us + g.idle_us) * 1000) == round(g.window_us * 1000)
    idle_parts = g.idle_host_wait_us + g.idle_kernel_wait_us + g.idle_other_us
    idle_parts += g.idle_data_wait_us + g.idle_sync_wait_us
    assert round(idle_parts * 1000) == round(g.idle_us * 1000)
    assert 0.0 < g.busy_share <= 1.0
    assert g.copies and any(c.bytes for c in g.copies)
    gpu_time = g.kernel_us + g.memset_us + sum(c.duration_us for c in g.copies)
    assert round(sum(g.gpu_phase_us.values()) * 1000) == round(gpu_time * 1000)
    if name in NCCL_TRACES:
        assert g.comm_us > 0
    else:
        assert g.comm_us == 0.0  # world size 1: NCCL launches no collective kernels


def _hta_style_single_stream(trace: Trace, window: tuple[float, float]) -> dict[str, float]:
    """HTA's per-stream rules written out plainly in Python, for a trace with one stream.

    Times are integer ns from the window start, as in the timeline: absolute Kineto timestamps
    (~1.7e15 µs) keep only 0.25 µs in a float, enough to flip a launch that lands right at a
    kernel's end from one side to the other.
    """

    def ns(us: float) -> int:
        return round((us - window[0]) * 1000)

    launches = {
        int(c): ns(float(t))
        for c, t, cat in zip(trace.correlation, trace.ts_us, trace.cat_id, strict=True)
        if trace.categories[cat] == "cuda_runtime" and c >= 0
    }
    events = sorted(
        (ns(float(trace.ts_us[r])), round(float(trace.dur_us[r]) * 1000), int(trace.correlation[r]))
        for r in np.flatnonzero(trace.gpu_mask)
    )
    out = {"host": 0, "kernel": 0, "other": 0, "busy": 0}
    prev_end: int | None = None
    for ts, dur, corr in events:
        end = ts + dur
        if prev_end is not None and ts > prev_end:
            gap = ts - prev_end
            launch = launches.get(corr)
            if launch is not None and launch > prev_end:
                out["host"] += gap
            elif gap < KERNEL_WAIT_THRESHOLD_US * 1000:
                out["kernel"] += gap
            else:
                out["other"] += gap
        out["busy"] += max(0, end - max(ts, prev_end if prev_end is not None else ts))
        prev_end = end if prev_end is None else max(prev_end, end)
    return {k: v / 1000 for k, v in out.items()}


def test_single_stream_trace_matches_htas_per_stream_rules(reference_traces: Path) -> None:
    trace = load_trace(reference_traces / "v100_world1_rank0.json.gz")
    assert set(trace.stream[trace.gpu_mask].tolist()) == {7}
    gpu = trace.gpu_mask
    span = (float(trace.ts_us[gpu].min()), float(trace.end_us[gpu].max()))
    g = gpu_timeline(trace, span)
    ref = _hta_style_single_stream(trace, span)
    assert g is not None
    # Only the window's float end may add a few ns of trailing idle.
    assert g.busy_us == pytest.approx(ref["busy"], abs=0.05)
    # HTA's host wait is ours with its data and sync parts (the host's phase meanwhile).
    host = g.idle_host_wait_us + g.idle_data_wait_us + g.idle_sync_wait_us
    assert host == pytest.approx(ref["host"], abs=0.05)
    assert g.idle_kernel_wait_us == pytest.approx(ref["kernel"], abs=0.05)
    assert g.idle_other_us == pytest.approx(ref["other"], abs=0.05)
    assert g.idle_host_wait_us > 0 and g.idle_kernel_wait_us > 0


def test_rocm_trace_has_a_timeline(reference_traces: Path) -> None:
    g = gpu_timeline(load_trace(reference_traces / "mi250_rocm_toy.json.gz"))
    assert g is not None
    assert g.devices == (2,)
    assert g.kernel_us > 0 and g.copies[0].kind == "HtoD (Host -> Device)"
    assert g.copies[0].bytes is None  # ROCm writes no bytes on the device-side copy


# ---------------------------------------------------------------------------------------------
# Top operators
# ---------------------------------------------------------------------------------------------


def test_self_time_subtracts_direct_children_only() -> None:
    # parent [0,100) > child [10,60) > grandchild [20,30); sibling [60,90); a zero-length op.
    start = np.array([0, 10, 20, 60, 95], dtype=np.int64)
    end = np.array([100, 60, 30, 90, 95], dtype=np.int64)
    assert self_time_ns(start, end).tolist() == [20, 40, 10, 30, 0]


def test_top_ops_rank_host_ops_by_self_time_and_kernels_by_total(scenario: Trace) -> None:
    doc = tf.trace_dict(
        [
            tf.op("aten::linear", 0.0, 100.0),
            tf.op("aten::addmm", 10.0, 80.0),
            tf.op("aten::addmm", 120.0, 30.0),
            tf.op("aten::relu", 200.0, 5.0),
            tf.kernel("gemm", 0.0, 50.0, 1),
            tf.kernel("relu_kernel", 60.0, 5.0, 2),
            tf.kernel("gemm", 70.0, 50.0, 3),
        ]
    )
    ops = top_ops(load_trace_dict(doc), n=2)
    cpu = [o for o in ops if o.device == "cpu"]
    gpu = [o for o in ops if o.device == "gpu"]
    assert [(o.name, o.calls, o.total_us, o.self_us) for o in cpu] == [
        ("aten::addmm", 2, 110.0, 110.0),
        ("aten::linear", 1, 100.0, 20.0),
    ]
    assert [(o.name, o.calls, o.total_us) for o in gpu] == [
        ("gemm", 2, 100.0),
        ("relu_kernel", 1, 5.0),
    ]


def test_steady_ops_keep_the_typical_call_a_preempted_one_does_not_size_the_op() -> None:
    # Two kept steps (step 1 stalled, left out); in step 0 one of four 10 us addmm calls was
    # preempted for 200 us. The mean call (37 us) is over the 30 us tiny-op line, the typical
    # call (10 us) under it: the rules must size the op as the verdict does, by the median.
    from gpu_notebook.analysis.host import SMALL_OP_US, heaviest_matmul_us
    from gpu_notebook.analysis.steady import steady_top_ops
    from gpu_notebook.records import PhaseBreakdown, StepPhases

    events = [tf.op("aten::addmm", t, 10.0) for t in (0.0, 20.0, 40.0)]
    events += [tf.op("aten::addmm", 60.0, 200.0)]
    events += [tf.op("aten::addmm", t, 10.0) for t in (1000.0, 1020.0, 1040.0)]
    steps = (
        StepPhases(0, 0.0, 300.0, {"forward": 300.0}),
        StepPhases(2, 1000.0, 100.0, {"forward": 100.0}),
    )
    phases = PhaseBreakdown("trace", steps, 400.0, {"forward": 400.0}, ("forward",))
    ops = steady_top_ops(load_trace_dict(tf.trace_dict(events)), phases)
    assert ops is not None
    addmm = next(o for o in ops if o.name == "aten::addmm")
    assert addmm.calls == 7 and addmm.self_us / addmm.calls > SMALL_OP_US
    assert addmm.median_self_us == 10.0
    heaviest = heaviest_matmul_us(ops)
    assert heaviest is not None and heaviest < SMALL_OP_US


def test_the_rules_size_the_ops_by_the_verdicts_own_figure(tmp_path: Path) -> None:
    # Kept steps' addmm calls take 35 us; the window's median over every call (the verdict's
    # figure, analysis.host.host_bound) is 25 us. The rules' steady ops must read 25 us too,
    # or an "ops too small" verdict stands without launch.tiny_ops.
    import dataclasses
    import json

    from gpu_notebook.analysis.host import heaviest_matmul_us
    from gpu_notebook.analysis.steady import with_steady_ops
    from gpu_notebook.records import OpStat, PhaseBreakdown, ProfileWindow, StepPhases
    from tests.scenarios import synthetic as syn

    path = tmp_path / "window.json"
    events = [tf.op("aten::addmm", t, 35.0) for t in (0.0, 40.0, 1000.0, 1040.0)]
    path.write_text(json.dumps(tf.trace_dict(events)))
    steps = (
        StepPhases(0, 0.0, 100.0, {"forward": 100.0}),
        StepPhases(2, 1000.0, 100.0, {"forward": 100.0}),
    )
    phases = PhaseBreakdown("trace", steps, 200.0, {"forward": 200.0}, ("forward",))
    window_ops = (OpStat("aten::addmm", 12, 400.0, 400.0, "cpu", median_self_us=25.0),)
    steady = dataclasses.replace(syn.make_analysis(ops=window_ops), phases=phases)
    run = dataclasses.replace(
        syn.make_run(""),
        window=ProfileWindow(
            "recorded", 0, 4, first_step=0, recorded_steps=4, trace_path=str(path)
        ),
    )
    ops = with_steady_ops(steady, run).top_ops
    addmm = next(o for o in ops if o.name == "aten::addmm")
    assert addmm.calls == 4  # the kept steps' calls
    assert heaviest_matmul_us(ops) == heaviest_matmul_us(window_ops) == 25.0


def test_a_gpu_that_the_host_runs_ahead_of_is_gpu_bound(tmp_path: Path) -> None:
    """The verdict on a trace where the host issues its steps in a tenth of the GPU's time and
    syncs nowhere: the GPU sets the pace (the H200's fp32 MLP read "host-bound" before)."""
    from gpu_notebook.report.from_trace import report_from_trace

    events = [tf.step_mark(i, 1000.0 * i) for i in range(4)]
    gpu_at, corr = 20_000.0, 0
    for i in range(3):
        t0 = 1000.0 * i
        events += [
            tf.annotation(f"{markers.FORWARD_PREFIX}Net", t0 + 50.0, 400.0),
            tf.op("aten::addmm", t0 + 60.0, 300.0),
            tf.annotation(markers.BACKWARD, t0 + 460.0, 300.0),
            tf.annotation(f"{markers.OPTIMIZER_STEP_PREFIX}AdamW.step", t0 + 770.0, 200.0),
        ]
        for k in range(3):
            corr += 1
            events.append(tf.launch(t0 + 100.0 + 300.0 * k, corr))
            events.append(tf.kernel(f"sgemm_{corr}", gpu_at, 3_000.0, corr))
            gpu_at += 3_000.0
    path = tmp_path / "ahead.json"
    path.write_text(json.dumps(tf.trace_dict(events)))
    report, _, _ = report_from_trace(path)
    assert report.verdict.category == "gpu-bound", report.verdict
    assert any("the host ran ahead" in line for line in report.verdict.evidence)


def test_gpu_events_without_timestamps_are_left_out_and_counted() -> None:
    """CUPTI may write ts 0 / dur 0 (an H200 trace of pageable copies): such an event would sit
    before a window that reads 5e12 µs and make the GPU look idle; it is left out, counted."""
    base = 5.0e12
    events = [tf.step_mark(0, base), tf.step_mark(1, base + 100.0)]
    events += [tf.launch(base + 5.0, 1), tf.kernel("k", base + 10.0, 50.0, 1)]
    events += [tf.launch(base + 60.0, 2), tf.kernel("lost", 0.0, 0.0, 2)]
    g = gpu_timeline(load_trace_dict(tf.trace_dict(events)))
    assert g is not None and g.unclocked_events == 1
    assert (g.window_us, g.busy_us, g.kernel_us) == (100.0, 50.0, 50.0)
    # All of them unclocked: a timeline with no window, so the busy share comes from NVML.
    only = [tf.step_mark(0, base), tf.step_mark(1, base + 100.0), tf.launch(base + 5.0, 1)]
    g = gpu_timeline(load_trace_dict(tf.trace_dict([*only, tf.kernel("lost", 0.0, 0.0, 1)])))
    assert g is not None and (g.window_us, g.unclocked_events) == (0.0, 1)
