"""Background sampler: this process, its children, the machine's cores and every GPU, bounded.

One background thread ("gpu_notebook-sampler", hidden from threading.enumerate(): capture/threads.py) wakes every ``interval_s`` and appends a
:class:`~gpu_notebook.records.Sample` to a fixed-size buffer. When the buffer is full it keeps
every other sample and doubles its interval, so memory stays flat and the samples still cover
the whole run at even spacing, however long the cell runs.

What it reads, and why that way:

* psutil for this process and its children, recursively (DataLoader workers are processes):
  CPU % with 100 = one core, RSS summed. psutil's ``cpu_percent`` is a difference between two
  calls on the *same* ``Process`` object, so child objects are cached across ticks; the child
  list itself walks all of ``/proc`` and is refreshed at most once a second.
* Per-core CPU from ``psutil.cpu_times(percpu=True)`` differences kept here, not from
  ``psutil.cpu_percent``, whose "since the last call" baseline is shared with any other caller
  in the thread (and with the whole process before psutil 6).
* The process's other Python threads (not the loop's, not ours): their time on a core and where
  each stands (:mod:`gpu_notebook.capture.own_threads_spin`), so a thread of the program that
  spins beside the loop is not read as the machine's load.
* GPUs only through the NVML door (:mod:`gpu_notebook.capture.nvml`). A GPU that is lost is
  noted once ("GPU 0 lost at 12.3 s") and no longer read; sampling goes on.

The budget is at most 1% of one core at the default 0.25 s; :meth:`Sampler.tick_cost` reports
what the ticks actually cost.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from gpu_notebook.capture import nvml
from gpu_notebook.capture.own_threads_spin import ThreadWatch
from gpu_notebook.capture.threads import HiddenThread, StartsAndStops, forget_dummy
from gpu_notebook.records import GpuSample, Sample, SampleSeries

__all__ = ["THREAD_NAME", "Sampler", "TickCost"]

THREAD_NAME = "gpu_notebook-sampler"

# NVML measures PCIe throughput over a 20 ms window inside each call, two calls per GPU: on a
# many-GPU machine reading them all every tick would stretch a tick past its interval. Spend at
# most this share of the interval waiting on them; GPUs take turns (the others report None).
_PCIE_CALL_S = 0.020
_PCIE_SHARE_OF_INTERVAL = 0.5
# Listing children walks /proc (about 0.7 ms with 75 processes, more on a busy host): refresh it
# at most once a second, and rarely enough that listing stays under 0.5% of a core.
_CHILD_REFRESH_MIN_S = 1.0
_CHILD_REFRESH_CORE_SHARE = 0.005
# stop() waits this long for the thread: a GPU query can hang inside a failing driver, and a
# notebook must not hang with it.
_JOIN_TIMEOUT_S = 10.0
_TICK_COSTS_KEPT = 4096
_MIN_FINAL_GAP_S = 0.02


@dataclass(frozen=True)
class TickCost:
    """What the sampler's ticks cost: the sampler thread's CPU time and wall time per tick."""

    ticks: int
    mean_cpu_us: float
    median_cpu_us: float
    p90_cpu_us: float
    median_wall_us: float
    max_wall_us: float
    interval_s: float  # the effective interval the ticks ran at (last one)

    @property
    def core_pct(self) -> float:
        """Share of one core the sampler uses at ``interval_s``, in % (mean tick: the ticks
        that refresh the child list cost more than the median one)."""
        return 100.0 * self.mean_cpu_us * 1e-6 / self.interval_s


class Sampler(StartsAndStops):
    """Samples CPU, memory and GPUs in a background thread into a bounded series.

    ``listener`` is called from the sampler thread with each new sample (for a live view); it
    must be quick. If it raises, a note is recorded once and sampling continues.

    Use as a context manager (``with Sampler() as s: ...; series = s.series``) or call
    :meth:`start` and :meth:`stop` (which returns the series). A sampler can be started again
    after it stopped; each start begins a new series.
    """

    def __init__(
        self,
        interval_s: float = 0.25,
        capacity: int = 2048,
        listener: Callable[[Sample], None] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        if capacity < 4:
            raise ValueError(f"capacity must be at least 4 samples, got {capacity!r}")
        self.requested_interval_s = float(interval_s)
        self.capacity = int(capacity)
        self.listener = listener
        self._lock = threading.Lock()  # guards the buffer and notes (read by live views)
        self._thread: HiddenThread | None = None
        self._stop_event = threading.Event()
        self._series: SampleSeries | None = None
        # Per-run state, (re)set by _reset() at each start.
        self._origin_s = 0.0
        self._interval_s = self.requested_interval_s
        self._downsample_factor = 1
        self._samples: list[Sample] = []
        self._notes: list[str] = []
        self._tick_cpu_s: deque[float] = deque(maxlen=_TICK_COSTS_KEPT)
        self._tick_wall_s: deque[float] = deque(maxlen=_TICK_COSTS_KEPT)
        self._listener_failed = False
        self._error: BaseException | None = None  # the sampler thread's own failure, for stop()
        self._watch = ThreadWatch(None)  # the process's other threads (set at each start)
        self._reset(time.perf_counter())

    # --- public API ------------------------------------------------------------------------

    def start(self, *, origin_s: float | None = None) -> Sampler:
        """Start the sampler thread. ``origin_s``: the ``time.perf_counter()`` value that
        samples' ``t_s`` count from (the capture's start, shared with the step clock);
        default now. Raises RuntimeError if it is already running."""
        if self._thread is not None:
            raise RuntimeError("this Sampler is already running; stop() it first")
        self._reset(time.perf_counter() if origin_s is None else origin_s)
        # The thread that starts the sampler runs the measured code: its run-queue wait (time
        # it was ready to run while the machine ran something else) is the interference it met.
        self._main_tid = threading.get_native_id()
        self._watch = ThreadWatch(self._main_tid)
        self._stop_event = threading.Event()
        self._thread = HiddenThread(self._run, THREAD_NAME).start()
        return self

    def stop(self) -> SampleSeries:
        """Stop and join the thread and return the series. Prompt whatever the interval: the
        thread wakes at once, takes a last sample if the previous one is not recent, and ends.

        Calling it again returns the same series. If the sampler thread itself failed (a bug
        here), that error is raised now rather than hidden.
        """
        thread = self._thread
        if thread is None:
            if self._series is None:
                raise RuntimeError("Sampler.stop() called before start()")
            return self._series
        self._stop_event.set()
        thread.join(_JOIN_TIMEOUT_S)
        if thread.is_alive():
            self._note(
                f"sampler thread did not stop within {_JOIN_TIMEOUT_S:.0f} s "
                "(a GPU query is hanging); it will exit when the query returns"
            )
        self._thread = None
        self._series = self.snapshot()
        error, self._error = self._error, None
        if error is not None:
            raise error
        return self._series

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def series(self) -> SampleSeries:
        """The series so far (while running) or of the last run (after stop)."""
        if self._thread is None and self._series is not None:
            return self._series
        return self.snapshot()

    def snapshot(self) -> SampleSeries:
        """A consistent copy of the buffer, safe to call from any thread."""
        with self._lock:
            return SampleSeries(
                requested_interval_s=self.requested_interval_s,
                interval_s=self._interval_s,
                samples=tuple(self._samples),
                downsample_factor=self._downsample_factor,
                notes=tuple(self._notes),
                threads=self._watch.records(),
            )

    def tick_cost(self) -> TickCost | None:
        """Measured cost of the ticks of the current or last run; None before the first tick."""
        with self._lock:
            cpu_s = sorted(self._tick_cpu_s)
            wall_s = list(self._tick_wall_s)
            interval_s = self._interval_s
        if not cpu_s:
            return None
        return TickCost(
            ticks=len(cpu_s),
            mean_cpu_us=statistics.fmean(cpu_s) * 1e6,
            median_cpu_us=statistics.median(cpu_s) * 1e6,
            p90_cpu_us=cpu_s[min(len(cpu_s) - 1, int(0.9 * len(cpu_s)))] * 1e6,
            median_wall_us=statistics.median(wall_s) * 1e6,
            max_wall_us=max(wall_s) * 1e6,
            interval_s=interval_s,
        )

    # --- the thread ------------------------------------------------------------------------

    def _reset(self, origin_s: float) -> None:
        with self._lock:
            self._origin_s = origin_s
            self._interval_s = self.requested_interval_s
            self._downsample_factor = 1
            self._samples = []
            self._notes = []
            self._tick_cpu_s.clear()
            self._tick_wall_s.clear()
        self._listener_failed = False
        self._error = None
        self._series = None

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop(): a bug here must not pass silently
            self._error = exc

    def _loop(self) -> None:
        probe = _Probe(
            getattr(self, "_main_tid", None), self._watch
        )  # this thread's (psutil, NVML)
        probe.prime()
        last_tick = time.perf_counter()
        due = last_tick + self._interval_s
        while not self._stop_event.wait(max(0.0, due - time.perf_counter())):
            last_tick = time.perf_counter()
            self._tick(probe, last_tick)
            # Read the interval after the tick: a downsampling tick just doubled it.
            due += self._interval_s
            if due <= time.perf_counter():
                # A tick overran (slow driver, GIL held by the cell): skip, don't burst.
                due = time.perf_counter() + self._interval_s
        # One last sample so that the end of the run is covered and a cell shorter than the
        # interval still gets one; but not right after a tick: CPU % over a gap of a few
        # scheduler ticks (10 ms) would be noise.
        now = time.perf_counter()
        gap_s = now - last_tick
        if gap_s >= 0.5 * self._interval_s or (gap_s >= _MIN_FINAL_GAP_S and not self._samples):
            self._tick(probe, now)

    def _tick(self, probe: _Probe, now: float) -> None:
        cpu_start = time.thread_time()
        t_s = now - self._origin_s
        sample, lost = probe.read(t_s, self._interval_s)
        with self._lock:
            for index in lost:
                self._notes.append(f"GPU {index} lost at {t_s:.1f} s")
            if len(self._samples) >= self.capacity:
                # Keep every other sample, the newest included, so spacing stays even from
                # here on at the doubled interval.
                merged = [*self._samples, sample]
                self._samples = merged[(len(merged) - 1) % 2 :: 2]
                self._downsample_factor *= 2
                self._interval_s *= 2
            else:
                self._samples.append(sample)
            self._tick_cpu_s.append(time.thread_time() - cpu_start)
            self._tick_wall_s.append(time.perf_counter() - now)
        if self.listener is not None:
            self._call_listener(sample, t_s)

    def _call_listener(self, sample: Sample, t_s: float) -> None:
        assert self.listener is not None
        try:
            self.listener(sample)
        except Exception as exc:  # noqa: BLE001 - a view's failure is noted, sampling goes on
            # The listener is a view's code; its failure must not end the measurement. It is
            # recorded (once: a broken view would fail every tick), not hidden.
            if not self._listener_failed:
                self._listener_failed = True
                self._note(
                    f"live view stopped updating at {t_s:.1f} s "
                    f"({type(exc).__name__}: {exc}); sampling continued"
                )
        finally:
            forget_dummy()  # the view's code may have registered this thread with threading

    def _note(self, note: str) -> None:
        with self._lock:
            self._notes.append(note)


def _exe(process: psutil.Process) -> str | None:
    """The program ``process`` runs; None where it cannot be read (ended, a zombie, denied)."""
    try:
        return process.exe() or None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class _Probe:
    """The reading side of one run; used by the sampler thread only."""

    def __init__(self, main_tid: int | None = None, watch: ThreadWatch | None = None) -> None:
        self.main_tid = main_tid
        self.watch = watch
        self.run_wait: tuple[float, int] | None = None  # (perf_counter s, run-queue wait ns)
        self.process = psutil.Process()
        self.children: dict[int, psutil.Process] = {}
        self.new_children: set[int] = set()  # primed this tick: no CPU % yet
        # Children running this interpreter (DataLoader and multiprocessing workers): what a
        # sample counts. A shell line's programs (`!echo`, `files = !ls`) are other programs,
        # and the cell's thread waits for them: no process that wants a core beside its steps.
        self.exe = _exe(self.process)
        self.workers: set[int] = set()
        self.children_due_s = 0.0
        self.child_refresh_s = _CHILD_REFRESH_MIN_S
        self.cpu_times: Sequence[Any] = ()
        self.gpus: list[int] = []
        self.pcie_cursor = 0

    def prime(self) -> None:
        """Take the baselines that the first tick's percentages are measured against."""
        self.process.cpu_percent()
        self.cpu_times = psutil.cpu_times(percpu=True)
        self._read_run_wait()
        self._refresh_children(time.perf_counter())
        self.new_children.clear()
        state = nvml.status()  # may start NVML: slow on some hosts, so here, off the cell's thread
        self.gpus = list(range(state.gpu_count)) if state.available else []

    def read(self, t_s: float, interval_s: float) -> tuple[Sample, list[int]]:
        """One sample, and the GPUs found lost during it."""
        with self.process.oneshot():
            process_cpu_pct = self.process.cpu_percent()
            rss_bytes = self.process.memory_info().rss
        children_cpu_pct, children_rss_bytes = self._read_children()
        before = self.cpu_times
        per_core = self._read_cores()
        gpus, lost = self._read_gpus(interval_s)
        sample = Sample(
            t_s=t_s,
            process_cpu_pct=process_cpu_pct,
            children_cpu_pct=children_cpu_pct,
            system_cpu_pct=sum(per_core) / len(per_core) if per_core else None,
            per_core_cpu_pct=per_core,
            # Summed RSS counts pages shared by forked workers once per worker: an upper bound
            # (exact USS would need /proc/<pid>/smaps, far too slow per tick).
            rss_bytes=rss_bytes + children_rss_bytes,
            gpus=gpus,
            steal_pct=_steal_pct(before, self.cpu_times),
            children=len(self.workers.intersection(self.children)),
            run_wait_pct=self._read_run_wait(),
        )
        if self.watch is not None:
            self.watch.read(t_s)
        return sample, lost

    def _read_children(self) -> tuple[float | None, int]:
        """(the children's CPU %, or None where this tick read none of them or only some;
        their RSS). psutil's first ``cpu_percent`` of a process is its baseline and reads
        nothing: a tick that lists a new worker has read no CPU of it, and a tick before the
        workers are listed has read none of theirs. A 0.0 there read as "the workers are idle"
        (notebook 24's 2 workers, "0% of a core: they wait", told num_workers=4 on 2 cores)."""
        now = time.perf_counter()
        if now >= self.children_due_s:
            self._refresh_children(now)
        cpu_pct = 0.0
        read = 0
        rss_bytes = 0
        for pid, child in list(self.children.items()):
            try:
                with child.oneshot():
                    if pid not in self.new_children:
                        cpu_pct += child.cpu_percent()
                        read += 1
                    rss_bytes += child.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                # Exited between listing and reading (workers end with each epoch): forget it.
                del self.children[pid]
        whole = read > 0 and not self.new_children
        self.new_children.clear()
        return (cpu_pct if whole else None), rss_bytes

    def _refresh_children(self, now: float) -> None:
        # CPU time, not wall time: on a loaded machine the wall time of the listing includes
        # waiting for a core, and would stretch the refresh period for no saving.
        cpu_start = time.thread_time()
        kept: dict[int, psutil.Process] = {}
        pids = _proc_descendants(self.process.pid)
        if pids is None:  # no /proc/<pid>/task/<tid>/children here: psutil walks all of /proc
            try:
                listed = self.process.children(recursive=True)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                listed = list(self.children.values())
        else:
            # Known pids keep their Process object (and its cpu_percent baseline) unread; a
            # pid reused within a refresh period is not worth a /proc read per child per tick.
            kept.update((pid, self.children[pid]) for pid in pids if pid in self.children)
            listed = []
            for pid in pids:
                if pid not in kept:
                    try:
                        listed.append(psutil.Process(pid))
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        continue
        for child in listed:
            known = self.children.get(child.pid)
            if known is not None and known == child:  # same pid and start time: same process
                kept[child.pid] = known  # keeps its cpu_percent baseline
                continue
            try:
                child.cpu_percent()  # baseline; its first CPU % comes next tick
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            kept[child.pid] = child
            self.new_children.add(child.pid)
            if self.exe is None or _exe(child) == self.exe:
                self.workers.add(child.pid)
            else:
                self.workers.discard(child.pid)
        self.children = kept
        self.workers.intersection_update(kept)
        cost_s = time.thread_time() - cpu_start
        self.child_refresh_s = max(_CHILD_REFRESH_MIN_S, cost_s / _CHILD_REFRESH_CORE_SHARE)
        self.children_due_s = now + self.child_refresh_s

    def _read_run_wait(self) -> float | None:
        """Share of the time since the last reading that the measured thread spent ready to run
        but waiting for a core (Linux schedstat ``run_delay``; sleeping or blocked is not it)."""
        if self.main_tid is None:
            return None
        try:
            with open(f"/proc/self/task/{self.main_tid}/schedstat", "rb") as f:
                wait_ns = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            self.main_tid = None  # no schedstat here (or the thread ended): not measured
            return None
        now = time.perf_counter()
        last, self.run_wait = self.run_wait, (now, wait_ns)
        if last is None or now <= last[0]:
            return None
        return min(100.0, max(0.0, 100.0 * (wait_ns - last[1]) / 1e9 / (now - last[0])))

    def _read_cores(self) -> tuple[float, ...]:
        times = psutil.cpu_times(percpu=True)
        per_core = tuple(_busy_pct(a, b) for a, b in zip(self.cpu_times, times, strict=True))
        self.cpu_times = times
        return per_core

    def _read_gpus(self, interval_s: float) -> tuple[tuple[GpuSample, ...], list[int]]:
        if not self.gpus:
            return (), []
        with_pcie = self._pcie_turn(interval_s)
        readings: list[GpuSample] = []
        lost: list[int] = []
        for index in self.gpus:
            try:
                reading = nvml.read_gpu(index, pcie=index in with_pcie)
                readings.append(self._with_others(index, reading))
            except nvml.GpuLostError:
                lost.append(index)
        self.gpus = [index for index in self.gpus if index not in lost]
        return tuple(readings), lost

    def _with_others(self, index: int, reading: GpuSample) -> GpuSample:
        """The reading with the count of other processes computing on the GPU (interference):
        not ours, not our children. NVML may refuse the list (containers): then not known."""
        try:
            listed = nvml.gpu_processes(index)
        except (IndexError, nvml.GpuLostError):
            return reading
        if listed is None:
            return reading
        ours = {self.process.pid, *self.children}
        others = sum(1 for p in listed if p.pid not in ours)
        return dataclasses.replace(reading, other_processes=others)

    def _pcie_turn(self, interval_s: float) -> set[int]:
        """The GPUs whose PCIe counters are read this tick (all of them unless too many)."""
        per_tick = max(1, int(_PCIE_SHARE_OF_INTERVAL * interval_s / (2 * _PCIE_CALL_S)))
        if len(self.gpus) <= per_tick:
            return set(self.gpus)
        start = self.pcie_cursor % len(self.gpus)
        self.pcie_cursor = start + per_tick
        return {self.gpus[(start + k) % len(self.gpus)] for k in range(per_tick)}


def _proc_descendants(pid: int) -> list[int] | None:
    """Every descendant of ``pid`` from Linux's per-thread ``children`` files; None without them.

    psutil's ``children(recursive=True)`` reads the stat file of every process on the machine
    (~1 ms with 80 processes, more on a busy host); these files list only our own children
    (a process's children are spread over the threads that forked them).
    """
    found: list[int] = []
    todo = [pid]
    first = True
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            if first:
                return None
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as fh:
                    text = fh.read()
            except FileNotFoundError:
                if first:
                    return None  # kernel without CONFIG_PROC_CHILDREN
                continue
            except OSError:
                continue
            first = False
            for word in text.split():
                found.append(int(word))
                todo.append(int(word))
        first = False
    return found


def _steal_pct(before: Sequence[Any], after: Sequence[Any]) -> float | None:
    """Mean share of the cores' time stolen by the hypervisor between two readings (Linux)."""
    if not before or len(before) != len(after) or not hasattr(after[0], "steal"):
        return None
    total = sum(_total_s(b) - _total_s(a) for a, b in zip(before, after, strict=True))
    if total <= 0:
        return None
    stolen = sum(float(b.steal) - float(a.steal) for a, b in zip(before, after, strict=True))
    return min(100.0, max(0.0, 100.0 * stolen / total))


def _busy_pct(before: Any, after: Any) -> float:
    """Busy share of one core between two ``cpu_times`` readings, as psutil computes it."""
    total = _total_s(after) - _total_s(before)
    if total <= 0:
        return 0.0
    idle = float(after.idle) - float(before.idle)
    # Linux does not count I/O wait as idle; psutil and htop treat it as idle too.
    idle += float(getattr(after, "iowait", 0.0)) - float(getattr(before, "iowait", 0.0))
    return min(100.0, max(0.0, 100.0 * (total - idle) / total))


def _total_s(times: Any) -> float:
    # Linux counts guest time inside user/nice already; psutil and htop subtract it too.
    guest_s = float(getattr(times, "guest", 0.0)) + float(getattr(times, "guest_nice", 0.0))
    return sum(float(part) for part in times) - guest_s
