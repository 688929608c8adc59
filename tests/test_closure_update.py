"""Issue 26: a closure's calls inside ``optimizer.step(closure)`` are not the optimizer's update.

LBFGS, Lightning's automatic optimization and any loop that hands ``step`` a closure run
forward, backward and the framework's hooks (Lightning's ``on_before_optimizer_step``
callbacks, the closure's own logging) inside ``step``. The update is what ``step`` did outside
the closure's calls; the closure's time goes to the phases it holds, the rest of it to the
step's other time. Mechanisms on a real loop under the real step clock: the closure sleeps a
known time after its backward, which no phase may hold (each phase's figure is then bounded by
the step less that sleep, whatever the machine's load); its CPU-heavy Python is not the
optimizer class's CPU time.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpu_notebook.records import StepClockRecord

SLEEP_S = 0.004


def _spin(n: int = 20_000) -> int:
    """Pure Python work on the loop thread (CPU time, not a sleep)."""
    total = 0
    for i in range(n):
        total += i * i
    return total


def _train(
    opt_kind: str, *, steps: int = 14, lean_after: int | None = None
) -> tuple[StepClockRecord, list[int], list[int]]:
    """A real tiny loop of ``opt.step(closure)`` under the real step clock. The closure, after
    its backward, sleeps ``SLEEP_S`` and spins Python. Returns the record, the closure's calls
    in each step and the CPU ns its spins took in all."""
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt: Any = (
        torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
        if opt_kind == "lbfgs"
        else torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    )
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    calls: list[int] = []
    spun = [0]

    def closure() -> Any:
        calls[-1] += 1
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        time.sleep(SLEEP_S)  # a hook's logging: neither forward, backward nor the update
        cpu0 = time.thread_time_ns()
        _spin()
        spun[0] += time.thread_time_ns() - cpu0
        return loss

    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for i in range(steps):
            if i == lean_after:
                clock.lean()
            calls.append(0)
            if opt_kind == "positional":
                opt.step(closure)
            else:
                opt.step(closure=closure)
    finally:
        clock.uninstall()
    return clock.record(), calls, spun


@pytest.mark.parametrize("opt_kind", ["sgd", "positional", "lbfgs"])
def test_the_closures_calls_are_not_the_optimizers_time(opt_kind: str) -> None:
    record, calls, _ = _train("sgd" if opt_kind == "positional" else opt_kind)
    assert record.anchor == "optimizer"
    timed = [s for s in record.steps if s.timed][1:]  # the first: the anchor's change
    assert len(timed) >= 8
    for s in timed:
        slept = calls[s.index] * SLEEP_S
        # The sleeps (one per closure call: LBFGS calls it up to 4 times a step) lie in no
        # phase: the update's time leaves them out, so do forward and backward.
        assert s.optimizer_s <= s.duration_s - slept, (s, calls[s.index])
        assert s.data_s + s.forward_s + s.backward_s + s.optimizer_s <= s.duration_s - slept
        assert s.forward_s > 0 and s.backward_s > 0 and s.optimizer_s > 0


@pytest.mark.parametrize("opt_kind", ["sgd", "lbfgs"])
def test_lean_closure_steps_keep_the_update_alone(opt_kind: str) -> None:
    """Lean steps time no forward or backward; the closure's calls still come off the step()."""
    record, calls, _ = _train(opt_kind, steps=16, lean_after=4)
    lean = [s for s in record.steps if not s.timed]
    assert len(lean) >= 8 and record.lean_optimizer
    for s in lean:
        assert 0 < s.optimizer_s <= s.duration_s - calls[s.index] * SLEEP_S, s


def test_the_optimizer_classes_cpu_time_leaves_the_closure_out() -> None:
    """The per-class clock (the fused bound's split) times closure steps too, less the
    closure's calls: the closure's spins are not SGD's update."""
    record, _, spun = _train("sgd", steps=16)
    assert "SGD" in record.optimizer_cpu
    cpu_s, n = record.optimizer_cpu["SGD"]
    assert n >= 8
    # Each step spun ~1 ms of Python; SGD's own step on three tiny tensors is far under that.
    spun_per_step_s = spun[0] / 1e9 / 16
    assert cpu_s / n < spun_per_step_s / 2, (cpu_s / n, spun_per_step_s)


def test_a_closure_handed_on_to_an_inner_optimizer_is_timed_once() -> None:
    """A wrapper optimizer whose step calls its inner optimizer's step with the same closure:
    the closure is wrapped once, each call counted once (the update stays positive)."""
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    model = torch.nn.Linear(4, 1)
    inner = torch.optim.SGD(model.parameters(), lr=0.01)

    class Wrapper(torch.optim.Optimizer):
        def __init__(self) -> None:
            super().__init__(model.parameters(), {})

        def step(self, closure: Any = None) -> Any:
            return inner.step(closure)

    outer = Wrapper()
    x = torch.randn(4, 4)
    seen: list[Any] = []

    def closure() -> Any:
        inner.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        time.sleep(SLEEP_S)
        return loss

    def hook(opt: Any, args: Any, kwargs: Any) -> None:
        seen.append(args[1] if len(args) > 1 else kwargs.get("closure"))

    handle = inner.register_step_pre_hook(hook)
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        for _ in range(10):
            outer.step(closure)
    finally:
        clock.uninstall()
        handle.remove()
    record = clock.record()
    # The inner optimizer got our one wrapper (of the user's closure), not a wrapper of it.
    assert all(getattr(c, "__wrapped__", None) is closure for c in seen)
    # The first steps learn which optimizer ends the step (both step each iteration).
    for s in record.steps[-5:]:
        assert 0 <= s.optimizer_s <= s.duration_s - SLEEP_S, s


def test_lightning_callbacks_before_the_optimizer_step_are_not_the_update() -> None:
    """Lightning runs training_step, backward and ``on_before_optimizer_step`` (a callback
    logging every gradient's norm: issue 26's lightning_norm_callback) inside
    ``optimizer.step(closure)``: the callback's time is not Adam's update."""
    pytest.importorskip("lightning")
    import logging

    import lightning as L
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpu_notebook.capture.stepclock import StepClock

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class SlowCallback(L.Callback):
        def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
            time.sleep(SLEEP_S)

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(8, 2)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    ds = TensorDataset(torch.randn(96, 8), torch.randint(0, 2, (96,)))
    trainer = L.Trainer(max_steps=12, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0,
                        callbacks=[SlowCallback()])  # fmt: skip
    clock = StepClock(time.perf_counter_ns())
    clock.install()
    try:
        trainer.fit(Net(), DataLoader(ds, batch_size=8))
    finally:
        clock.uninstall()
    record = clock.record()
    assert record.anchor == "optimizer"
    steps = [s for s in record.steps if s.timed][1:]
    assert len(steps) >= 8
    for s in steps:
        assert 0 < s.optimizer_s <= s.duration_s - SLEEP_S, s
        assert s.forward_s > 0 and s.backward_s > 0
    assert "Adam" in record.optimizer_cpu


def test_the_traces_phases_read_the_closures_ranges_as_the_step_clock_does(tmp_path) -> None:
    """While the profiler records, each closure call is a range in the trace: the closure's
    gradient norms after its backward (a callback's logging) are other, its model ops forward
    and backward, and only the update outside it the optimizer's."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    from gpu_notebook.analysis.phases import phase_at
    from gpu_notebook.capture.stepclock import StepClock
    from gpu_notebook.records import PHASES
    from gpu_notebook.traces import load_trace

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=False)
    x, y = torch.randn(16, 32), torch.randn(16, 1)

    def closure() -> Any:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():  # grad mode on: autograd numbers these ops
            p.grad.norm().mul(2.0)
        return loss

    clock = StepClock(time.perf_counter_ns())
    clock.install()
    path = tmp_path / "closure.json"
    try:
        for _ in range(3):
            opt.step(closure)
        clock.annotate = True
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(4):
                opt.step(closure)
        prof.export_chrome_trace(str(path))
    finally:
        clock.annotate = False
        clock.uninstall()
    trace = load_trace(path)
    locate = phase_at(trace)
    assert locate is not None

    def phases_of(*names: str) -> list[str]:
        rows = np.flatnonzero(trace.name_mask(names=names))
        return [PHASES[i] for i in locate(trace.ts_us[rows] + trace.dur_us[rows] / 2)]

    assert len(phases_of("gpucheck::closure")) == 4
    norms = phases_of("aten::linalg_vector_norm")
    assert len(norms) == 4 * 4 and set(norms) == {"other"}, norms
    assert set(phases_of("aten::addmm")) == {"forward"}
    assert "optimizer" in set(phases_of("aten::add_", "aten::mul_"))


def test_a_sampled_stack_inside_the_closure_is_read_under_it() -> None:
    """The sampler's stacks: under ``Optimizer.step`` and the step clock's closure wrapper, a
    module's forward is forward and a callback's logging no phase; the update itself (no
    closure frame) stays the optimizer's."""
    import inspect

    from gpu_notebook.capture import stepclock
    from gpu_notebook.capture.stacks import infer_phase
    from gpu_notebook.records import CodeRef

    wrapper = stepclock.StepClock._wrap_closure(stepclock.StepClock(0), print).__code__
    torch_dir = "/site-packages/torch/"
    step = [
        CodeRef("/home/u/train.py", "<module>", 1),
        CodeRef(
            f"{torch_dir}optim/optimizer.py", "Optimizer.profile_hook_step.<locals>.wrapper", 1
        ),
        CodeRef(f"{torch_dir}optim/adam.py", "Adam.step", 1),
    ]
    ours = CodeRef(wrapper.co_filename, getattr(wrapper, "co_qualname", wrapper.co_name), 1)
    assert inspect.getsourcefile(stepclock).endswith(ours.filename.rsplit("/", 1)[-1])
    callback = CodeRef("/home/u/train.py", "GradNormLogger.on_before_optimizer_step", 1)
    module = CodeRef(f"{torch_dir}nn/modules/module.py", "Module._call_impl", 1)
    assert infer_phase(step) == "optimizer"
    assert infer_phase([*step, ours, callback]) is None
    assert infer_phase([*step, ours, CodeRef("/home/u/train.py", "training_step", 1), module]) == (
        "forward"
    )


def _lbfgs_loop(step_of: Any, measured: bool) -> tuple[list[Any], list[int], Any]:
    """LBFGS with a closure, its ``step`` replaced by ``step_of(opt)``: the parameters after, the
    closure's calls in each step and the step clock (None: plain)."""
    import torch

    from gpu_notebook.capture.stepclock import StepClock

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
    opt.step = step_of(opt)  # type: ignore[method-assign]
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    calls: list[int] = []

    def closure() -> Any:
        calls[-1] += 1
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        time.sleep(SLEEP_S)
        return loss

    clock = StepClock(time.perf_counter_ns()) if measured else None
    if clock is not None:
        clock.install()
    try:
        for _ in range(12):
            calls.append(0)
            opt.step(closure)
    finally:
        if clock is not None:
            clock.uninstall()
    return [p.detach().clone() for p in model.parameters()], calls, clock


def test_a_step_the_user_wrapped_gets_its_closure_and_the_closure_is_still_timed() -> None:
    """``opt.step`` replaced by a ``functools.wraps`` wrapper (a framework's, the user's): the
    user's closure reaches it, LBFGS calls it as often and ends on the same bits as without
    us, and its calls are still off the update (the hooks run inside the wrapped step)."""
    import functools

    handed: list[Any] = []

    def wrapped(opt: Any) -> Any:
        inner = opt.step

        @functools.wraps(inner)
        def step(closure: Any) -> Any:
            handed.append(closure)
            return inner(closure)

        return step

    plain, plain_calls, _ = _lbfgs_loop(wrapped, measured=False)
    measured, calls, clock = _lbfgs_loop(wrapped, measured=True)
    assert calls == plain_calls and all(map(torch_equal, plain, measured))
    assert not any(getattr(c, "__wrapped__", None) for c in handed)  # the user's own closure
    record = clock.record()
    assert record.anchor == "optimizer" and clock.step_count == 12
    timed = [s for s in record.steps if s.timed][1:]
    assert len(timed) >= 6
    for s in timed:
        assert 0 < s.optimizer_s <= s.duration_s - calls[s.index] * SLEEP_S, (s, calls[s.index])


def torch_equal(a: Any, b: Any) -> bool:
    import torch

    return bool(torch.equal(a, b))


_COMPILED_STEP_CHILD = """
import json, sys, time, torch
from torch._dynamo.utils import counters
from gpu_notebook.capture.stepclock import StepClock
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
params = list(model.parameters())
opt = (torch.optim.LBFGS(params, lr=0.1, max_iter=3) if sys.argv[2] == "lbfgs"
       else torch.optim.SGD(params, lr=0.01, momentum=0.9))
opt.step = torch.compile(opt.step, backend="eager")
x, y = torch.randn(16, 8), torch.randn(16, 1)
calls = [0]
def closure():
    calls[0] += 1
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss
clock = StepClock(time.perf_counter_ns()) if sys.argv[1] == "measured" else None
if clock: clock.install()
for _ in range(6):
    opt.step(closure)
if clock: clock.uninstall()
print(json.dumps({
    "bits": [[v.hex() for v in p.detach().flatten().tolist()] for p in params],
    "calls": calls[0],
    "dynamo": {k: dict(counters[k]) for k in ("frames", "graph_break", "stats")},
}, sort_keys=True))
"""


@pytest.mark.parametrize("opt_kind", ["sgd", "lbfgs"])
def test_a_compiled_step_with_a_closure_runs_as_plain(opt_kind: str) -> None:
    """``opt.step = torch.compile(opt.step)`` called with a closure (Dynamo breaks its graph at
    the closure's backward; LBFGS's step is one Dynamo never traces): the closure is called as
    often, Dynamo compiles the same frames and breaks as often, the parameters end on the same
    bits, measured or not. In a fresh interpreter each: Dynamo's counters are per process."""
    plain = _child_json(_COMPILED_STEP_CHILD, "plain", opt_kind)
    measured = _child_json(_COMPILED_STEP_CHILD, "measured", opt_kind)
    assert plain["calls"] >= 6 and plain["dynamo"]["frames"]
    assert measured == plain


_COMPILED_CLOSURE_CHILD = """
import json, sys, time, torch
from gpu_notebook.capture.stepclock import StepClock
what, opt_kind = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
params = list(model.parameters())
opt = (torch.optim.LBFGS(params, lr=0.1, max_iter=3) if opt_kind == "lbfgs"
       else torch.optim.SGD(params, lr=0.01, momentum=0.9))
if what == "model":
    model = torch.compile(model, backend="aot_eager")
if what == "step":
    opt.step = torch.compile(opt.step, backend="eager")
x, y = torch.randn(16, 8), torch.randn(16, 1)
calls = [0]
def closure():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss
if what == "closure":
    closure = torch.compile(closure, backend="aot_eager")
def counted():
    calls[0] += 1
    return closure()
clock = StepClock(time.perf_counter_ns())
clock.install()
for _ in range(4):
    opt.step(counted)
clock.uninstall()
record = clock.record()
print(json.dumps({"steps": clock.step_count, "anchor": record.anchor, "calls": calls[0],
                  "timed": [[s.forward_s, s.backward_s, s.optimizer_s] for s in record.steps]}))
"""


def _child_json(script: str, *args: str) -> Any:
    """``script`` run in a fresh interpreter with ``args``: its last line of output, as JSON
    (what Dynamo compiled is per process)."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compiled_closure_run(what: str, opt_kind: str) -> Any:
    return _child_json(_COMPILED_CLOSURE_CHILD, what, opt_kind)


@pytest.mark.parametrize("what", ["model", "closure"])
def test_an_lbfgs_step_is_one_step_when_its_model_or_closure_is_compiled(what: str) -> None:
    """A compiled model or a compiled closure (real torch.compile, Dynamo and AOTAutograd on
    the CPU) under LBFGS: 4 optimizer steps of 3 closure calls each are 4 steps, anchored at
    the optimizer as without compile, not the closure's 12 backwards. Dynamo's compile took
    our optimizer hooks out for good (before: 12-13 steps at backward); no frame compiled here
    reads torch's optimizer hook dicts, so they come back once its guards are read. In a fresh
    interpreter each: what Dynamo compiled is per process."""
    run = _compiled_closure_run(what, "lbfgs")
    assert run["calls"] == 12
    assert run["anchor"] == "optimizer" and run["steps"] == 4, run
    # The closure's forward and backward are timed apart from the update, as without compile.
    assert all(f > 0 and b > 0 and o > 0 for f, b, o in run["timed"][1:]), run


def test_a_compiled_lbfgs_step_counts_its_closures_calls_in_one_step() -> None:
    """``opt.step = torch.compile(opt.step)``: the compiled frame guards on torch's optimizer
    hook dicts, so the steps are counted at backward without hooks. LBFGS's 3 closure calls a
    step are one step there, as SGD's one call is: the same count (the last step, open at the
    end, is not counted at a backward anchor)."""
    lbfgs, sgd = _compiled_closure_run("step", "lbfgs"), _compiled_closure_run("step", "sgd")
    assert lbfgs["calls"] == 12 and sgd["calls"] == 4
    assert lbfgs["anchor"] == sgd["anchor"] == "backward"
    assert lbfgs["steps"] == sgd["steps"] == 3, (lbfgs, sgd)


def test_a_long_runs_cpu_clock_is_read_on_few_of_its_steps() -> None:
    """The thread's own CPU clock (the optimizer class's update time, the closure's calls) is
    read on the first steps, then on one step in eight: each read is a system call where a busy
    machine preempts the loop thread, and a stack sample taken while it waits for a core lands
    in our hook (21% of a busy Lightning run's sparse samples, read on every step). The mean
    per step stays the update's own, the closure's spins left out on the steps read."""
    steps = 120
    record, _, spun = _train("sgd", steps=steps)
    cpu_s, n = record.optimizer_cpu["SGD"]
    assert n < steps // 2  # read on every step but the first, it was 119

    from gpu_notebook.capture.stepclock import _CPU_ALL_STEPS, _CPU_EVERY

    # Steps 1 to _CPU_ALL_STEPS - 1 (the first makes the optimizer's state), then every 8th.
    assert n == len([i for i in range(1, steps) if i < _CPU_ALL_STEPS or i % _CPU_EVERY == 0])
    assert cpu_s / n < spun[0] / 1e9 / steps / 2, (cpu_s / n, spun[0] / 1e9 / steps)
