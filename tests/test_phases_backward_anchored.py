"""The forward of a loop whose steps end at its backward pass is forward, not "other".

Seen (issue 26, unseen round 6): DP-SGD by hand, per-sample gradients from
``vmap(grad(loss_fn))`` with the parameters updated by hand (no optimizer, no DataLoader): the
step clock anchors on the backward pass (``torch.autograd.grad``), so each step's mark sits at
its backward and the forward that builds the next graph runs at the end of the step before.
The trace's split read forward 0.4%, other 80%, while the hot lines were mostly forward. Manual
SGD (``p -= lr * p.grad`` under no_grad) and ``torch.autograd.grad`` loops anchor the same way.

Real torch.profiler runs of small CPU loops with the marks where the step clock writes them for
a backward anchor: a step mark, then the backward range, at each backward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_notebook import markers
from gpu_notebook.analysis.phases import phase_at, phase_breakdown, step_bounds
from gpu_notebook.records import PHASES
from gpu_notebook.traces import load_trace
from gpu_notebook.traces.kineto import Trace

torch = pytest.importorskip("torch")


@contextmanager
def _backward_marks(prof: Any, marks: int) -> Iterator[None]:
    """``torch.autograd.backward`` and ``torch.autograd.grad`` write what the step clock writes
    when it anchors on them: a step mark at the call, the backward range around it. As the
    clock's window does, the trace stops at its last mark, before that mark's pass."""
    from torch.profiler import record_function

    count = [0]

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if count[0] >= marks:
                return original(*args, **kwargs)
            with record_function(f"{markers.STEP_MARK_PREFIX}{count[0]}"):
                pass
            count[0] += 1
            if count[0] == marks:
                prof.stop()
                return original(*args, **kwargs)
            with record_function(markers.BACKWARD):
                return original(*args, **kwargs)

        return call

    saved = torch.autograd.backward, torch.autograd.grad
    torch.autograd.backward, torch.autograd.grad = wrap(saved[0]), wrap(saved[1])
    try:
        yield
    finally:
        torch.autograd.backward, torch.autograd.grad = saved


def _mlp() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 4))


def _manual_sgd(steps: int) -> None:
    model = _mlp()
    xs, ys = torch.randn(steps, 32, 64), torch.randn(steps, 32, 4)
    for i in range(steps):
        loss = torch.nn.functional.mse_loss(model(xs[i]), ys[i])
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
                p.grad = None


def _autograd_grad(steps: int) -> None:
    model = _mlp()
    params = list(model.parameters())
    xs, ys = torch.randn(steps, 32, 64), torch.randn(steps, 32, 4)
    for i in range(steps):
        loss = torch.nn.functional.mse_loss(model(xs[i]), ys[i])
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(0.01 * g)


def _vmap_per_sample(steps: int) -> None:
    from torch.func import functional_call, grad, vmap

    model = _mlp()
    params = {k: v.detach() for k, v in model.named_parameters()}
    xs, ys = torch.randn(256, 64), torch.randn(256, 4)

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        out = functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.mse_loss(out, y.unsqueeze(0))

    per_sample = vmap(grad(loss_fn), in_dims=(None, 0, 0))
    for _ in range(steps):
        idx = torch.randint(0, len(xs), (16,))
        g = per_sample(params, xs[idx], ys[idx])
        # Not under no_grad: these ops are numbered by autograd too, and make no graph.
        params = {k: v - 0.01 * g[k].mean(0) for k, v in params.items()}


def _profiled(tmp_path: Path, loop: Callable[[int], None], marks: int) -> Trace:
    from torch.profiler import ProfilerActivity, profile

    path = tmp_path / "trace.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one host thread: the ops, not a pool's spin, fill the steps
    try:
        loop(2)  # warm-up outside the trace
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.start()
        with _backward_marks(prof, marks):
            loop(marks + 2)
        prof.export_chrome_trace(str(path))
    finally:
        torch.set_num_threads(threads)
    return load_trace(path)


@pytest.mark.parametrize(
    "loop", [_manual_sgd, _autograd_grad, _vmap_per_sample], ids=lambda f: f.__name__[1:]
)
def test_the_forward_of_each_step_is_forward_where_the_backward_ends_the_step(
    tmp_path: Path, loop: Callable[[int], None]
) -> None:
    trace = _profiled(tmp_path, loop, 8)
    bounds = step_bounds(trace)
    assert bounds is not None and bounds.source == "marks" and len(bounds.start_us) == 7
    # The trace ends at the last mark: the forward before it, whose pass the trace does not
    # hold, is forward too.
    assert bounds.end_us[-1] >= trace.end_us[trace.name_mask(names=("aten::linear",))].max()
    locate = phase_at(trace)
    assert locate is not None
    # The model's forward ops inside the marked steps (the first forward runs before the
    # first mark): one linear per layer per step, each one forward.
    first, last = bounds.span_us
    rows = np.flatnonzero(
        trace.name_mask(names=("aten::linear", "aten::mse_loss"))
        & (trace.ts_us > first)
        & (trace.ts_us < last)
    )
    assert rows.size >= 7 * 3
    phases = [PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)]
    assert set(phases) == {"forward"}, phases
    # Autograd's nodes stay backward.
    rows = np.flatnonzero(trace.name_mask(prefix=markers.AUTOGRAD_PREFIX))
    assert {PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)} == {"backward"}
    result = phase_breakdown(trace)
    assert result is not None
    assert all(s.phase_us["forward"] > 0 for s in result.steps)


def test_a_hand_written_update_after_the_backward_stays_the_optimizer(tmp_path: Path) -> None:
    trace = _profiled(tmp_path, _manual_sgd, 8)
    bounds = step_bounds(trace)
    locate = phase_at(trace)
    assert bounds is not None and locate is not None
    first, last = bounds.span_us
    rows = np.flatnonzero(
        trace.name_mask(names=("aten::sub_",)) & (trace.ts_us > first) & (trace.ts_us < last)
    )
    assert rows.size == 7 * 4
    assert {PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)} == {"optimizer"}


def test_every_micro_batchs_forward_is_forward_under_gradient_accumulation(
    tmp_path: Path,
) -> None:
    """Steps the optimizer ends, three forward/backward passes each: the forward of the second
    and third pass ran after a backward in the same step and read "other" on main."""
    from torch.profiler import ProfilerActivity, profile, record_function

    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xs, ys = torch.randn(24, 32, 64), torch.randn(24, 32, 4)
    path = tmp_path / "trace.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(8):
                with record_function(f"{markers.STEP_MARK_PREFIX}{i}"):
                    pass
                for j in range(3):
                    loss = torch.nn.functional.mse_loss(model(xs[i * 3 + j]), ys[i * 3 + j])
                    with record_function(markers.BACKWARD):
                        loss.backward()
                with record_function(f"{markers.OPTIMIZER_STEP_PREFIX}SGD.step"):
                    opt.step()
                opt.zero_grad()
            with record_function(f"{markers.STEP_MARK_PREFIX}8"):
                pass
        prof.export_chrome_trace(str(path))
    finally:
        torch.set_num_threads(threads)
    trace = load_trace(path)
    locate = phase_at(trace)
    assert locate is not None

    def phases_of(names: tuple[str, ...]) -> list[str]:
        rows = np.flatnonzero(trace.name_mask(names=names))
        return [PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)]

    forward = phases_of(("aten::linear", "aten::mse_loss"))
    assert len(forward) == 8 * 3 * 3 and set(forward) == {"forward"}, forward
    assert set(phases_of(("aten::add_",))) <= {"backward", "optimizer"}


def test_a_checkpoint_saved_at_the_top_of_the_step_is_not_the_forward(tmp_path: Path) -> None:
    """``torch.save(model.state_dict())`` every step (unseen round 8): ``state_dict`` detaches
    every parameter in grad mode, and autograd numbers those ``detach`` calls, so the forward
    inferred from the step's first numbered op began at the save. On main the save read as
    the forward (57% of the step), and the tiny-ops rule offered torch.compile for it. The
    forward starts at the op that made the backward's first graph node; the save and the
    input's noise before it stay outside."""
    import io

    from torch.profiler import ProfilerActivity, profile, record_function

    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs, ys = torch.randn(32, 64), torch.randn(32, 4)
    path = tmp_path / "trace.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(6):
                with record_function(f"{markers.STEP_MARK_PREFIX}{i}"):
                    pass
                with record_function("test::save"):
                    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, io.BytesIO())
                x = xs + 0.01 * torch.randn_like(xs)  # numbered, no node: input, not model
                loss = torch.nn.functional.mse_loss(model(x), ys)
                opt.zero_grad()
                with record_function(markers.BACKWARD):
                    loss.backward()
                with record_function(f"{markers.OPTIMIZER_STEP_PREFIX}Adam.step"):
                    opt.step()
            with record_function(f"{markers.STEP_MARK_PREFIX}6"):
                pass
        prof.export_chrome_trace(str(path))
    finally:
        torch.set_num_threads(threads)
    trace = load_trace(path)
    locate = phase_at(trace)
    assert locate is not None
    saves = np.flatnonzero(trace.name_mask(names=("test::save",)))
    assert saves.size == 6
    # The save's numbered ops exist (the reason it read as forward), and none is forward now.
    inside = np.flatnonzero(
        trace.category_mask("cpu_op")
        & (trace.sequence >= 0)
        & (trace.ts_us >= trace.ts_us[saves].min())
    )
    in_save = [
        r
        for r in inside.tolist()
        if any(trace.ts_us[s] <= trace.ts_us[r] <= trace.end_us[s] for s in saves.tolist())
    ]
    assert in_save
    assert {PHASES[i] for i in locate(trace.ts_us[in_save] + trace.dur_us[in_save] / 2)} <= {
        "other",
        "unattributed",
    }
    rows = np.flatnonzero(trace.name_mask(names=("aten::linear", "aten::mse_loss")))
    model_phases = [PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)]
    assert len(model_phases) == 6 * 3 and set(model_phases) == {"forward"}, model_phases
    result = phase_breakdown(trace)
    assert result is not None
    save_us = float(trace.dur_us[saves].sum())
    forward_us = sum(s.phase_us["forward"] for s in result.steps)
    assert forward_us < sum(s.duration_us for s in result.steps) - save_us
