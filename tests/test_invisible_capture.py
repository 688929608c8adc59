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
