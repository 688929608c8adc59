"""Steps split into phases: exact on a hand-built trace, sensible on real profiler traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_notebook import markers
from gpu_notebook.analysis.phases import phase_at, phase_breakdown, step_bounds
from gpu_notebook.records import PHASES
from gpu_notebook.traces import load_trace, load_trace_dict
from tests import trace_fixtures as tf


def test_hand_computed_phases_per_step_are_exact() -> None:
    result = phase_breakdown(load_trace_dict(tf.phase_scenario()))
    assert result is not None
    assert result.source == "trace"
    # the trace has GPU activity: copy is measured; no collective ran: comm is not
    assert result.measured == tuple(p for p in PHASES if p != "comm")
    assert [s.index for s in result.steps] == [3, 4]
    assert [s.start_us for s in result.steps] == [0.0, 100.0]
    for step in result.steps:
        assert dict(step.phase_us) == tf.PHASE_SCENARIO_EXPECTED[step.index]
        assert sum(step.phase_us.values()) == step.duration_us == 100.0
    assert result.total_us == 200.0
    assert result.phase_total_us["sync"] == 25.0
    assert result.share("forward") == pytest.approx(80.0 / 200.0)


def test_phases_sum_exactly_to_the_step_on_fractional_timestamps() -> None:
    # Kineto writes ns-resolution floats; sums must not drift by rounding.
    events = [tf.step_mark(i, 1_712_195_495_500_000.0 + i * 33.337) for i in range(4)]
    events += [
        tf.op("aten::mm", 1_712_195_495_500_001.123, 7.777),
        tf.op("aten::item", 1_712_195_495_500_040.001, 12.5),
        tf.op("aten::add", 1_712_195_495_500_080.5, 30.0),
    ]
    result = phase_breakdown(load_trace_dict(tf.trace_dict(events)))
    assert result is not None and len(result.steps) == 3
    for step in result.steps:
        ns = [round(v * 1000) for v in step.phase_us.values()]
        assert sum(ns) == round(step.duration_us * 1000)
        assert step.phase_us["sync"] + step.phase_us["other"] > 0


def test_copy_is_not_measured_without_any_gpu_activity() -> None:
    events = [
        tf.step_mark(0, 0.0),
        tf.step_mark(1, 50.0),
        tf.annotation(f"{markers.DATALOADER_PREFIX}it", 0.0, 10.0),
        tf.op("aten::to", 10.0, 5.0),
    ]
    result = phase_breakdown(load_trace_dict(tf.trace_dict(events)))
    assert result is not None
    assert "copy" not in result.measured
    assert "copy" not in result.steps[0].phase_us
    assert result.share("copy") is None
    assert result.share("data") == pytest.approx(0.2)
    assert result.steps[0].phase_us == {
        "data": 10.0, "forward": 0.0, "backward": 0.0, "optimizer": 0.0, "sync": 0.0,
        "other": 5.0, "unattributed": 35.0,
    }  # fmt: skip


def test_profiler_steps_are_used_without_marks_and_span_without_either() -> None:
    events = [
        tf.annotation(f"{markers.PROFILER_STEP_PREFIX}7", 0.0, 40.0),
        tf.annotation(f"{markers.PROFILER_STEP_PREFIX}8", 40.0, 60.0),
        tf.op("aten::mm", 5.0, 10.0),
    ]
    bounds = step_bounds(load_trace_dict(tf.trace_dict(events)))
    assert bounds is not None and bounds.source == "profiler_step"
    assert bounds.index == (7, 8) and bounds.end_us == (40.0, 100.0)

    result = phase_breakdown(load_trace_dict(tf.trace_dict(events)))
    assert result is not None
    # The ProfilerStep range itself is not work: the step's idle time stays unattributed.
    assert result.steps[0].phase_us["other"] == 10.0
    assert result.steps[0].phase_us["unattributed"] == 30.0

    span = step_bounds(load_trace_dict(tf.trace_dict([tf.op("a", 3.0, 4.0), tf.op("b", 9, 1)])))
    assert span is not None and span.source == "span"
    assert (span.start_us, span.end_us) == ((3.0,), (10.0,))


def test_a_single_mark_falls_back_to_the_next_rule() -> None:
    events = [tf.step_mark(0, 0.0), tf.op("aten::mm", 5.0, 10.0)]
    bounds = step_bounds(load_trace_dict(tf.trace_dict(events)))
    assert bounds is not None and bounds.source == "span"


def test_the_host_thread_is_the_busiest_cpu_thread_or_the_one_asked_for() -> None:
    events = [
        tf.op("aten::mm", 0.0, 50.0, tid=1),
        tf.op("aten::mm", 0.0, 20.0, tid=2),
        tf.op("aten::add", 1.0, 18.0, tid=2),  # nested: must not double the thread's time
        tf.op("aten::add", 30.0, 10.0, tid=2),
    ]
    trace = load_trace_dict(tf.trace_dict(events))
    auto = phase_breakdown(trace)
    asked = phase_breakdown(trace, host_tid=2)
    assert auto is not None and asked is not None
    assert auto.steps[0].duration_us == 50.0
    assert asked.steps[0].duration_us == 40.0 and asked.phase_total_us["other"] == 30.0
    assert phase_breakdown(trace, host_tid=999) is None
    assert phase_breakdown(load_trace_dict({"traceEvents": []})) is None


def test_phase_at_names_the_phase_the_host_was_in() -> None:
    locate = phase_at(load_trace_dict(tf.phase_scenario()))
    assert locate is not None
    ts = np.array([1.0, 4.0, 12.0, 20.0, 42.0, 60.0, 77.0, 94.0, 177.0, 185.0])
    assert [PHASES[i] for i in locate(ts)] == [
        "data", "copy", "unattributed", "forward", "sync", "backward", "optimizer", "other",
        "backward", "unattributed",
    ]  # fmt: skip


def test_reference_gpu_traces_split_into_their_profiler_steps(reference_traces: Path) -> None:
    trace = load_trace(reference_traces / "v100_world1_rank0.json.gz")
    result = phase_breakdown(trace)
    assert result is not None
    assert [s.index for s in result.steps] == [101, 102, 103, 104, 105]
    for step in result.steps:
        assert sum(round(v * 1000) for v in step.phase_us.values()) == round(
            step.duration_us * 1000
        )
    # Backward runs on the autograd thread on CUDA; it still shows as backward.
    backward = result.share("backward")
    assert backward is not None and backward > 0.3
    assert result.phase_total_us["unattributed"] < 0.05 * result.total_us

    cpu = phase_breakdown(load_trace(reference_traces / "cpu_only_rank34.json.gz"))
    assert cpu is not None and "copy" not in cpu.measured and len(cpu.steps) == 1


def _train_with_profiler(trace_path: Path, iterations: int) -> None:
    """A small MLP loop with the ranges the step clock writes: marks, forward and backward."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    # Wide enough that operators, not the Python between them, fill the step (as in training).
    batch, width = 128, 1024
    data = TensorDataset(
        torch.randn(iterations * batch, width), torch.randint(0, 4, (iterations * batch,))
    )
    loader = DataLoader(data, batch_size=batch, shuffle=True)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 4)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    threads = torch.get_num_threads()
    # One intra-op thread: on a shared 2-core machine a parallel op waits for a descheduled
    # helper thread, and such stalls are noise, not the loop's behaviour.
    torch.set_num_threads(1)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i, (x, y) in enumerate(loader):
                with record_function(f"{markers.STEP_MARK_PREFIX}{i}"):
                    pass
                with record_function(f"{markers.FORWARD_PREFIX}Sequential"):
                    out = model(x)
                loss = loss_fn(out, y)
                opt.zero_grad()
                with record_function(markers.BACKWARD):
                    loss.backward()
                opt.step()
        prof.export_chrome_trace(str(trace_path))
    finally:
        torch.set_num_threads(threads)


def test_a_real_cpu_training_loop_is_split_into_its_phases(tmp_path: Path) -> None:
    iterations = 12
    path = tmp_path / "mlp.json"
    _train_with_profiler(path, iterations)
    trace = load_trace(path)
    result = phase_breakdown(trace)
    assert result is not None
    assert len(result.steps) == iterations - 1  # N marks -> N-1 complete steps
    assert [s.index for s in result.steps] == list(range(iterations - 1))
    assert "copy" not in result.measured  # CPU-only: no device to copy to
    for phase in ("data", "forward", "backward", "optimizer"):
        assert result.phase_total_us[phase] > 0, phase
    # Median over steps: a step in which the shared machine preempted the thread has time no
    # tool could attribute; the typical step must be >= 95% attributed.
    shares = sorted(s.phase_us["unattributed"] / s.duration_us for s in result.steps)
    assert shares[len(shares) // 2] <= 0.05
    for step in result.steps:
        assert sum(round(v * 1000) for v in step.phase_us.values()) == round(
            step.duration_us * 1000
        )


def _loop_with_profiler(
    trace_path: Path, iterations: int, update: str, *, our_marks: bool = True, width: int = 256
) -> None:
    """A small MLP loop whose update is ``update``: "closure" (``opt.step(closure)``),
    "lbfgs", "manual_data" (``p.data.add_``) or "manual_no_grad" (``p -= lr * p.grad``).

    ``our_marks``: the ranges the step clock writes (marks, forward, backward); without them
    the loop is what a user's own profiler records (``ProfilerStep#`` ranges only).
    """
    torch = pytest.importorskip("torch")
    from contextlib import nullcontext

    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    batch = 64
    xs = torch.randn(iterations, batch, width)
    ys = torch.randn(iterations, batch, 1)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 1)
    )
    params = list(model.parameters())
    opt: Any = None
    if update == "closure":
        opt = torch.optim.SGD(params, lr=0.01)
    elif update == "lbfgs":
        opt = torch.optim.LBFGS(params, lr=0.1, max_iter=3)

    def mark(name: str) -> Any:
        return record_function(name) if our_marks else nullcontext()

    def forward_backward(x: Any, y: Any) -> Any:
        with mark(f"{markers.FORWARD_PREFIX}Sequential"):
            out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        with mark(markers.BACKWARD):
            loss.backward()
        return loss

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see _train_with_profiler
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(iterations):
                if our_marks:
                    with record_function(f"{markers.STEP_MARK_PREFIX}{i}"):
                        pass
                step = (
                    nullcontext()
                    if our_marks
                    else record_function(f"{markers.PROFILER_STEP_PREFIX}{i}")
                )
                with step:
                    x, y = xs[i], ys[i]
                    if opt is not None:

                        def closure(x: Any = x, y: Any = y) -> Any:
                            opt.zero_grad()
                            return forward_backward(x, y)

                        opt.step(closure)
                        continue
                    forward_backward(x, y)
                    if update == "manual_data":
                        for p in params:
                            p.data.add_(p.grad, alpha=-0.01)
                            p.grad.zero_()
                    else:
                        with torch.no_grad():
                            for p in params:
                                p -= 0.01 * p.grad
                                p.grad.zero_()
        prof.export_chrome_trace(str(trace_path))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("our_marks", [True, False], ids=["step_clock_ranges", "user_profiler"])
@pytest.mark.parametrize("update", ["closure", "lbfgs"])
def test_forward_and_backward_inside_a_closure_optimizer_stay_forward_and_backward(
    tmp_path: Path, update: str, our_marks: bool
) -> None:
    path = tmp_path / "closure.json"
    _loop_with_profiler(path, 8, update, our_marks=our_marks)
    result = phase_breakdown(load_trace(path))
    assert result is not None and len(result.steps) >= 6
    forward, backward, optimizer = (result.share(p) for p in ("forward", "backward", "optimizer"))
    assert forward is not None and backward is not None and optimizer is not None
    # (LBFGS's own work, dot products and history, is real optimizer time; its closure's is not.)
    assert forward > 0 and backward > 0 and optimizer > 0
    # Every model op of the closure reads forward or backward, none optimizer.
    trace = load_trace(path)
    locate = phase_at(trace)
    assert locate is not None

    def phases_of(mask: Any) -> set[str]:
        rows = np.flatnonzero(mask)
        return {PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)}

    assert phases_of(trace.name_mask(names=("aten::linear", "aten::mse_loss"))) == {"forward"}
    assert phases_of(trace.name_mask(prefix=markers.AUTOGRAD_PREFIX)) == {"backward"}
    if update == "closure":  # SGD's per-parameter update stays the optimizer's
        assert "optimizer" in phases_of(trace.name_mask(names=("aten::add_",)))
    for step in result.steps:
        assert sum(round(v * 1000) for v in step.phase_us.values()) == round(
            step.duration_us * 1000
        )


@pytest.mark.parametrize("update", ["manual_data", "manual_no_grad"])
def test_a_hand_written_update_is_the_optimizer_phase(tmp_path: Path, update: str) -> None:
    path = tmp_path / "manual.json"
    _loop_with_profiler(path, 10, update, width=1024)  # steps of ms: ops, not glue, fill them
    trace = load_trace(path)
    result = phase_breakdown(trace)
    assert result is not None and len(result.steps) == 9
    # The mechanism, not a share (how long an add_ takes next to a matmul moves with the
    # machine's load): every op of the hand-written update, 4 parameters x 10 steps, is the
    # optimizer's; the same op name inside autograd's ranges stays backward.
    locate = phase_at(trace)
    assert locate is not None
    update_op = "aten::add_" if update == "manual_data" else "aten::sub_"
    rows = np.flatnonzero(trace.name_mask(names=(update_op, "aten::zero_")))
    phases = [PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)]
    assert phases.count("optimizer") == 2 * 4 * 10, phases
    assert set(phases) <= {"optimizer", "backward"}, phases
    assert result.phase_total_us["optimizer"] > 0
    # Glue between ops is small on a step the scheduler left alone (the best one: a busy
    # core preempts the others at random places).
    best = min(s.phase_us["unattributed"] / s.duration_us for s in result.steps)
    assert best <= 0.05, dict(result.phase_total_us)
    for phase in ("forward", "backward"):
        assert result.phase_total_us[phase] > 0, phase


def test_an_in_place_op_in_the_next_forward_is_not_an_update() -> None:
    # ProfilerStep ranges, no forward marks (a user's trace): backward, the update, then the
    # next step's forward starts with an inplace ReLU.
    events = [
        tf.annotation(f"{markers.PROFILER_STEP_PREFIX}1", 0.0, 50.0),
        tf.annotation(f"{markers.PROFILER_STEP_PREFIX}2", 50.0, 50.0),
        tf.op(f"{markers.AUTOGRAD_PREFIX}: AddmmBackward0", 10.0, 20.0),
        tf.op("aten::mul", 32.0, 2.0),
        tf.op("aten::sub_", 36.0, 2.0),
        tf.op("aten::zero_", 40.0, 1.0),
        tf.op("aten::addmm", 52.0, 10.0),
        tf.op("aten::relu_", 64.0, 2.0),
        tf.op(f"{markers.AUTOGRAD_PREFIX}: AddmmBackward0", 70.0, 20.0),
    ]
    result = phase_breakdown(load_trace_dict(tf.trace_dict(events)))
    assert result is not None
    first, second = result.steps
    assert first.phase_us["optimizer"] == 11.0  # 30 -> 41: the update and the Python between
    assert second.phase_us["optimizer"] == 0.0
    # No forward ranges: the forward is inferred, from the step's start to its backward.
    assert second.phase_us["forward"] == 20.0  # addmm + relu_ and the Python around them
    assert second.phase_us["other"] == 0.0


def test_an_optimizer_range_minus_the_closure_inside_it() -> None:
    events = [
        tf.step_mark(0, 0.0),
        tf.step_mark(1, 100.0),
        tf.annotation(f"{markers.OPTIMIZER_STEP_PREFIX}LBFGS.step", 0.0, 100.0),
        tf.annotation(f"{markers.OPTIMIZER_ZERO_GRAD_PREFIX}LBFGS.zero_grad", 2.0, 3.0),
        tf.annotation(f"{markers.FORWARD_PREFIX}Net", 10.0, 30.0),
        tf.op("aten::mse_loss", 41.0, 4.0) | {"args": {"Sequence number": 9}},
        tf.annotation(markers.BACKWARD, 50.0, 30.0),
        tf.op("aten::add_", 85.0, 10.0),
    ]
    result = phase_breakdown(load_trace_dict(tf.trace_dict(events)))
    assert result is not None
    assert result.steps[0].phase_us == {
        "data": 0.0, "forward": 40.0, "backward": 30.0, "optimizer": 30.0, "sync": 0.0,
        "other": 0.0, "unattributed": 0.0,
    }  # fmt: skip


def test_a_closure_range_is_the_model_and_the_framework_never_the_update() -> None:
    """The step clock's closure range (markers.CLOSURE) inside Optimizer.step: its forward runs
    from its first model operator (the closure's Python before it, here its zero_grad, is other:
    f0f2b4c) to its backward; a hook's grad-mode ops after the backward (Lightning's callback logging
    gradient norms) are other, as the step clock counts them, not the forward the ops alone
    suggest nor the update. Only what step() did outside the closure is the optimizer's."""
    events = [
        tf.step_mark(0, 0.0),
        tf.step_mark(1, 200.0),
        tf.annotation(f"{markers.OPTIMIZER_STEP_PREFIX}Adam.step", 0.0, 200.0),
        tf.annotation(markers.CLOSURE, 5.0, 175.0),
        tf.annotation(f"{markers.OPTIMIZER_ZERO_GRAD_PREFIX}Adam.zero_grad", 6.0, 3.0),
        tf.op("aten::addmm", 10.0, 30.0) | {"args": {"Sequence number": 1}},
        tf.op("aten::mse_loss", 41.0, 4.0) | {"args": {"Sequence number": 2}},
        tf.annotation(markers.BACKWARD, 50.0, 30.0),
        # The callback: p.grad.norm() under grad mode, 14 times in the real program.
        tf.op("aten::linalg_vector_norm", 90.0, 40.0) | {"args": {"Sequence number": 3}},
        tf.op("aten::linalg_vector_norm", 140.0, 40.0) | {"args": {"Sequence number": 4}},
        tf.op("aten::add_", 185.0, 10.0),
    ]
    result = phase_breakdown(load_trace_dict(tf.trace_dict(events)))
    assert result is not None
    assert result.steps[0].phase_us == {
        "data": 0.0, "forward": 40.0, "backward": 30.0, "optimizer": 25.0, "sync": 0.0,
        "other": 105.0, "unattributed": 0.0,
    }  # fmt: skip


def test_thread_pairs_and_cut_points_match_numpys_unique():
    """The packed (pid, tid) keys and the one-sort unique give what ``np.unique`` gives (the
    pairs in its row order), ids past 32 bits included (those take the row-wise path)."""
    from gpu_notebook.analysis.phases import _sorted_unique, thread_pairs

    rng = np.random.default_rng(0)
    for wide in (False, True):
        pid = rng.integers(-3, 5, 1000)
        tid = rng.integers(0, 7, 1000)
        if wide:
            tid[::7] += 2**40
        rows = np.unique(np.stack([pid, tid], axis=1), axis=0).tolist()
        assert thread_pairs(pid, tid) == [tuple(r) for r in rows]
    cuts = rng.integers(0, 50, 500)
    assert _sorted_unique(cuts).tolist() == np.unique(cuts).tolist()
    assert _sorted_unique(cuts[:0]).size == 0


def test_a_traces_phase_breakdown_and_gpu_timeline_share_one_locator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The locator's covers are the costly part of both (~0.1 s on a million events): one
    trace and its steps build them once; another trace builds its own."""
    from gpu_notebook.analysis import phases
    from gpu_notebook.analysis.analyze import trace_figures

    built: list[int] = []

    class Counted(phases.PhaseLocator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(phases, "PhaseLocator", Counted)
    doc = tf.gpu_scenario()
    trace = load_trace_dict(doc)
    first = trace_figures(trace)
    assert first[0] is not None and first[1] is not None
    assert len(built) == 1
    again = load_trace_dict(doc)
    assert trace_figures(again) == first
    assert len(built) == 2
