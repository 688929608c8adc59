"""The background sampler: what it records, how it stays bounded, and that it always cleans up.

psutil is real here (this process, real child processes); NVML comes from the fake at the door.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from gpu_notebook.capture import nvml
from gpu_notebook.capture.sampler import THREAD_NAME, Sampler, _proc_descendants
from gpu_notebook.capture.threads import HiddenThread, live_hidden_threads
from gpu_notebook.records import Sample, SampleSeries
from tests import fake_nvml

BURN = "while True: pass"


def sampler_threads() -> list[HiddenThread]:
    """Our sampler threads still running (hidden from threading.enumerate(): capture/threads.py)."""
    return [t for t in live_hidden_threads() if t.name == THREAD_NAME]


@pytest.fixture(autouse=True)
def no_sampler_left_behind() -> Iterator[None]:
    yield
    assert sampler_threads() == []


@pytest.fixture
def no_gpu() -> Iterator[None]:
    with nvml.use_library(fake_nvml.library_missing()):
        yield


@contextlib.contextmanager
def burning_child() -> Iterator[subprocess.Popen[bytes]]:
    """A child process burning one core, killed (with its own children) at the end."""
    child = subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True)
    try:
        yield child
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


@pytest.fixture
def burner() -> Iterator[subprocess.Popen[bytes]]:
    with burning_child() as child:
        yield child


OWN_PROCESS = "GPU_NOTEBOOK_TEST_OWN_PROCESS"


def in_own_process(request: pytest.FixtureRequest) -> bool:
    """Whether this test runs in a pytest process of its own; elsewhere it is run in one first
    (and must pass there), and False says the body was run there.

    A children CPU % counts every child of the process: in the suite's process other children
    live on (DataLoader workers an earlier test's shell kept wake every few seconds), and their
    CPU would be read with the child the test measures (a fresh-clone CI failed so: 379d6c7).
    """
    nodeid = request.node.nodeid
    if os.environ.get(OWN_PROCESS) == nodeid:
        return True
    root = str(request.config.rootpath)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid],
        cwd=root,
        env={**os.environ, OWN_PROCESS: nodeid, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    if "1 skipped" in done.stdout:
        pytest.skip(f"skipped in its own process: {done.stdout[-500:]}")
    assert "1 passed" in done.stdout, done.stdout[-2000:]
    return False


def wait_for_samples(sampler: Sampler, count: int, timeout_s: float = 20.0) -> None:
    """Wait until the buffer holds ``count`` samples: on a loaded machine the thread can be
    starved for a while, and a fixed sleep would then test the scheduler, not the sampler."""
    deadline = time.perf_counter() + timeout_s
    while len(sampler.snapshot().samples) < count:
        assert time.perf_counter() < deadline, f"fewer than {count} samples in {timeout_s} s"
        time.sleep(0.005)


def run_for(sampler: Sampler, seconds: float, min_samples: int = 1) -> SampleSeries:
    """Sample for ``seconds``, and longer if needed to get ``min_samples`` samples."""
    sampler.start()
    time.sleep(seconds)
    wait_for_samples(sampler, min_samples)
    return sampler.stop()


# --- what a sample holds ----------------------------------------------------------------------


def test_samples_arrive_at_about_the_interval_with_every_gpu() -> None:
    # How late the ticks come is the scheduler's (a busy machine starves the thread, and a late
    # tick makes the next gap short as the grid catches up): what is asserted is the schedule's,
    # never more ticks than its interval allows, in order.
    with nvml.use_library(fake_nvml.healthy(2)):
        started_s = time.perf_counter()
        series = run_for(Sampler(interval_s=0.05), 0.6, min_samples=8)
        elapsed_s = time.perf_counter() - started_s
    samples = series.samples
    assert 8 <= len(samples) <= elapsed_s / 0.05 + 1
    gaps = [b.t_s - a.t_s for a, b in itertools.pairwise(samples)]
    assert all(gap > 0 for gap in gaps)
    for sample in samples:
        assert [g.index for g in sample.gpus] == [0, 1]
        assert [g.utilization_pct for g in sample.gpus] == [80.0, 81.0]
        assert sample.gpus[0].memory_used_bytes == 12 * fake_nvml.GiB
    assert series.requested_interval_s == series.interval_s == 0.05
    assert series.downsample_factor == 1
    assert series.notes == ()


def test_without_a_gpu_the_cpu_fields_are_filled_and_gpus_empty(no_gpu: None) -> None:
    series = run_for(Sampler(interval_s=0.05), 0.3, min_samples=4)
    cores = psutil.cpu_count()
    for sample in series.samples:
        assert sample.gpus == ()
        assert sample.process_cpu_pct is not None and sample.process_cpu_pct >= 0.0
        if not sample.children:  # no worker listed: not read (None), never "idle" (0.0)
            assert sample.children_cpu_pct is None
        assert len(sample.per_core_cpu_pct) == cores
        assert all(0.0 <= pct <= 100.0 for pct in sample.per_core_cpu_pct)
        assert sample.system_cpu_pct == pytest.approx(statistics.fmean(sample.per_core_cpu_pct))
        assert sample.rss_bytes is not None
        assert sample.rss_bytes >= psutil.Process().memory_info().rss // 2


def test_real_nvml_on_this_machine_gives_one_gpu_entry_per_visible_gpu() -> None:
    nvml.reset()
    series = run_for(Sampler(interval_s=0.05), 0.2)
    visible = nvml.status().gpu_count
    assert series.samples
    assert all(len(sample.gpus) == visible for sample in series.samples)


def test_process_cpu_counts_one_busy_thread_as_one_core_not_a_share_of_all(
    no_gpu: None,
) -> None:
    origin_s = time.perf_counter()
    sampler = Sampler(interval_s=0.1).start(origin_s=origin_s)
    wait_for_samples(sampler, 1)
    busy_from_s = time.perf_counter() - origin_s
    cpu_start = time.thread_time()

    def samples_inside() -> list[tuple[Sample, Sample]]:
        """Samples whose whole interval (from the previous sample) lies in the busy span."""
        pairs = itertools.pairwise(sampler.snapshot().samples)
        return [(a, b) for a, b in pairs if a.t_s >= busy_from_s]

    # Busy for 0.8 s and until the sampler measured 4 intervals of it: a busy machine can
    # leave the sampler thread without a turn for a while.
    next_check_s = busy_from_s + 0.8
    deadline_s = busy_from_s + 30.0
    while True:
        now_s = time.perf_counter() - origin_s
        if now_s >= next_check_s:
            if len(samples_inside()) >= 4:
                break
            assert now_s < deadline_s, "fewer than 4 samples in 30 s"
            next_check_s = now_s + 0.05
    busy_to_s = time.perf_counter() - origin_s
    # What this thread really got (less than a full core when other work shares the machine).
    expected_pct = 100.0 * (time.thread_time() - cpu_start) / (busy_to_s - busy_from_s)
    series = sampler.stop()
    inside = [
        b.process_cpu_pct
        for a, b in itertools.pairwise(series.samples)
        if b.process_cpu_pct is not None and a.t_s >= busy_from_s and b.t_s <= busy_to_s
    ]
    assert len(inside) >= 4
    assert statistics.fmean(inside) == pytest.approx(expected_pct, rel=0.3, abs=10.0)


def test_t_s_counts_from_the_given_origin(no_gpu: None) -> None:
    sampler = Sampler(interval_s=0.02)
    started_s = time.perf_counter()
    sampler.start(origin_s=started_s - 10.0)
    time.sleep(0.1)
    series = sampler.stop()
    assert 10.0 <= series.samples[0].t_s <= 10.0 + (time.perf_counter() - started_s)


def test_a_cell_shorter_than_the_interval_still_gets_a_sample(no_gpu: None) -> None:
    started_s = time.perf_counter()
    sampler = Sampler(interval_s=5.0).start()
    time.sleep(0.35)
    series = sampler.stop()
    assert len(series.samples) == 1
    # Taken at stop: after the cell's 0.35 s, before stop() returned.
    assert 0.35 <= series.samples[0].t_s <= time.perf_counter() - started_s


# --- children (DataLoader workers) ------------------------------------------------------------


def cpu_s(process: psutil.Process) -> float:
    """CPU seconds a process has used so far (the reference the sampler is checked against)."""
    times = process.cpu_times()
    return float(times.user + times.system)


def sample_children_against_reference(
    process: psutil.Process, seconds: float, interval_s: float = 0.1, min_inside: int = 4
) -> tuple[list[float], float]:
    """Sample while ``process`` runs (``seconds`` and until ``min_inside`` samples are in the
    window); return the children CPU % of the samples taken inside the window, and the CPU %
    the process really got over that window. The reference makes the check independent of how
    loaded the machine is (a burner gets less than a core then)."""
    origin_s = time.perf_counter()
    sampler = Sampler(interval_s=interval_s).start(origin_s=origin_s)
    wait_for_samples(sampler, 1)  # its baseline is taken: measure from here
    from_s = time.perf_counter() - origin_s
    first = len(sampler.snapshot().samples)
    cpu_from_s = cpu_s(process)
    time.sleep(seconds)
    # The first sample after from_s may be within one interval of it (not counted below).
    wait_for_samples(sampler, max(first + min_inside + 1, len(sampler.snapshot().samples) + 4))
    cpu_to_s = cpu_s(process)
    to_s = time.perf_counter() - origin_s
    series = sampler.stop()
    inside = [
        s.children_cpu_pct
        for s in series.samples
        if s.children_cpu_pct is not None and from_s + interval_s <= s.t_s <= to_s
    ]
    return inside, 100.0 * (cpu_to_s - cpu_from_s) / (to_s - from_s)


def test_a_child_burning_cpu_is_seen_as_what_it_uses_on_every_tick(
    no_gpu: None, request: pytest.FixtureRequest
) -> None:
    if not in_own_process(request):
        return
    # Three child-list refreshes (about one a second): the child's CPU baseline must survive
    # them, or each refresh tick reads exactly 0.0. On a very loaded machine a starved burner
    # can also read 0.0 once in a while (CPU time is counted in 10 ms ticks): allow one.
    with burning_child() as burner:
        inside, expected_pct = sample_children_against_reference(
            psutil.Process(burner.pid), 3.3, interval_s=0.25, min_inside=10
        )
    assert len(inside) >= 10
    assert sum(pct == 0.0 for pct in inside) <= 1, inside
    assert statistics.fmean(inside) == pytest.approx(expected_pct, rel=0.35, abs=5.0)


def test_children_rss_is_added_to_the_process_rss(
    no_gpu: None, burner: subprocess.Popen[bytes]
) -> None:
    series = run_for(Sampler(interval_s=0.05), 0.2, min_samples=2)
    child_rss = psutil.Process(burner.pid).memory_info().rss
    own_rss = psutil.Process().memory_info().rss
    assert series.samples[-1].rss_bytes is not None
    assert series.samples[-1].rss_bytes >= own_rss + child_rss // 2


def test_grandchildren_count_too(no_gpu: None, request: pytest.FixtureRequest) -> None:
    if not in_own_process(request):
        return
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN!r}])"
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.perf_counter() + 10.0
        while not psutil.Process(parent.pid).children() and time.perf_counter() < deadline:
            time.sleep(0.01)  # wait until the grandchild exists
        (grandchild,) = psutil.Process(parent.pid).children()
        inside, expected_pct = sample_children_against_reference(grandchild, 0.8)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert inside
    assert statistics.fmean(inside) == pytest.approx(expected_pct, rel=0.35, abs=5.0)


def test_descendants_from_proc_children_files_match_psutils_full_walk(
    request: pytest.FixtureRequest,
) -> None:
    """The cheap listing (our threads' /proc children files) finds what psutil's walk finds."""
    if not in_own_process(request):  # no other child may start or end between the two
        return
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN!r}])"
    parents = [
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for _ in range(2)
    ]
    try:
        deadline = time.perf_counter() + 10.0
        while (
            any(not psutil.Process(p.pid).children() for p in parents)
            and time.perf_counter() < deadline
        ):
            time.sleep(0.01)
        listed = _proc_descendants(os.getpid())
        walked = {c.pid for c in psutil.Process().children(recursive=True)}
    finally:
        for p in parents:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if listed is None:
        pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children files")
    assert len(walked) == 4  # two children, two grandchildren (nothing else: its own process)
    assert set(listed) == walked


def test_a_child_started_after_the_sampler_is_picked_up(
    no_gpu: None, request: pytest.FixtureRequest
) -> None:
    if not in_own_process(request):  # elsewhere other children's CPU would pass it
        return
    sampler = Sampler(interval_s=0.1).start()
    wait_for_samples(sampler, 2)
    child = subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True)
    try:
        # The child list is refreshed about once a second; allow a loaded machine ten.
        deadline = time.perf_counter() + 10.0
        while time.perf_counter() < deadline:
            if max(s.children_cpu_pct or 0.0 for s in sampler.snapshot().samples) > 0.0:
                break
            time.sleep(0.05)
    finally:
        series = sampler.stop()
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert series.samples[0].children_cpu_pct is None  # no child yet: not read
    # Any CPU at all: an unseen child, or one seen for the first time, reads None.
    assert max(s.children_cpu_pct or 0.0 for s in series.samples) > 0.0


# Run in a process of its own: in the suite's process other children live on (DataLoader workers an
# earlier test's shell left running wake every few seconds), and their CPU is children CPU too.
CHILD_EXITS = """
import json, os, signal, subprocess, sys, time
from gpu_notebook.capture import nvml
from gpu_notebook.capture.sampler import Sampler
from tests import fake_nvml

def wait_for(sampler, count, timeout_s=20.0):
    deadline = time.perf_counter() + timeout_s
    while len(sampler.snapshot().samples) < count:
        assert time.perf_counter() < deadline, f"fewer than {count} samples in {timeout_s} s"
        time.sleep(0.005)

with nvml.use_library(fake_nvml.library_missing()):
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    origin_s = time.perf_counter()
    sampler = Sampler(interval_s=0.05).start(origin_s=origin_s)
    time.sleep(0.4)
    wait_for(sampler, 4)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()  # reaped: reading the cached psutil.Process now raises NoSuchProcess
    killed_at_s = time.perf_counter() - origin_s
    time.sleep(0.4)
    wait_for(sampler, len(sampler.snapshot().samples) + 6)
    series = sampler.stop()  # would re-raise the sampler thread's error
print(json.dumps({"killed_at_s": killed_at_s, "samples": [
    [s.t_s, s.children_cpu_pct, s.children] for s in series.samples]}))
"""


def test_a_child_that_exits_mid_run_is_dropped_without_stopping_the_sampler() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", CHILD_EXITS],
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    killed_at_s = got["killed_at_s"]
    samples = got["samples"]
    before = [s for s in samples[1:] if s[0] < killed_at_s - 0.05]
    after = [s for s in samples if s[0] > killed_at_s + 0.06]
    assert max(cpu or 0.0 for _, cpu, _ in before) > 0.0
    assert all(count == 1 for _, _, count in before)
    assert len(after) >= 4  # still sampling after the child died
    assert all(cpu is None and count == 0 for _, cpu, count in after)  # no child left: not read


# --- bounded memory ---------------------------------------------------------------------------


def test_a_long_run_never_exceeds_capacity_and_still_covers_the_whole_run(no_gpu: None) -> None:
    seen: list[Sample] = []
    sampler = Sampler(interval_s=0.004, capacity=8, listener=seen.append).start()
    try:
        deadline = time.perf_counter() + 20.0
        while len(seen) < 40 and time.perf_counter() < deadline:
            assert len(sampler.snapshot().samples) <= 8
            time.sleep(0.002)
    finally:
        series = sampler.stop()
    assert len(seen) >= 40  # the live view saw every tick
    assert len(series.samples) <= 8
    assert series.downsample_factor >= 8
    assert series.interval_s == pytest.approx(0.004 * series.downsample_factor)
    assert series.samples[0] == seen[0]  # the start of the run is still there...
    assert series.samples[-1] == seen[-1]  # ...and so is its end
    assert list(series.samples) == sorted(series.samples, key=lambda s: s.t_s)


@pytest.mark.parametrize(("capacity", "kept"), [(4, (0, 2, 4)), (5, (1, 3, 5))])
def test_downsampling_keeps_every_other_sample_and_the_newest(
    no_gpu: None, capacity: int, kept: tuple[int, ...]
) -> None:
    seen: list[Sample] = []
    release = threading.Event()

    def hold_after_overflow(sample: Sample) -> None:
        seen.append(sample)
        if len(seen) == capacity + 1:
            release.wait(20.0)  # hold the sampler thread: the buffer cannot change meanwhile

    sampler = Sampler(interval_s=0.01, capacity=capacity, listener=hold_after_overflow).start()
    deadline = time.perf_counter() + 20.0
    while len(seen) <= capacity and time.perf_counter() < deadline:
        time.sleep(0.001)
    snapshot = sampler.snapshot()
    release.set()
    sampler.stop()
    assert snapshot.downsample_factor == 2
    assert snapshot.samples == tuple(seen[i] for i in kept)


def test_capacity_and_interval_are_validated() -> None:
    with pytest.raises(ValueError, match="capacity"):
        Sampler(capacity=3)
    with pytest.raises(ValueError, match="interval_s"):
        Sampler(interval_s=0)


# --- faults -----------------------------------------------------------------------------------


def test_a_gpu_lost_mid_run_is_noted_once_and_sampling_goes_on() -> None:
    with nvml.use_library(fake_nvml.gpu_lost_after(reads=3, index=0)):
        series = run_for(Sampler(interval_s=0.03), 0.5, min_samples=10)
    lost_notes = [n for n in series.notes if n.startswith("GPU 0 lost")]
    assert len(lost_notes) == 1
    assert re.fullmatch(r"GPU 0 lost at \d+\.\d s", lost_notes[0])
    assert [[g.index for g in s.gpus] for s in series.samples[:3]] == [[0, 1]] * 3
    after = series.samples[3:]
    assert len(after) >= 5
    assert all([g.index for g in s.gpus] == [1] for s in after)
    assert all(s.process_cpu_pct is not None and s.per_core_cpu_pct for s in after)
    lost_at = float(lost_notes[0].split()[-2])
    assert lost_at == pytest.approx(series.samples[3].t_s, abs=0.06)


def test_a_failing_listener_is_noted_once_and_does_not_stop_sampling(no_gpu: None) -> None:
    calls: list[Sample] = []

    def broken_view(sample: Sample) -> None:
        calls.append(sample)
        raise ZeroDivisionError("division by zero")

    series = run_for(Sampler(interval_s=0.02, listener=broken_view), 0.3, min_samples=8)
    assert len(calls) == len(series.samples)  # it keeps being offered every sample
    assert len(series.notes) == 1
    assert "ZeroDivisionError: division by zero" in series.notes[0]


def test_a_bug_in_the_sampler_thread_is_raised_by_stop_not_hidden(
    no_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_read(*args: object) -> None:
        raise KeyError("bug")

    from gpu_notebook.capture import sampler as sampler_module

    monkeypatch.setattr(sampler_module._Probe, "read", broken_read)
    sampler = Sampler(interval_s=0.01).start()
    (thread,) = sampler_threads()
    thread.join(20.0)  # the bug ends the thread at its first tick
    with pytest.raises(KeyError, match="bug"):
        sampler.stop()
    assert sampler_threads() == []


def test_many_gpus_take_turns_for_the_slow_pcie_counters() -> None:
    with nvml.use_library(fake_nvml.healthy(8)):
        series = run_for(Sampler(interval_s=0.05), 0.6, min_samples=9)
    with_pcie = [
        [g.index for g in s.gpus if g.pcie_rx_bytes_per_s is not None] for s in series.samples
    ]
    assert all(len(indices) == 1 for indices in with_pcie)  # 0.5 * 50 ms fits one 2 x 20 ms read
    assert {i for indices in with_pcie[:8] for i in indices} == set(range(8))
    assert all(len(s.gpus) == 8 for s in series.samples)  # the other metrics every tick


# --- lifecycle --------------------------------------------------------------------------------


def test_the_thread_is_hidden_named_and_gone_after_stop(no_gpu: None) -> None:
    sampler = Sampler(interval_s=0.05).start()
    (thread,) = sampler_threads()
    assert thread.ident not in {t.ident for t in threading.enumerate()}  # a join-all never waits
    assert sampler.running
    sampler.stop()
    assert sampler_threads() == []
    assert not sampler.running


def test_stop_returns_promptly_even_with_a_long_interval(no_gpu: None) -> None:
    # A stop that waited for the next tick would take a minute (or the 10 s join timeout, with
    # its note): 5 s leaves a busy machine room and still tells the two apart.
    sampler = Sampler(interval_s=60.0).start()
    time.sleep(0.1)
    started = time.perf_counter()
    series = sampler.stop()
    assert time.perf_counter() - started < 5.0
    assert series.notes == ()


def test_fifty_start_stop_cycles_leave_no_thread(no_gpu: None) -> None:
    # Counted against the threads alive before (not a fixed number: earlier tests in this
    # process may have left threads of their own, an IPython shell's or a library's).
    before = set(threading.enumerate())
    reused = Sampler(interval_s=0.01)
    for _ in range(50):
        Sampler(interval_s=0.01).start().stop()
        reused.start()
        reused.stop()
    assert sampler_threads() == []
    assert set(threading.enumerate()) <= before


def test_each_start_begins_a_new_series(no_gpu: None) -> None:
    sampler = Sampler(interval_s=0.01)
    first_start_s = time.perf_counter()
    first = run_for(sampler, 0.1)
    time.sleep(0.5)
    second_start_s = time.perf_counter()
    second = run_for(sampler, 0.05)
    second_took_s = time.perf_counter() - second_start_s
    assert first.samples and second.samples
    assert second.samples[0] not in first.samples
    # Counted from the second start: at most the second run's length, and sooner than any time
    # counted from the first start could be (>= 0.6 s).
    assert second.samples[0].t_s <= second_took_s
    assert second.samples[0].t_s < second_start_s - first_start_s


def test_context_manager_stops_the_thread_even_when_the_cell_fails(no_gpu: None) -> None:
    with pytest.raises(RuntimeError, match="cell failed"), Sampler(interval_s=0.02) as sampler:
        wait_for_samples(sampler, 2)
        raise RuntimeError("cell failed")
    assert sampler_threads() == []
    assert sampler.series.samples
    assert sampler.stop() is sampler.series  # stopping again returns the same series


def test_misuse_is_a_clear_error(no_gpu: None) -> None:
    sampler = Sampler()
    with pytest.raises(RuntimeError, match="before start"):
        sampler.stop()
    sampler.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            sampler.start()
    finally:
        sampler.stop()


# --- cost -------------------------------------------------------------------------------------


def test_tick_cost_is_measured_from_the_sampler_threads_own_clock(no_gpu: None) -> None:
    # The mechanism only: the budget (<= 1% of one core at the default 0.25 s) is a timing
    # claim and lives in benchmarks/sampler_cost.py. A busy CI box once read 2.75 ms a tick here.
    # The main thread hashes meanwhile, outside the GIL: a process clock would count its CPU in
    # the ticks (more CPU than wall time per tick); the thread's own clock never reads more.
    block = os.urandom(1 << 20)
    sampler = Sampler(interval_s=0.02)
    sampler.start()
    try:
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline or len(sampler.snapshot().samples) < 30:
            hashlib.sha256(block).digest()
    finally:
        sampler.stop()
    cost = sampler.tick_cost()
    assert cost is not None
    assert cost.ticks >= 20
    assert 0 < cost.median_cpu_us <= cost.p90_cpu_us
    assert cost.median_wall_us <= cost.max_wall_us
    assert cost.median_cpu_us <= cost.median_wall_us + 100.0, cost
    assert cost.core_pct == pytest.approx(100.0 * cost.mean_cpu_us * 1e-6 / cost.interval_s)


def test_a_shell_lines_programs_are_no_workers(
    no_gpu: None, request: pytest.FixtureRequest
) -> None:
    """A cell's `!echo` line (IPython runs it through /bin/sh) was counted as a DataLoader
    worker: "More threads than free cores: 3 wanted" for torch's 2 threads. Only children that
    run this interpreter (the workers' fork or spawn) are counted; the cell waits for a shell
    line's programs, which never want a core beside its steps."""
    if not in_own_process(request):
        return
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 30; true"], start_new_session=True)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              start_new_session=True)  # fmt: skip
    try:
        series = run_for(Sampler(interval_s=0.05), 0.3, min_samples=3)
    finally:
        for child in (shell, worker):
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert {s.children for s in series.samples} == {1}, [s.children for s in series.samples]
