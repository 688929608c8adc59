"""The GPU side of a trace on small hand-made Kineto documents, exact to the microsecond.

Exposed vs overlapped collectives, CUDA-graph replays and captures, HIP runtime names, kernels
launched from autograd's own thread, orphan work launched before the trace, inference; and the
verdicts these figures lead to. The real-trace counterparts are in test_reference_parity.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpu_notebook.analysis.gpu_timeline import gpu_timeline
from gpu_notebook.analysis.phases import phase_breakdown, workload
from gpu_notebook.analysis.verdict import comm_remedy
from gpu_notebook.traces import load_trace_dict
from gpu_notebook.traces.kineto import Trace
from tests import trace_fixtures as tf
from tests.scenarios import synthetic as syn

AUTOGRAD_TID = 2


def _trace(events: list[tf.Event]) -> Trace:
    return load_trace_dict(tf.trace_dict(events))


def test_collectives_under_computation_are_overlapped_the_rest_exposed() -> None:
    trace = _trace(
        [
            tf.launch(0.0, 1),
            tf.launch(1.0, 2),
            tf.launch(2.0, 3),
            tf.kernel("sm80_xmma_gemm", 10.0, 40.0, 1),  # compute [10, 50)
            tf.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30.0, 40.0, 2, stream=20),
            tf.kernel("multimem_all_reduce_kernel", 90.0, 10.0, 3, stream=21),  # [90, 100)
        ]
    )
    g = gpu_timeline(trace, (0.0, 100.0))
    assert g is not None
    assert (g.comm_busy_us, g.comm_exposed_us, g.compute_us) == (50.0, 30.0, 40.0)
    assert g.comm_overlap_share == pytest.approx(0.4)  # [30, 50) of the 50 us
    assert g.collectives == 2


def test_graph_replay_kernels_are_busy_and_a_capture_is_named() -> None:
    replay = [tf.runtime("cudaGraphLaunch", 0.0, 5.0, 7)]
    replay += [tf.kernel(f"k{i}", 10.0 + 10 * i, 10.0, 7) for i in range(5)]
    g = gpu_timeline(_trace(replay))
    assert g is not None and not g.capture
    assert (g.graph_launches, g.graph_us, g.busy_share) == (1, 50.0, 1.0)

    capture = [tf.runtime("hipModuleLaunchKernel", float(i), 1.0, 100 + i) for i in range(30)]
    capture += [tf.launch(40.0, 1), tf.kernel("k", 50.0, 1.0, 1)]
    g = gpu_timeline(_trace(capture))
    assert g is not None and g.capture
    assert (g.kernel_launches, g.launches_without_work) == (31, 30)
    # A few launches without their kernel (a truncated buffer) are no capture.
    lost = [tf.launch(float(i), i) for i in range(30)]
    lost += [tf.kernel("k", 100.0 + i, 1.0, i) for i in range(25)]
    g = gpu_timeline(_trace(lost))
    assert g is not None and not g.capture


def test_kernels_launched_on_autograd_threads_are_backward_whatever_the_runtime() -> None:
    events = [
        tf.annotation("ProfilerStep#1", 0.0, 100.0),
        tf.op("aten::linear", 5.0, 10.0),
        tf.runtime("hipLaunchKernel", 6.0, 2.0, 1),
        tf.annotation("Optimizer.step#SGD.step", 80.0, 10.0),
        tf.runtime("hipExtModuleLaunchKernel", 82.0, 2.0, 3),
        # autograd's device thread, under a name torch 1.8 gave its nodes
        tf.op("MulBackward0", 30.0, 20.0, tid=AUTOGRAD_TID),
        tf.runtime("hipLaunchKernel", 35.0, 2.0, 2, tid=AUTOGRAD_TID),
        tf.kernel("fwd", 10.0, 10.0, 1),
        tf.kernel("bwd", 40.0, 20.0, 2),
        tf.kernel("upd", 85.0, 5.0, 3),
        tf.kernel("orphan", 0.0, 4.0, 99),  # launched before the trace began
    ]
    trace = _trace(events)
    g = gpu_timeline(trace)
    assert g is not None
    phases = {k: v for k, v in g.gpu_phase_us.items() if v}
    assert phases == {"forward": 10.0, "backward": 20.0, "optimizer": 5.0, "unattributed": 4.0}
    assert g.before_trace_us == 4.0
    assert g.window_source == "steps" and g.span_us == 80.0  # [10, 90): the orphan left out
    assert workload(trace) == "training"


def test_no_backward_and_no_optimizer_is_inference_and_its_ops_are_forward() -> None:
    events = [tf.annotation("ProfilerStep#1", 0.0, 100.0)]
    events += [tf.op(f"aten::op{i}", 10.0 * i, 5.0) for i in range(10)]
    trace = _trace(events)
    assert workload(trace) == "inference"
    phases = phase_breakdown(trace)
    assert phases is not None and phases.workload == "inference"
    assert phases.phase_total_us["forward"] == 50.0
    # Markers and a few allocations around collectives say nothing of a model.
    assert workload(_trace([tf.annotation("gloo:all_reduce", 0.0, 5.0)])) is None


def test_comm_bound_rests_on_exposed_communication_and_its_fix_on_the_figures() -> None:
    run = syn.make_run(gpus=[syn.gpu()])
    exposed = syn.timeline(busy=0.85, comm=0.3, host_wait=0.1)
    v = syn.verdict(run, syn.make_analysis(gpu_timeline=exposed))
    assert v.category == "comm-bound" and "30%" in v.headline
    assert "overlap it" in v.more_gpus  # nothing overlapped: overlap is the fix
    hidden = syn.timeline(busy=0.85, comm=0.3, comm_overlap=0.9, host_wait=0.1)
    assert syn.verdict(run, syn.make_analysis(gpu_timeline=hidden)).category == "gpu-bound"
    half = syn.timeline(busy=0.85, comm=0.4, comm_overlap=0.5, host_wait=0.15)
    assert comm_remedy(half, steps=8) == "accumulate"
    assert comm_remedy(dataclasses.replace(half, collectives=8 * 50), steps=8) == "bucket"
    # The GPU waits longer with its work queued (behind a peer's collective) than it spends
    # in exposed collectives: a straggler.
    queued = syn.timeline(busy=0.5, comm=0.4, comm_overlap=0.5)
    assert queued.idle_other_us > queued.comm_exposed_us
    assert comm_remedy(queued, steps=8) == "straggler"


def test_inference_and_capture_verdicts_speak_in_their_own_terms() -> None:
    run = syn.make_run(gpus=[syn.gpu()])
    split = dataclasses.replace(syn.phases({}), workload="inference")
    busy = syn.verdict(
        run, syn.make_analysis(phase_split=split, gpu_timeline=syn.timeline(busy=0.95))
    )
    assert busy.category == "gpu-bound" and "replica" in busy.more_gpus
    assert "data parallel" not in busy.more_gpus
    idle = syn.timeline(busy=0.2, host_wait=0.8)
    starved = syn.verdict(run, syn.make_analysis(phase_split=split, gpu_timeline=idle))
    assert starved.category == "host-bound"
    for word in ("CUDA graph", "torch.compile", "TensorRT", "Batch"):
        assert word in starved.more_gpus
    capture = dataclasses.replace(idle, capture=True, kernel_launches=30, launches_without_work=30)
    v = syn.verdict(run, syn.make_analysis(phase_split=split, gpu_timeline=capture))
    assert v.category == "unknown" and "capture" in v.headline


def test_more_gpus_for_inference_are_replicas_with_nothing_to_exchange() -> None:
    from gpu_notebook.analysis.whatif import what_if
    from gpu_notebook.views.wording import render_whatif

    split = dataclasses.replace(syn.phases({"sync": 0.3}), workload="inference")
    analysis = syn.make_analysis(phase_split=split, gpu_timeline=syn.timeline(busy=0.9))
    w = what_if(syn.make_run(gpus=[syn.gpu()]), analysis)
    assert [(p.gpus, p.speedup, p.exposed_comm_s) for p in w.points] == [
        (2, 2.0, 0.0),
        (4, 4.0, 0.0),
        (8, 8.0, 0.0),
    ]
    assert not w.missing and w.grad_bytes is None
    text = render_whatif(w)
    assert "replica" in text and "gradient size unknown" not in text and "DDP" not in text


def test_inference_measured_on_a_cpu_is_answered_as_inference() -> None:
    split = dataclasses.replace(syn.phases({}), workload="inference")
    v = syn.verdict(syn.make_run(), syn.make_analysis(phase_split=split))
    assert v.category == "cpu-only" and "inference" in v.headline
    assert "replicas" in v.more_gpus and "data parallel" not in v.more_gpus


def test_a_device_to_host_copy_waiting_for_the_queue_is_a_sync_and_costs_only_idle_gpu() -> None:
    events = [
        tf.annotation("ProfilerStep#1", 0.0, 100.0),
        tf.launch(1.0, 1),
        tf.op("aten::to", 9.0, 52.0),
        tf.runtime("cudaMemcpyAsync", 10.0, 50.0, 2),  # .cpu(): blocked until the kernel ends
        tf.kernel("big_kernel", 5.0, 50.0, 1),
        tf.memcpy("DtoH (Device -> Pageable)", 55.0, 2.0, 2, nbytes=4),
    ]
    events += [tf.op(f"aten::op{i}", 62.0 + 3 * i, 2.0) for i in range(10)]
    trace = _trace(events)
    phases = phase_breakdown(trace)
    assert phases is not None
    assert phases.phase_total_us["sync"] == 45.0  # [10, 55): waiting for big_kernel
    assert phases.phase_total_us["copy"] == 5.0  # [55, 60): the copy itself and the return
    g = gpu_timeline(trace)
    assert g is not None and g.idle_sync_wait_us == 0.0  # the GPU was busy all along
    analysis = syn.make_analysis(phase_split=phases, gpu_timeline=g)
    assert syn.verdict(syn.make_run(gpus=[syn.gpu()]), analysis).category != "sync-bound"


def test_a_trace_without_correlation_args_is_joined_by_its_ac2g_flows() -> None:
    """Some writers drop the args; the launch -> kernel flow still carries the correlation."""
    events = [
        tf.annotation("Optimizer.step#SGD.step", 0.0, 50.0),
        tf.x("cudaLaunchKernel", "cuda_runtime", 10.0, 2.0),
        tf.x("k", "kernel", 20.0, 5.0, pid=tf.GPU_PID, tid=7),
        tf.flow(42, 10.0, start=True),
        tf.flow(42, 20.0, start=False),
    ]
    trace = _trace(events)
    assert sorted(trace.correlation[trace.correlation >= 0].tolist()) == [42, 42]
    g = gpu_timeline(trace)
    assert g is not None and g.gpu_phase_us["optimizer"] == 5.0
