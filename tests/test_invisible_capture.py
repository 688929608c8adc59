"""The capture is invisible to the measured program: its stderr, its tensors, its compilers.

Each test names the class of program that once saw the tool (issue 25): other threads' stderr
lost while our profiler started or stopped, a Tensor subclass's ``__torch_function__`` run by
our batch-size reading, TorchScript and Dynamo seeing our ``torch.autograd.backward`` wrapper.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import ClassVar

import pytest
import torch

from gpu_notebook.capture.profiler import ProfilerWindow
from gpu_notebook.capture.stepclock import StepClock

# ------------------------------------------------------------------ stderr of the process


def _fd2_identity() -> tuple[int, int]:
    st = os.fstat(2)
    return st.st_dev, st.st_ino


def test_our_profiler_start_and_stop_leave_fd2_where_it_points(monkeypatch):
    """fd 2 is the process's, every thread's: it never points elsewhere, even for a moment."""
    seen: list[tuple[str, tuple[int, int]]] = []
    profile = torch.profiler.profile
    for name in ("start", "stop"):
        original = getattr(profile, name)

        def spy(self, _original=original, _name=name):
            seen.append((_name, _fd2_identity()))
            return _original(self)

        monkeypatch.setattr(profile, name, spy)
    window = ProfilerWindow(warmup=0, profile_steps=1, cuda=False)
    before = _fd2_identity()
    window.on_boundary(0)
    torch.randn(4).sum()
    window.on_boundary(1)
    window.close()
    assert [name for name, _ in seen] == ["start", "stop"]
    assert all(ident == before for _, ident in seen), (before, seen)


_HEARTBEAT_CHILD = textwrap.dedent(
    """
    import os, threading, torch
    from gpu_notebook.capture.profiler import ProfilerWindow

    N = {lines}
    written = threading.Event()
    def heartbeat():
        for k in range(N):
            os.write(2, b"hb %d\\n" % k)
        written.set()
    t = threading.Thread(target=heartbeat)
    t.start()
    while not written.is_set():  # our windows start and stop while the thread writes
        w = ProfilerWindow(warmup=0, profile_steps=1, cuda=False)
        w.on_boundary(0); torch.randn(8).sum(); w.on_boundary(1); w.close()
    t.join()
    {after}
    """
)


def _child_stderr(after: str = "", lines: int = 20000, env_extra: dict | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    env.update(env_extra or {})
    code = _HEARTBEAT_CHILD.format(lines=lines, after=after)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def test_a_heartbeat_thread_on_stderr_loses_no_line_and_kineto_says_nothing():
    err = _child_stderr()
    beats = [ln for ln in err.splitlines() if ln.startswith("hb ")]
    assert beats == [f"hb {k}" for k in range(20000)]
    assert "USDT" not in err and "profiler_start" not in err, err[-500:]


def test_the_users_own_profiler_after_ours_prints_as_without_us():
    """Kineto reads KINETO_LOG_LEVEL once, at its first start: ours must not set it for good."""
    user = (
        "p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])\n"
        "p.start(); torch.randn(3).sum(); p.stop()"
    )
    err = _child_stderr(after=user, lines=10)
    assert err.count("profiler_start") == 1 and err.count("profiler_stop") == 1, err[-800:]
    quiet = _child_stderr(after=user, lines=10, env_extra={"KINETO_LOG_LEVEL": "6"})
    assert "profiler_start" not in quiet  # the user's own setting still holds for theirs
    verbose = _child_stderr(after=user, lines=10, env_extra={"KINETO_LOG_LEVEL": "3"})
    assert "STAGE" in verbose and verbose.count("profiler_start") == 1, verbose[-800:]


@pytest.fixture
def clock():
    c = StepClock(0)
    c.install()
    yield c
    c.uninstall()


# ------------------------------------------------------------------ the user's tensors


class _Refusing(torch.Tensor):
    """A subclass whose ``__torch_function__`` counts every call and refuses size reads."""

    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls += 1
        name = getattr(func, "__name__", "")
        if name in ("dim", "size", "shape", "is_nested", "__get__"):
            raise RuntimeError(f"refused: {name}")
        return super().__torch_function__(func, types, args, kwargs or {})


class _Counting(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", repr(func)))
        return func(*args, **(kwargs or {}))


def _loader_of(batches):
    class _Batches(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(batches)

    return torch.utils.data.DataLoader(_Batches(), batch_size=None)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.as_subclass(_Refusing),
        lambda t: (t.as_subclass(_Refusing), t),
        lambda t: {"x": t.as_subclass(_Refusing)},
    ],
    ids=["tensor", "pair", "dict"],
)
def test_a_tensor_subclass_batch_never_sees_our_size_reading(clock, make):
    batches = [make(torch.randn(4, 3)) for _ in range(5)]
    _Refusing.calls = 0
    seen = list(_loader_of(batches))  # the user's `for ... in loader` line: must not raise
    assert len(seen) == 5
    assert _Refusing.calls == 0
    assert clock.record().event_counts["dataloader"] == 6  # 5 batches and the end


def test_a_torch_function_mode_of_the_cell_never_sees_our_size_reading(clock):
    loader = _loader_of([torch.randn(4, 3) for _ in range(3)])
    it = iter(loader)
    with _Counting() as mode:
        for _ in range(3):
            next(it)
    assert not [n for n in mode.names if n in ("dim", "size", "__get__", "is_nested")], mode.names


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_batch_sizes_still_counted_for_plain_tensors_and_parameters(clock):
    from gpu_notebook.capture.stepclock import _leading_size

    assert _leading_size(torch.randn(7, 2)) == 7
    assert _leading_size(torch.nn.Parameter(torch.randn(5, 2))) == 5
    assert _leading_size((torch.randn(3, 2), torch.randn(3))) == 3
    # Issue 26 (unseen round 7): a graph batch (572 nodes' features, edge index, node owners,
    # 32 labels) read "4,927 samples/s (batch 572)": tensors that disagree give no count.
    graph = (torch.randn(572, 16), torch.zeros(2, 1700, dtype=torch.long),
             torch.zeros(572, dtype=torch.long), torch.zeros(32, dtype=torch.long))  # fmt: skip
    assert _leading_size(graph) is None
    assert _leading_size((torch.randn(3, 2), torch.tensor(0.5), torch.randn(3))) == 3
    assert _leading_size({"a": torch.randn(6)}) == 6
    assert _leading_size(torch.tensor(1.0)) is None
    parts = [torch.randn(2), torch.randn(3)]
    assert _leading_size(torch.nested.nested_tensor(parts)) == 2
    assert _leading_size(torch.nested.nested_tensor(parts, layout=torch.jagged)) == 2
    # Issue 26 (unseen round 9): a loader with collate_fn=lambda b: b yields a list of samples
    # (16 (sequence, label) pairs); the first sequence's length (15 tokens) was read as the batch.
    samples = [(torch.randn(15 + i % 3, 16), i % 2) for i in range(16)]
    assert _leading_size(samples) == 16
    assert _leading_size([{"ids": [1, 2, 3], "label": 0}] * 4) == 4
    # The default collate's output for (x, y) samples stays a list of fields.
    assert _leading_size([torch.randn(8, 3), torch.randn(8)]) == 8
    assert _leading_size([[torch.randn(5, 2), torch.randn(5, 2)], torch.randn(5)]) == 5


# ------------------------------------------------------------------ torch's compilers


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_torchscript_compiles_code_calling_autograd_backward_while_measured(clock):
    """TorchScript resolves ``torch.autograd.backward`` by identity: our wrapper maps to it."""

    def train(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        loss = (x * w).sum()
        torch.autograd.backward([loss])
        return loss

    scripted = torch.jit.script(train)
    w = torch.ones(3, requires_grad=True)
    scripted(torch.arange(3.0), w)
    assert w.grad.tolist() == [0.0, 1.0, 2.0]


def test_torchscript_table_holds_nothing_of_ours_after_the_cell():
    import torch.jit._builtins as builtins

    clock = StepClock(0)
    clock.install()
    wrapper = torch.autograd.backward
    builtins._get_builtin_table()
    assert builtins._find_builtin(wrapper) == "aten::backward"
    clock.uninstall()
    assert all(fn is not wrapper for fn, _ in builtins._builtin_ops)
    assert id(wrapper) not in builtins._builtin_table


_COMPILE_CHILD = textwrap.dedent(
    """
    import json, sys, torch
    from gpu_notebook.capture.stepclock import StepClock
    measured = sys.argv[1] == "measured"
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    X = torch.randn(16, 8); Y = torch.randint(0, 2, (16,))
    def train_step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss
    step = torch.compile(train_step, backend="eager")
    compiled_opt_step = torch.compile(opt.step, backend="eager")
    from torch._dynamo.utils import counters
    def cell(fn):
        clock = StepClock(0) if measured else None
        if clock: clock.install()
        for _ in range(4):
            fn()
        if clock: clock.uninstall()
        return {k: dict(counters[k]) for k in ("frames", "graph_break", "stats")}
    def loop_with_compiled_opt_step():
        loss = torch.nn.functional.cross_entropy(model(X), Y)
        opt.zero_grad(); loss.backward(); compiled_opt_step()
    seen = [cell(lambda: step(X, Y)), cell(loop_with_compiled_opt_step)]
    measured = False  # the next cell, without the tool: nothing recompiles
    seen.append(cell(loop_with_compiled_opt_step))
    print(json.dumps(seen, sort_keys=True))
    """
)


def _compile_counters(kind: str) -> object:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_CHILD, kind], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torch_compile_sees_the_same_frames_graphs_and_breaks_measured_and_after():
    """A compiled training step, then a compiled opt.step, then a cell without the tool: Dynamo's
    frame, graph-break and graph counters match the plain program's after each of them (our
    backward wrapper is never traced, our optimizer hooks are never guarded on)."""
    assert _compile_counters("measured") == _compile_counters("plain")


def test_a_compile_that_never_saw_an_optimizer_leaves_later_cells_their_optimizer_steps():
    """A compiled forward guards nothing of the optimizer's: a later measured cell still counts
    its steps at the optimizer (not at backward, as after a compiled optimizer step)."""
    from gpu_notebook.capture.stepclock import GUARDED_NOTE

    model = torch.nn.Linear(8, 2)
    forward = torch.compile(lambda x: model(x).relu(), backend="eager")
    forward(torch.randn(4, 8))  # an earlier cell, not measured
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    clock = StepClock(0)
    clock.install()
    try:
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    finally:
        clock.uninstall()
    assert GUARDED_NOTE not in clock.notes
    assert clock.anchor == "optimizer" and clock.step_count == 5


_COMPILED_BEFORE_CHILD = textwrap.dedent(
    """
    import json, sys, torch
    from gpu_notebook.capture.stepclock import StepClock, GUARDED_NOTE
    measured = sys.argv[1] == "measured"
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    X = torch.randn(16, 8); Y = torch.randint(0, 2, (16,))
    def train_step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss
    step = torch.compile(train_step, backend="eager")
    compiled_opt_step = torch.compile(opt.step, backend="eager")
    from torch._dynamo.utils import counters
    def loop_with_compiled_opt_step():
        loss = torch.nn.functional.cross_entropy(model(X), Y)
        opt.zero_grad(); loss.backward(); compiled_opt_step()
    notes = []
    def cell(fn, measure):
        clock = StepClock(0) if measure else None
        if clock: clock.install()
        for _ in range(4):
            fn()
        if clock:
            clock.uninstall()
            notes.extend(clock.notes)
        return {k: dict(counters[k]) for k in ("frames", "graph_break", "stats")}
    # Compiled in cells that were not measured; then measured cells run them; then plain again.
    seen = [cell(lambda: step(X, Y), False), cell(loop_with_compiled_opt_step, False)]
    seen += [cell(lambda: step(X, Y), measured), cell(loop_with_compiled_opt_step, measured)]
    seen += [cell(lambda: step(X, Y), False), cell(loop_with_compiled_opt_step, False)]
    print(json.dumps([seen, GUARDED_NOTE in notes], sort_keys=True))
    """
)


def test_frames_compiled_before_the_cell_that_guard_the_optimizer_hooks_never_recompile():
    """Compiled (unmeasured) frames whose guards hold torch's optimizer hook dicts: the measured
    cells install no optimizer hook (said in a note), and nothing recompiles then or after."""
    import json

    runs = {}
    for kind in ("measured", "plain"):
        done = subprocess.run(
            [sys.executable, "-c", _COMPILED_BEFORE_CHILD, kind],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        runs[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    assert runs["measured"][0] == runs["plain"][0]
    assert runs["measured"][1] is True


# ------------------------------------------------------------------ the user's own profiler


def _legacy():
    return torch.autograd.profiler_legacy.profile()


def _autograd_profile():
    return torch.autograd.profiler.profile()


def _itt():
    return torch.autograd.profiler.emit_itt()


def _nvtx():
    return torch.autograd.profiler.emit_nvtx()


def _kineto():
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


_NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="emit_nvtx needs CUDA")


@pytest.mark.parametrize(
    "make",
    [_legacy, _autograd_profile, _itt, pytest.param(_nvtx, marks=_NO_CUDA), _kineto],
    ids=["legacy", "autograd_profile", "itt", "nvtx", "kineto"],
)
def test_a_profiler_the_cell_starts_late_makes_ours_step_aside(make):
    window = ProfilerWindow(warmup=0, profile_steps=5, cuda=False)
    window.guard()
    try:
        window.on_boundary(0)
        assert window.recording
        with make():  # "Profiler is already enabled" if ours still ran
            torch.randn(8).sum()
        assert not window.recording
        window.on_boundary(1)
        assert not window.recording
    finally:
        record = window.close()
    assert record.status == "stepped-aside"
    assert "stepped aside" in (record.message or "")
    assert not torch.autograd.profiler._is_profiler_enabled
    assert "watched" not in torch.autograd.profiler._enable_profiler.__name__


# ------------------------------------------------------------------ magics stacked around ours


def _shown(ip, cell: str) -> list[str]:
    """What the terminal shows for ``cell``, reduced to its kind of line, in order."""
    from IPython.utils.capture import capture_output

    with capture_output() as io:
        result = ip.run_cell(cell, store_history=True)  # as a kernel runs it (the `;` check)
    assert result.success, result.error_in_exec
    kinds = []
    for line in io.stdout.splitlines():
        for kind in ("Out[", "CPU times", "Wall time", "printed"):
            if line.startswith(kind):
                kinds.append(kind + (line.split(":", 1)[1].strip() if kind == "Out[" else ""))
    return kinds


@pytest.mark.parametrize(
    "outer",
    ["", "%%time\n", "%%prun -q\n", "%%capture captured\n"],
    ids=["alone", "time", "prun-q", "capture"],
)
@pytest.mark.parametrize(
    "body",
    ["print('printed')\n6 * 7", "print('printed')\n6 * 7;", "x = 6 * 7"],
    ids=["value", "semicolon", "assignment"],
)
def test_the_cells_value_goes_where_it_goes_without_the_magic(ip, outer, body):
    plain = _shown(ip, f"{outer}{body}")
    measured = _shown(ip, f"{outer}%%gpucheck -q --no-profile --lines off\n{body}")
    assert measured == plain


def test_a_value_is_shown_once_under_every_interactivity(ip):
    before = ip.ast_node_interactivity
    try:
        for mode in ("all", "last", "last_expr_or_assign", "none"):
            ip.ast_node_interactivity = mode
            body = "1 + 1\nprint('printed')\ny = 6 * 7"
            plain = _shown(ip, body)
            assert _shown(ip, f"%%gpucheck -q --no-profile --lines off\n{body}") == plain, mode
    finally:
        ip.ast_node_interactivity = before


# ------------------------------------------------------------------ the report after the cell


class _Calls:
    names: ClassVar[list[str]] = []


class _Shard(torch.utils.data.IterableDataset):
    def __iter__(self):
        _Calls.names.append("iter")
        return iter([torch.randn(2)])

    def __len__(self):
        _Calls.names.append("len")
        raise TypeError("a streaming shard has no length")


class _OwnModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 1), torch.nn.Linear(2, 2))

    def parameters(self, recurse=True):
        _Calls.names.append("parameters")
        raise RuntimeError("not now")

    def modules(self):
        _Calls.names.append("modules")
        raise RuntimeError("not now")


class _OwnLoader(torch.utils.data.DataLoader):
    @property
    def sampler_info(self):  # never asked
        _Calls.names.append("property")
        raise RuntimeError


class _Masquerade:
    @property
    def __class__(self):
        _Calls.names.append("__class__")
        raise RuntimeError("isinstance() asked")


def test_the_report_runs_none_of_the_users_code_on_live_objects():
    """ChainDataset.__len__ is torch's but calls the user's shards' __len__; a model's own
    parameters()/modules(); a property; a __class__ property read by isinstance()."""
    from gpu_notebook.cell.live import live_facts

    data = torch.utils.data
    chain = data.ChainDataset([_Shard(), _Shard()])
    concat = data.ConcatDataset(
        [data.TensorDataset(torch.randn(3, 2)), data.TensorDataset(torch.randn(4, 2))]
    )
    namespace = {
        "chain_loader": data.DataLoader(chain, batch_size=None),
        "concat_loader": _OwnLoader(concat, batch_size=2),
        "subset_loader": data.DataLoader(data.Subset(concat, [0, 2, 4]), batch_size=2),
        "model": _OwnModel(),
        "odd": _Masquerade(),
    }
    _Calls.names = []
    facts = live_facts(namespace, namespace)
    assert _Calls.names == []
    lengths = {ld.name: ld.dataset_len for ld in facts.loaders}
    assert lengths == {"chain_loader": None, "concat_loader": 7, "subset_loader": 3}
    (model,) = facts.models
    assert model.parameter_tensors == 4 and model.has_conv and model.training


class _OwnDispatch(torch.Tensor):
    """A subclass that computes in code of its own: its sizes are its own code's to give."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        _Calls.names.append("dispatch")
        raise RuntimeError("not now")


def _own_dispatch(n: int) -> torch.Tensor:
    return torch.Tensor._make_subclass(_OwnDispatch, torch.zeros(n, 2))


def test_an_object_whose_size_needs_its_own_code_is_named_in_one_note():
    """Skipped, not silent: a delegating container (ChainDataset) and a tensor subclass with its
    own dispatch are named once each, with no call into them."""
    from gpu_notebook.cell.live import live_facts

    data = torch.utils.data
    namespace = {
        "chain_loader": data.DataLoader(data.ChainDataset([_Shard()]), batch_size=None),
        "own_loader": data.DataLoader(data.TensorDataset(_own_dispatch(5)), batch_size=2),
        "other_chain": data.DataLoader(data.ChainDataset([_Shard()]), batch_size=None),
    }
    _Calls.names = []
    facts = live_facts(namespace, namespace)
    assert _Calls.names == []
    assert facts.notes() == (
        "not read: ChainDataset, its size needs its own code",
        "not read: _OwnDispatch, its size needs its own code",
    )


def test_a_batch_whose_size_needs_its_own_code_is_named_in_one_note():
    loader = torch.utils.data.DataLoader(
        [0, 1, 2, 3], batch_size=None, collate_fn=lambda i: _own_dispatch(2)
    )
    clock = StepClock(0)
    clock.install()
    try:
        for _ in loader:
            pass
    finally:
        clock.uninstall()
    assert [n for n in clock.notes if n.startswith("not read")] == [
        "not read: _OwnDispatch, its size needs its own code (the loader's batches: samples a "
        "step not counted)"
    ]


def test_a_streaming_chain_dataset_cell_is_measured_and_succeeds(ip):
    ip.user_ns["_Shard"] = _Shard
    _Calls.names = []
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "chain = torch.utils.data.ChainDataset([_Shard() for _ in range(12)])\n"
        "loader = torch.utils.data.DataLoader(chain, batch_size=None)\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "for x in loader:\n"
        "    o.zero_grad(); m(x).sum().backward(); o.step()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    assert "len" not in _Calls.names
    assert ip.user_ns["rep"].run.steps.step_count >= 10


def _odd_module() -> torch.nn.Module:
    """A module whose parameter slot holds something that is not a tensor (code that fills
    ``_parameters`` itself): reading its device fails, in our code."""
    odd = torch.nn.Linear(2, 1)
    odd._parameters["weight"] = object()  # type: ignore[assignment]
    return odd


def test_an_object_we_cannot_read_is_skipped_with_a_note_never_a_failure():
    from gpu_notebook.cell.live import live_facts

    facts = live_facts({"odd": _odd_module(), "fine": torch.nn.Linear(2, 1)}, ["odd", "fine"])
    assert [m.name for m in facts.models] == ["fine"]
    assert [name for name, _ in facts.skipped] == ["odd"]
    (note,) = facts.notes()
    assert "'odd'" in note and "Linear" in note and "TypeError" in note, note


def test_the_report_notes_the_object_it_skipped(ip):
    ip.user_ns["odd"] = _odd_module()
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "kept = odd\n"
        "for _ in range(8):\n"
        "    o.zero_grad(); m(torch.randn(4, 2)).sum().backward(); o.step()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    notes = ip.user_ns["rep"].run.notes
    assert sum("'odd'" in n for n in notes) == 1, notes


# ------------------------------------------------------------------ training elsewhere


def _finding_ids(rep) -> list[str]:
    return [f.rule_id for f in rep.findings]


def test_training_on_a_thread_the_cell_joins_is_followed_and_never_called_inference(ip):
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "import threading\n"
        "m = torch.nn.Linear(8, 2); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "X = torch.randn(16, 8)\n"
        "def train():\n"
        "    for _ in range(20):\n"
        "        o.zero_grad(); m(X).pow(2).mean().backward(); o.step()\n"
        "t = threading.Thread(target=train, name='trainer'); t.start(); t.join()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    assert rep.run.steps.anchor == "optimizer"
    assert rep.run.steps.step_count >= 18
    assert any("thread 'trainer'" in n for n in rep.run.notes), rep.run.notes
    from tests.verdicts import judged_at_all

    judged_at_all(rep)  # measured: a verdict, or too busy to judge by the recorded gate
    assert "inference.autograd_on" not in _finding_ids(rep)


def test_steps_on_a_second_thread_are_counted_by_thread(ip):
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "import threading\n"
        "m = torch.nn.Linear(8, 2); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "m2 = torch.nn.Linear(8, 2); o2 = torch.optim.SGD(m2.parameters(), 0.1)\n"
        "X = torch.randn(16, 8)\n"
        "def side():\n"
        "    for _ in range(5):\n"
        "        o2.zero_grad(); m2(X).sum().backward(); o2.step()\n"
        "for i in range(12):\n"
        "    o.zero_grad(); m(X).pow(2).mean().backward(); o.step()\n"
        "    if i == 3:\n"
        "        t = threading.Thread(target=side, name='side'); t.start(); t.join()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    assert rep.run.steps.event_counts["optimizer"] == 12
    assert any(n.startswith("5 optimizer step(s) ran on thread 'side'") for n in rep.run.notes)


def test_training_in_child_processes_is_said_and_never_called_inference(ip):
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "import multiprocessing as mp\n"
        "m = torch.nn.Linear(8, 2); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "X = torch.randn(16, 8)\n"
        "def train():\n"
        "    for _ in range(5):\n"
        "        o.zero_grad(); m(X).pow(2).mean().backward(); o.step()\n"
        "p = mp.get_context('fork').Process(target=train); p.start(); p.join()\n"
        "loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X), batch_size=2)\n"
        "for (x,) in loader:\n"
        "    m(x)\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    assert "inference.autograd_on" not in _finding_ids(rep)
    assert any("starts processes (Process)" in e for e in rep.verdict.evidence), rep.verdict


def _train_a_little(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()


def test_optimizer_steps_in_a_forked_child_are_counted_by_its_pid_and_nothing_stays():
    """A child the code forks inherits our hooks: its optimizer steps reach the parent through a
    shared anonymous mapping (no file, no fd), even when it ends by os._exit."""
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fds_before = sorted(os.listdir("/proc/self/fd"))
    clock = StepClock(0)
    clock.install()
    try:
        pid = os.fork()
        if pid == 0:
            try:
                _train_a_little(model, opt, 3)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        _train_a_little(model, opt, 2)
    finally:
        clock.uninstall()
    assert [(p, n, how) for p, n, _, how in clock.child_steps()] == [(pid, 3, "forked")]
    assert clock.record().event_counts["optimizer"] == 2
    assert clock.record().event_counts["optimizer_in_children"] == 3
    (note,) = clock.child_notes()
    assert f"pid {pid}: 3" in note, note
    assert sorted(os.listdir("/proc/self/fd")) == fds_before


def test_training_in_forked_children_is_counted_per_child_in_the_report(ip):
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "import multiprocessing as mp\n"
        "m = torch.nn.Linear(8, 2); o = torch.optim.SGD(m.parameters(), 0.1)\n"
        "X = torch.randn(16, 8)\n"
        "def train(n):\n"
        "    for _ in range(n):\n"
        "        o.zero_grad(); m(X).pow(2).mean().backward(); o.step()\n"
        "procs = [mp.get_context('fork').Process(target=train, args=(n,)) for n in (5, 7)]\n"
        "for p in procs: p.start()\n"
        "for p in procs: p.join()\n"
        "pids = [p.pid for p in procs]\n"
        "with torch.no_grad():\n"
        "    for _ in range(6):\n"
        "        m(X)\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep, pids = ip.user_ns["rep"], ip.user_ns["pids"]
    (note,) = [n for n in rep.run.notes if "child process" in n]
    assert "12 optimizer step(s)" in note and f"pid {pids[0]}: 5" in note, note
    assert f"pid {pids[1]}: 7" in note, note
    evidence = " ".join(rep.verdict.evidence)
    assert "12 optimizer step(s) ran in child processes" in evidence, rep.verdict
    assert "inference" not in " ".join(f.rule_id for f in rep.findings)


def test_optimizer_steps_in_spawned_children_are_counted_by_pid_and_nothing_stays():
    """A child started by spawn runs a fresh interpreter: it counts its optimizer steps into a
    table it gets with multiprocessing's preparation data; its exit code is its own, and no
    descriptor or patch of ours is left in the parent."""
    import multiprocessing
    import multiprocessing.spawn

    from tests import spawn_targets

    ctx = multiprocessing.get_context("spawn")
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # multiprocessing's own descriptor, with us or without
    prepare = multiprocessing.spawn.get_preparation_data
    fds_before = sorted(os.listdir("/proc/self/fd"))
    clock = StepClock(0)
    clock.install()
    try:
        procs = [
            ctx.Process(target=spawn_targets.train, args=(0, 4, 3)),
            ctx.Process(target=spawn_targets.train, args=(1, 5)),
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
    finally:
        clock.uninstall()
    assert [p.exitcode for p in procs] == [3, 0]
    got = sorted((pid, n, how) for pid, n, _, how in clock.child_steps())
    assert got == sorted([(procs[0].pid, 4, "spawned"), (procs[1].pid, 6, "spawned")])
    assert clock.record().event_counts["optimizer_in_children"] == 10
    (note,) = clock.child_notes()
    assert "started by spawn" in note and f"pid {procs[1].pid}: 6 in " in note, note
    assert multiprocessing.spawn.get_preparation_data is prepare
    assert "gpu_notebook_child_steps" not in multiprocessing.spawn.get_preparation_data("x")
    for p in procs:
        p.close()
    assert sorted(os.listdir("/proc/self/fd")) == fds_before


def test_spawned_children_and_the_cell_open_the_descriptors_they_open_without_us():
    """Our table's descriptor is numbered high in the parent and in the child (a mapping would
    hold a low one, the next ``open`` of the user's code getting another number)."""
    import multiprocessing

    from tests import spawn_targets

    ctx = multiprocessing.get_context("spawn")

    def next_fd_in_child() -> int:
        p = ctx.Process(target=spawn_targets.train_then_exit_with_next_fd, args=(0,))
        p.start()
        p.join()
        assert p.exitcode is not None
        return p.exitcode

    def next_fd_here() -> int:  # the second: the first may take the memfd's freed number
        first = os.open(os.devnull, os.O_RDONLY)
        second = os.open(os.devnull, os.O_RDONLY)
        os.close(first)
        os.close(second)
        return second

    plain = (next_fd_in_child(), next_fd_here())
    clock = StepClock(0)
    clock.install()
    try:
        measured = (next_fd_in_child(), next_fd_here())
    finally:
        clock.uninstall()
    assert [n for _, n, _, _ in clock.child_steps()] == [2]
    assert measured == plain


def test_training_in_spawned_children_is_counted_per_child_in_the_report(ip):
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 2 --lines off\n"
        "import torch.multiprocessing as mp\n"
        "from tests import spawn_targets\n"
        "ctx = mp.spawn(spawn_targets.train, args=(3,), nprocs=2, join=False)\n"
        "pids = [p.pid for p in ctx.processes]\n"
        "while not ctx.join(): pass\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep, pids = ip.user_ns["rep"], ip.user_ns["pids"]
    (note,) = [n for n in rep.run.notes if "child process" in n]
    assert f"pid {pids[0]}: 3 in " in note and f"pid {pids[1]}: 4 in " in note, note
    evidence = " ".join(rep.verdict.evidence)
    assert "7 optimizer step(s) ran in child processes" in evidence, rep.verdict
    assert "inference" not in " ".join(f.rule_id for f in rep.findings)


def test_children_that_counted_nothing_are_said_with_how_to_profile_them():
    from gpu_notebook.analysis.elsewhere import children_note
    from gpu_notebook.words.verdict_lines import line_words

    source = "import torch.multiprocessing as mp\nmp.spawn(train, nprocs=2)\nloss.backward()\n"
    said = children_note(source, here=0, in_children=0)
    assert said is not None
    note = line_words(said)
    assert "no optimizer step was counted" in note
    assert "torchrun" in note and "gpucheck run" in note
    assert "inference" not in note
    counted = children_note("Process(target=f).start()\nl.backward()\n", here=0, in_children=9)
    assert counted is not None
    assert "9 optimizer step(s) ran in child processes" in line_words(counted)


class _ModulesThatGrowWhileRead(dict):
    """sys.modules as another thread's import changes it: reading its items adds a module
    half-way, as an import on another thread can between two steps of an iteration."""

    def items(self):  # type: ignore[override]
        for n, (key, value) in enumerate(dict.items(self)):
            if n == 1:
                self["gpu_notebook_test_imported_meanwhile"] = None
            yield key, value


def test_skipping_our_frames_in_dynamo_survives_an_import_on_another_thread(monkeypatch):
    from gpu_notebook.capture import stepclock

    monkeypatch.setattr(stepclock, "_SKIPPED_MODULES", set())
    monkeypatch.setattr(sys, "modules", _ModulesThatGrowWhileRead(sys.modules))
    stepclock._skip_our_code_in_dynamo()
    assert "gpu_notebook.capture.stepclock" in stepclock._SKIPPED_MODULES


def test_hot_lines_on_a_thread_the_cell_joins_are_the_training_threads(ip):
    # Issue 26 (unseen round 7): a loop run on a 'trainer' thread read "line 39 `while (msg :=
    # progress.get()) ...`: 100% of sampled time": the sampler read the cell's thread, which only
    # waited. Once the step clock follows the thread, so do the hot lines.
    cell = (
        "%%gpucheck -q -o rep -w 1 -s 8\n"
        "import threading\n"
        "m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))\n"
        "o = torch.optim.SGD(m.parameters(), 0.01)\n"
        "X = torch.randn(512, 256)\n"
        "def train():\n"
        "    for _ in range(150):\n"
        "        o.zero_grad(); m(X).pow(2).mean().backward(); o.step()\n"
        "t = threading.Thread(target=train, name='trainer'); t.start(); t.join()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    rep = ip.user_ns["rep"]
    assert any("thread 'trainer'" in n for n in rep.run.notes), rep.run.notes
    stacks = rep.run.stacks
    assert stacks is not None
    names = {f.function for f in stacks.functions}
    # Every sample of the trainer thread has `train` on its stack. How many the 8 profiled steps
    # give hangs on the machine's speed (5-8 over ~35 ms on a 2-core VM: a few times faster and
    # none may fall in them); none is then none of the waiting cell thread's frames either.
    if stacks.samples:
        assert "train" in names, names
    else:
        assert not names, names
    # The hot lines are the cell's file's, not threading's bootstrap under the thread's target.
    assert stacks.root_filename is not None and "threading" not in stacks.root_filename


def test_a_training_thread_the_cell_leaves_running_starts_nothing_of_ours_after_it(ip):
    """A cell that starts its training on a thread and returns (the notebook stays responsive)
    ends our capture while the thread still steps (unseen notebooks, nb8): the thread's next
    step boundary started the sparse stack sampler after the cell had stopped the others, and
    that sampler then sampled the thread, at 25 Hz, for as long as the process lived. The cell
    waits for the thread's third step, so the steps it measures are there on any machine."""
    from gpu_notebook.capture.threads import live_hidden_threads

    cell = (
        "%%gpucheck -q -o rep\n"
        "import threading, time\n"
        "lr_m = torch.nn.Linear(32, 1); lr_o = torch.optim.SGD(lr_m.parameters(), lr=0.01)\n"
        "lr_three = threading.Event()\n"
        "def train():\n"
        "    for i in range(120):\n"
        "        lr_m(torch.randn(64, 32)).sum().backward(); lr_o.step(); lr_o.zero_grad()\n"
        "        if i == 2: lr_three.set()\n"
        "        time.sleep(0.005)\n"
        "lr_bg = threading.Thread(target=train, name='trainer'); lr_bg.start(); lr_three.wait()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    ip.user_ns["lr_bg"].join()
    rep = ip.user_ns["rep"]
    assert 3 <= rep.run.steps.step_count < 120  # the cell ended first
    assert [t.name for t in live_hidden_threads()] == []
    # And the report says its steps are the first of a run that went on without it.
    assert any("still running when the cell ended" in n for n in rep.run.notes), rep.run.notes


def test_a_training_thread_left_running_before_its_first_step_is_said_to_outlive_the_cell(ip):
    """The CI of e9b71ba, both cores busy: the cell above returned before its thread's first
    optimizer step, and the report said nothing of the thread (the clock followed a thread only
    from its first step). The thread here waits for the test, so it has no step in the cell on
    any machine: the report names it as still running, none of its steps measured. A thread of
    the standard library's the cell leaves running (an executor's worker) is not the training."""
    from concurrent.futures import ThreadPoolExecutor

    from gpu_notebook.capture.threads import live_hidden_threads

    ip.user_ns["ThreadPoolExecutor"] = ThreadPoolExecutor
    cell = (
        "%%gpucheck -q -o rep\n"
        "import threading\n"
        "lz_m = torch.nn.Linear(32, 1); lz_o = torch.optim.SGD(lz_m.parameters(), lr=0.01)\n"
        "lz_go = threading.Event()\n"
        "def train():\n"
        "    lz_go.wait()\n"
        "    for _ in range(5):\n"
        "        lz_m(torch.randn(64, 32)).sum().backward(); lz_o.step(); lz_o.zero_grad()\n"
        "lz_bg = threading.Thread(target=train, name='late-trainer'); lz_bg.start()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    ip.user_ns["lz_go"].set()
    ip.user_ns["lz_bg"].join()
    rep = ip.user_ns["rep"]
    assert rep.run.steps.step_count == 0
    assert [t.name for t in live_hidden_threads()] == []
    said = [n for n in rep.run.notes if "thread 'late-trainer'" in n]
    assert len(said) == 1 and "still running when the cell ended" in said[0], rep.run.notes
    assert "(0 optimizer steps)" in said[0]

    # An executor's idle worker (the standard library's code) and a thread of the user's that
    # ended inside the cell are not a training left running.
    cell = (
        "%%gpucheck -q -o rep\n"
        "lz_pool = ThreadPoolExecutor(1); lz_pool.submit(lambda: 1).result()\n"
        "lz_done = threading.Thread(target=lambda: None, name='done-early'); lz_done.start()\n"
        "lz_done.join()\n"
        "lz_m(torch.randn(64, 32)).sum().item()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    ip.user_ns["lz_pool"].shutdown()
    notes = ip.user_ns["rep"].run.notes
    assert not any("still running" in n or "started by the cell" in n for n in notes), notes


def test_a_training_thread_the_cell_joins_is_not_said_to_outlive_it(ip):
    cell = (
        "%%gpucheck -q -o rep\n"
        "import threading\n"
        "jn_m = torch.nn.Linear(32, 1); jn_o = torch.optim.SGD(jn_m.parameters(), lr=0.01)\n"
        "def train():\n"
        "    for _ in range(20):\n"
        "        jn_m(torch.randn(64, 32)).sum().backward(); jn_o.step(); jn_o.zero_grad()\n"
        "jn_bg = threading.Thread(target=train, name='trainer'); jn_bg.start(); jn_bg.join()\n"
    )
    result = ip.run_cell(cell)
    assert result.success, result.error_in_exec
    notes = ip.user_ns["rep"].run.notes
    assert any("thread 'trainer'" in n for n in notes), notes
    assert not any("still running" in n for n in notes), notes


def test_a_validation_pass_with_autograd_on_is_not_the_next_step_s_samples(clock):
    """Issue 26 (unseen round 9): an epoch's validation that forgets torch.no_grad() reads its
    loader between two steps; the step after it read "batch 2112" (64 + 32 x 64). Two loaders
    zipped, each read once before the backward, still count both."""
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    train, val = DataLoader(ds, batch_size=8), DataLoader(ds, batch_size=16)
    for _ in range(3):
        for x, y in train:
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
            opt.zero_grad()
        for x, _y in val:  # validation, autograd on
            net(x).sum().item()
    for (xa, ya), (xb, yb) in zip(train, DataLoader(ds, batch_size=8), strict=True):
        (net(xa) - ya + net(xb) - yb).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    sizes = [s.batch_size for s in clock.record().steps]
    assert sizes[:24] == [8] * 24  # main: 72 at each epoch's first step after the first
    assert sizes[24:] == [16] * 8


def test_micro_batches_read_ahead_of_their_backwards_count_as_the_step_s_samples(clock):
    """Unseen round 14: HF Trainer under gradient_accumulation_steps=4 reads the step's 4
    micro-batches first (get_batch_samples), then runs a backward for each; the report said
    "batch 8" (and a quarter of the samples/s) for 4 x 8. A skipped read (one backward for two
    reads) still counts once."""
    import itertools

    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    it = iter(DataLoader(ds, batch_size=8))
    for _ in range(2):  # HF's shape: a list of the step's micro-batches, then one pass each
        micro = [next(it) for _ in range(4)]
        for x, y in micro:
            (torch.nn.functional.mse_loss(net(x), y) / 4).backward()
        opt.step()
        opt.zero_grad()
    for _ in range(2):  # another shape: islice of 2, each backward right after its forward
        for x, _y in list(itertools.islice(iter(DataLoader(ds, batch_size=4)), 2)):
            net(x).sum().backward()
        opt.step()
        opt.zero_grad()
    it = iter(DataLoader(ds, batch_size=8))
    for _ in range(2):  # a read skipped: only the batch trained on counts
        next(it)
        x, y = next(it)
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
        opt.zero_grad()
    sizes = [s.batch_size for s in clock.record().steps]
    # The first step ran before the optimizer anchored the steps (its reads were counted then).
    assert sizes[1:] == [32, 8, 8, 8, 8]  # main: [8, 4, 4, 8, 8]


FAILING_READS = """%%gpucheck -q -o rep
class Corrupt(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if i == 40:
            raise ValueError(f"corrupt sample {i}")
        return torch.randn(4), torch.randn(1)
net = torch.nn.Linear(4, 1)
for x, y in torch.utils.data.DataLoader(Corrupt(), batch_size=8):
    loss = torch.nn.functional.mse_loss(net(x), y)
    loss.backward()
"""
TWICE_BACKWARD = """%%gpucheck -q -o rep
net = torch.nn.Linear(4, 1)
for _ in range(3):
    loss = net(torch.randn(8, 4)).sum()
    loss.backward()
loss.backward()
"""


@pytest.mark.parametrize("cell", [FAILING_READS, TWICE_BACKWARD], ids=["dataset", "backward"])
def test_an_error_through_our_wrappers_is_shown_without_our_frames(ip, cell):
    # Unseen round 12's DataLoader worker error: the user's traceback showed our
    # stepclock.__next__ with its source between DataLoader's frames; a second backward
    # through the graph showed our backward wrapper. The frames are there (Python puts them
    # there); IPython's traceback, pdb and pytest leave them out.
    result = ip.run_cell(cell)
    exc = result.error_in_exec
    assert exc is not None and ip.user_ns["rep"].run.status == "error"
    shown = "\n".join(ip.InteractiveTB.structured_traceback(type(exc), exc, exc.__traceback__))
    assert "gpu_notebook" not in shown and "stepclock" not in shown, shown
    assert "corrupt sample 40" in shown or "backward through the graph a second time" in shown


def test_stop_pressed_while_our_profiler_starts_reads_as_the_users_step(ip, monkeypatch):
    # A kernel interrupt that lands in our step-boundary work (the profiler window starting,
    # 100s of ms on a busy machine) showed the user a traceback through stepclock, session and
    # profiler frames. It is the user's interrupt, raised at their step; the report of the
    # steps that ran still comes and nothing of ours stays installed.
    import torch.optim.optimizer as optimizer_module

    from gpu_notebook.capture import profiler

    def interrupted(self, step_index):
        raise KeyboardInterrupt  # as SIGINT lands while the window starts

    hooks = len(optimizer_module._global_optimizer_pre_hooks)
    monkeypatch.setattr(profiler.ProfilerWindow, "_start", interrupted)
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(
        "%%gpucheck -q -o rep\n"
        "net = torch.nn.Linear(8, 1); o = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "for step in range(20):\n"
        "    net(torch.randn(4, 8)).sum().backward(); o.step(); o.zero_grad()\n"
    )
    exc = result.error_in_exec
    assert isinstance(exc, KeyboardInterrupt)
    shown = "\n".join(ip.InteractiveTB.structured_traceback(type(exc), exc, exc.__traceback__))
    # IPython shows the frame that raised (ours, re-raising it at the step boundary), never
    # the session's and profiler's below it.
    assert "o.step()" in shown and "profiler.py" not in shown and "session.py" not in shown, shown
    assert shown.count("gpu_notebook") == 1, shown
    rep = ip.user_ns["rep"]
    assert rep.run.status == "interrupted" and rep.run.steps.step_count >= 1
    assert len(optimizer_module._global_optimizer_pre_hooks) == hooks
    assert not torch._C._autograd._profiler_enabled()
