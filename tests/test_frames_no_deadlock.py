"""Reading every thread's frame never hangs the process (CPython gh-106883).

Seen: a fresh-clone CI run hung for good inside a measured cell; gdb showed the stack sampler's
thread in ``local_clear`` (a ``threading.local`` freed by a collection) under
``_PyThread_CurrentFrames``, waiting on the thread-list lock it already held, the GIL with it,
so no thread (pytest-timeout's included) ever ran again. The program below makes the collection
likely on every call (threshold 1, a collectable cycle holding a ``threading.local`` before each
read, the caller's own frame made by the call): on CPython 3.11.7, ``sys._current_frames()``
called as it is hung in each of the runs tried (2 of 2, each stopped at 60 s; left out here: a
test that waits for a hang costs the suite its limit), while ``current_frames``, which keeps the
collector off for the call, ended each time.
"""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
import threading
from pathlib import Path

import gpu_notebook
from gpu_notebook.capture.frames import current_frames

PROGRAM = """
import gc, sys, threading
from gpu_notebook.capture.frames import current_frames
read = sys._current_frames if sys.argv[1] == "plain" else current_frames
go = threading.Event()
stop = threading.Event()
def deep(n):
    if n:
        return deep(n - 1)
    go.set()
    stop.wait()
threads = [threading.Thread(target=deep, args=(20,)) for _ in range(4)]
for t in threads:
    t.start()
go.wait()
gc.set_threshold(1)
class Holder:
    pass
for _ in range(20000):
    h = Holder()
    h.me = h
    h.local = threading.local()
    h.local.x = 1
    del h
    read()
stop.set()
for t in threads:
    t.join()
print("read", gc.isenabled())
"""


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    # A hang never ends: the limit only has to outlast a busy machine's slowest honest run.
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=300
    )


def test_reading_every_threads_frame_beside_collections_of_thread_locals_ends():
    res = _run("guarded")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["read", "True"]  # the collector is on again after the reads


def test_the_collector_the_program_turned_off_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        frames = current_frames()
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
    assert threading.get_ident() in frames
    # And on: on again after the read.
    if was:
        current_frames()
        assert gc.isenabled()


def test_only_the_guard_reads_every_threads_frames():
    """Every sampler of ours goes through ``current_frames``: a new direct call would bring the
    hang back."""
    root = Path(gpu_notebook.__file__).parent
    calls = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in (
                "_current_frames",
                "_current_exceptions",
            ):
                calls.append(str(path.relative_to(root)))
    assert calls == ["capture/frames.py", "capture/frames.py"]
