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
    window = ProfilerWindow(warmup=0, steps=1, cuda=False)
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
        w = ProfilerWindow(warmup=0, steps=1, cuda=False)
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
    assert _leading_size({"a": torch.randn(6)}) == 6
    assert _leading_size(torch.tensor(1.0)) is None
    parts = [torch.randn(2), torch.randn(3)]
    assert _leading_size(torch.nested.nested_tensor(parts)) == 2
    assert _leading_size(torch.nested.nested_tensor(parts, layout=torch.jagged)) == 2
