"""The capture session: sampler thread + step clock + profiler window around one run of code.

A context manager whose exit always removes every hook, stops the profiler and joins the sampler
thread, whatever the measured code did (returned, raised, was interrupted). It decides nothing:
it returns a frozen ``Run`` for the analysis.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import CodeType
from typing import Any, Literal

from gpu_notebook.capture import ranks
from gpu_notebook.capture.environment import (
    read_environment,
    torch_facts,
    torch_installed,
    torch_threads,
)
from gpu_notebook.capture.imports import ImportWatch
from gpu_notebook.capture.sampler import Sampler
from gpu_notebook.capture.stacks import StackSampler
from gpu_notebook.capture.threads import StartsAndStops
from gpu_notebook.records import (
    CellStatus,
    Environment,
    LiveStatus,
    ProfileWindow,
    RankInfo,
    RawStacks,
    Run,
    Sample,
    SampleSeries,
    StepClockRecord,
    WithinStep,
)


@dataclass(frozen=True)
class CaptureOptions:
    """What to record. Defaults: 2 warm-up steps skipped, 3 steps profiled, 4 samples a second.

    Three profiled steps, as in torch.profiler's documented schedule (``active=3``): stopping
    the profiler costs ~0.5 ms of Kineto post-processing per profiled MLP step, paid inside the
    user's step that ends the window, and the overhead budget (<= 3% of a 300-step loop,
    benchmarks/README.md) has no room for more by default. ``-s N`` records more.
    """

    warmup_steps: int = 2
    profile_steps: int = 3
    interval_s: float = 0.25
    profile: bool = True
    sample_capacity: int = 2048
    # Line-level stack sampling: during the profiler window ("window"; the whole cell when no
    # window records), for the whole cell ("all"), or not at all ("off").
    lines: Literal["window", "all", "off"] = "window"
    # 200 Hz over the few steps after the window (a short span needs dense samples); 50 Hz over
    # a whole cell, where samples add up anyway: each sample costs ~170 us of the cell's thread
    # on a nested-virtualisation VM (signal delivery, benchmarks/README.md), 1-3 us on bare
    # metal, and 50 Hz keeps the whole-cell mode within 2% there too (x1.015 on the host-bound
    # MLP loop, x1.006 compute-bound; 200 Hz: x1.040 / x1.020).
    stack_interval_s: float = 0.005
    whole_cell_stack_interval_s: float = 0.02
    # After those few steps ("window"), a second sampler goes on at 25 Hz over the rest of the
    # run, paused while a later window records: work the step repeats inside a framework's loop
    # (Lightning's self.log, the HF Trainer's logging, issue 26) needs more samples than a few
    # steps give. Under a framework's loop its clock is jittered and the switch interval is
    # lowered only from just before each sample until it is taken (the program keeps its own
    # the rest of the time), so its samples fall where the clock says: they give the
    # framework's share (Run.framework_stacks), never a hot line (stacks.py, "The sparse
    # sampler"). Elsewhere it leaves the switch interval alone: a count, no share.
    trickle_stack_interval_s: float = 0.04
    # The edge sampler, over the whole cell but for the profiler windows: the lines of the time
    # before the first step and after the last (an evaluation before training, a checkpoint
    # save, issue 26). It takes no sample between the optimizer's step marks (stacks.py,
    # _StepGate: the steps are running while marks keep coming); 20 Hz names a block of a
    # second or more, at the program's own switch interval (a count, no share).
    edge_stack_interval_s: float = 0.05
    # Later profiler windows over a long cell (profiler.WindowSchedule: spaced, bounded).
    more_windows: bool = True
    window_budget_share: float = 0.01  # their cost (estimated) as a share of the cell's time

    def __post_init__(self) -> None:
        """Reject what cannot be measured, with what to do instead (ValueError)."""
        if self.profile_steps < 1:
            raise ValueError(f"--steps must be at least 1 (got {self.profile_steps})")
        if self.warmup_steps < 0:
            raise ValueError(f"--warmup must be 0 or more (got {self.warmup_steps})")
        if not 0.05 <= self.interval_s <= 60:
            raise ValueError(
                f"--interval must be between 0.05 and 60 seconds (got {self.interval_s})"
            )


LiveListener = Callable[[LiveStatus], None]

# Without an optimizer, how many steps to keep every hook before going lean (see on_boundary).
LEAN_AFTER_UNANCHORED_STEPS = 64
# The timing hooks cost ~28 us a step (benchmarks/README.md): under 1% of a step from 3 ms on.
# Steps at least this long keep every phase timed for the whole cell; shorter ones go lean.
TIMED_MIN_STEP_S = 0.003
# A rank of a multi-process job keeps every phase timed from this step length on: its job
# report tells a straggler from the host's noise by every step's split (report/job.py
# ``run_split``), which a lean clock does not time; the hooks are then under 3% of a step.
JOB_TIMED_MIN_STEP_S = 0.001
# How often (in steps) a long cell's timing is looked at again: lean <-> timed.
RETIME_EVERY_STEPS = 64
# Lean steps are timed again once their median is this far above TIMED_MIN_STEP_S (a margin,
# so a median that wobbles at the threshold does not switch every look; 2x left a cached-then-
# 4 ms loop lean, its slow part untimed, and its verdict to the cached window).
RETIME_MARGIN = 1.25
# Lean steps read their thread's wait for a core at every step end while their median is at
# least this long. One pread of schedstat takes ~1 us alone, but a step of a real loop pays
# ~9 us for it (MLP + DataLoader, 0.6 ms steps, thread CPU with and without the read, 41
# interleaved rounds on the 2-core VM: benchmarks/README.md): <= 1% of a step from 1 ms on.
# Shorter steps are read after a slow one (over 1 ms: the stall's wait) and every 16 steps,
# so a 0.6 ms loop pays ~0.6 us a step instead of ~9.
WAIT_MIN_STEP_S = 0.001
# The process RSS is read at the end of every step (~2 us a read) until MEMORY_READINGS are
# kept, then every other one is dropped and the period doubles (bounded in any cell: ~2 us a
# step over the first 256 steps, then ~128 reads for each doubling of the run). Every 16th step
# gave a 120-step run 8 readings: malloc's growth that slows over epochs read as a line
# (benchmarks/README, stft_per_item_ctc); the readings after the first epoch need enough of
# them to fit.
MEMORY_EVERY_STEPS = 1
MEMORY_READINGS = 256

_EXPORT_COUNTER = itertools.count(1)
# Frameworks whose loop the sparse sampler's clocked samples measure (their logging's share).
_FRAMEWORK_MODULES = ("lightning", "pytorch_lightning", "transformers")

THREAD_WINDOW_NOTE = (
    "the steps ran on a thread the cell started: timed by the step clock's hooks, "
    "no profiler window there"
)


class RunQueueWait:
    """Share of the wall time between two readings that the calling thread did not spend
    waiting for a core (Linux ``/proc/thread-self/schedstat`` run_delay: runnable, not running).

    Sleeping, blocking on I/O or on a GPU is the thread's own time; only the machine's other
    work is taken out. 1.0 where schedstat cannot be read, or when the thread changed (the
    steps moved to a thread the cell started): then nothing is known to take out.
    """

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def _read() -> tuple[int, int, int] | None:
        try:
            with open("/proc/thread-self/schedstat", "rb") as f:
                wait_ns = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            return None
        return threading.get_native_id(), time.perf_counter_ns(), wait_ns

    def own_share(self) -> float:
        now = self._read()
        last, self._last = self._last, now
        if now is None or last is None or now[0] != last[0] or now[1] <= last[1]:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (now[2] - last[2]) / (now[1] - last[1])))


def private_scratch() -> tempfile.TemporaryDirectory[str]:
    """A folder only this user can open (0700, from mkdtemp), removed when the context ends.

    Created after the measured code has ended (a script that calls ``os._exit`` leaves none
    behind) and removed once the report is built and exported.
    """
    return tempfile.TemporaryDirectory(prefix="gpucheck-")


def unique_stem(started_at: str) -> str:
    """``gpucheck-<time>-<pid>-<n>``: two cells started in the same second never share files."""
    stamp = started_at.replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")
    return f"gpucheck-{stamp}-{os.getpid()}-{next(_EXPORT_COUNTER)}"


def copy_trace(src: Path, dst: Path) -> None:
    """Copy a trace out of the temporary folder, gzip-compressed when ``dst`` ends in ``.gz``."""
    data = src.read_bytes()
    if dst.suffix == ".gz" and data[:2] != b"\x1f\x8b":
        data = gzip.compress(data, compresslevel=6)  # one call: ~2 ms for a default window
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class CaptureSession(StartsAndStops):
    """``with CaptureSession(options, source) as s: ...`` then ``s.finish(status, error)``."""

    def __init__(
        self,
        options: CaptureOptions,
        source: str,
        live_listener: LiveListener | None = None,
        first_line: int = 2,
        magic_line: str = "",
        stack_root_codes: Collection[CodeType] | None = None,
        program: Literal["cell", "script"] = "cell",
    ) -> None:
        self.options = options
        self.program = program  # what the report calls it (Run.program)
        self.source = source
        self.first_line = first_line  # 2 in a %%gpucheck cell, 1 in a script
        self.magic_line = magic_line
        # Frames the stack sampler's walk stops at (None: IPython's run_code, for a cell; a
        # script run by the CLI stops at runpy's frame that executes it).
        self._stack_root_codes = stack_root_codes
        self._live_listener = live_listener
        self._notes: list[str] = []
        self._t0_ns = 0
        self._started_at = ""
        self._env: Environment | None = None
        self._rank_at_start: RankInfo | None = None
        self._sampler: Sampler | None = None
        self._clock: Any = None  # StepClock, when torch is installed
        self._window: Any = None  # ProfilerWindow
        self._series: SampleSeries | None = None
        self._steps: StepClockRecord | None = None
        self._window_record: ProfileWindow | None = None
        self._stacks: StackSampler | None = None
        self._raw_stacks: RawStacks | None = None
        self._trickle: StackSampler | None = None  # the sparse sampler after the dense span
        self._raw_trickle: RawStacks | None = None
        self._edges: StackSampler | None = None  # the edge sampler (time outside the steps)
        self._raw_edges: RawStacks | None = None
        self._stack_tid = 0  # a thread the cell started that the step clock followed (0: none)
        self._stack_state = "off"  # waiting -> sampling -> done (then the trickle), or whole
        self._stack_first_step = 0
        self._wall_s = 0.0
        self._closed = False
        self._samplers_lock = threading.Lock()  # _closed against a sampler started late
        self._thread_id = 0
        self._pid = 0
        self._watches: list[ImportWatch] = []
        self._extra_windows: list[Any] = []  # later ProfilerWindows, in start order
        self._extra_records: list[ProfileWindow] = []

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._env = read_environment()
        self._rank_at_start = ranks.current()
        self._started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._t0_ns = time.perf_counter_ns()
        self._thread_id = threading.get_ident()
        self._pid = os.getpid()
        try:
            if torch_installed():
                # Installed when the code imports torch (now, if it already has): never before,
                # so what torch reads at import (OMP_NUM_THREADS...) is what the code set.
                self._watches.append(ImportWatch(["torch"], self._on_torch_imported).start())
            else:
                self._notes.append("torch is not installed: sampling only, no steps or phases")
            self._sampler = Sampler(
                interval_s=self.options.interval_s,
                capacity=self.options.sample_capacity,
                listener=self._on_sample,
            )
            self._sampler.start(origin_s=self._t0_ns / 1e9)
            if self.options.lines != "off":
                # "window": sample the K steps right *after* the profiler window (paused until
                # then), never during it: a sampler waking at 200 Hz stretches the gaps between
                # ops, which the phase split would then report as "unattributed". No window
                # that can record (no torch, --no-profile): the whole cell, at the whole-cell rate.
                follow = (
                    self.options.lines == "window" and self.options.profile and torch_installed()
                )
                self._stack_state = "waiting" if follow else "whole"
                self._stacks = StackSampler(
                    self._thread_id,
                    self.options.stack_interval_s
                    if follow
                    else self.options.whole_cell_stack_interval_s,
                    root_codes=self._stack_root_codes,
                )
                self._stacks.start(paused=follow)
                self._edges = StackSampler(
                    self._thread_id,
                    self.options.edge_stack_interval_s,
                    root_codes=self._stack_root_codes,
                    switch_interval_s=None,
                    segment_provider=self._edge_segment,
                    back_off=True,
                ).start()
        except BaseException:
            self.stop()
            raise

    def _on_torch_imported(self, _name: str) -> None:
        """torch has just been imported (or already was): refresh its facts, install the clock."""
        if self._closed or self._clock is not None:
            return
        assert self._env is not None
        self._env = dataclasses.replace(self._env, **torch_facts())  # type: ignore[arg-type]
        self._start_torch_side()

    def _start_torch_side(self) -> None:
        from gpu_notebook.capture.profiler import (
            EARLIER_PROFILER_MESSAGE,
            ProfilerWindow,
            WindowSchedule,
            profiler_active,
        )
        from gpu_notebook.capture.stepclock import StepClock

        assert self._env is not None
        clock = StepClock(self._t0_ns, thread_id=self._thread_id)
        window = ProfilerWindow(
            warmup=self.options.warmup_steps,
            profile_steps=self.options.profile_steps,
            cuda=self._env.cuda_available,
        )
        clock.memory_every_steps = MEMORY_EVERY_STEPS
        clock.memory_readings = MEMORY_READINGS
        schedule: WindowSchedule | None = None
        lean_decided = False
        next_look = 0  # nothing to do at boundaries before this step (the fast path)
        if not self.options.profile:
            window.step_aside("")
        elif profiler_active():  # on before any step of the cell: set outside it
            window.step_aside(EARLIER_PROFILER_MESSAGE, before_cell=True)
        else:
            if self.options.more_windows:
                schedule = WindowSchedule(budget_share=self.options.window_budget_share)

            anchors = ["none"]

            def on_anchor(kind: str) -> None:
                nonlocal lean_decided, next_look
                old, anchors[0] = anchors[0], kind
                trained = clock.superseded_trained
                window.restart(WithinStep(window.recorded_steps, old, kind, trained=trained))
                if clock.is_lean and kind != "none":
                    # Many steps at the lower anchor made the clock lean: the new anchor's steps
                    # are timed again, and the listener looks at each of them until it decides.
                    # (Not at "none": Dynamo is compiling, patching now is not ours to do.)
                    clock.retime()
                    lean_decided, next_look, clock.listener_due = False, 0, 0
                if schedule is not None:
                    schedule.starts.clear()
                if self._stack_state == "sampling" and self._stacks is not None:
                    # The steps it was to follow were counted at the superseded anchor.
                    self._stack_state = "done"
                    self._stacks.pause()
                if self._trickle is not None:
                    self._trickle.pause()  # resumed once the restarted window is done

            clock.anchor_listener = on_anchor

            def on_regroup() -> None:
                nonlocal lean_decided, next_look
                # Steps already ended were joined into one (several optimizers an iteration,
                # the cycle learnt at its end): a window begun at one of their boundaries
                # recorded parts of a step, and a lean choice read their length. A window done
                # records again on whole steps; one recording starts again.
                if window.reopen():
                    # The boundaries are looked at again (the one after a done window skips
                    # them until its next re-timing look).
                    lean_decided, next_look, clock.listener_due = False, 0, 0
                    if schedule is not None:
                        schedule.starts.clear()
                    if self._stack_state == "sampling" and self._stacks is not None:
                        self._stacks.pause()  # it follows the window that records again
                        self._stack_state = "waiting"
                else:
                    window.restart(WithinStep(window.recorded_steps, regrouped=True))
                if clock.is_lean:
                    clock.retime()
                    lean_decided, next_look, clock.listener_due = False, 0, 0

            clock.regroup_listener = on_regroup

            def annotate_on() -> None:
                clock.window_starts()
                clock.annotate = True

            def annotate_off() -> None:
                clock.annotate = False

            window.on_start = annotate_on
            window.on_stop = annotate_off
            window.on_stopped = clock.window_stopped
            window.inside_step = clock.inside_optimizer_step
        timed_steps = self.options.warmup_steps + self.options.profile_steps

        # The steps' own time, without the time their thread waited for a core: on a busy
        # machine a 2 ms step takes 6 ms of wall time, and the wall clock alone would keep the
        # timing hooks on for it (their cost is CPU time, ~1.5% of such a step's own time).
        waits = RunQueueWait()

        def on_boundary(step_index: int) -> None:
            nonlocal lean_decided, next_look
            if step_index < next_look or self._closed:
                # Closed: a thread the cell started and left running reached a boundary while
                # the cell ended; nothing of ours may start for it now.
                return
            if clock.followed_thread and not window.done:
                # Kineto's session belongs to the thread that starts it, and the cell's thread
                # would stop it at the end: on a thread of the cell's, the hooks time the steps.
                window.step_aside(THREAD_WINDOW_NOTE)
            followed = clock.followed_ident
            if followed is not None and followed != self._stack_tid:
                # The hot lines are the steps' thread's: the cell's own waits for it to finish.
                self._stack_tid = followed
                for sampler in (self._stacks, self._trickle, self._edges):
                    if sampler is not None:
                        sampler.follow(followed)
            if schedule is None:
                window.on_boundary(step_index)
            else:
                self._windows_at_boundary(step_index, window, schedule)
            self._follow_window_with_stacks(step_index, window.done)
            edges = self._edges
            if edges is not None:
                # Never while a window records (its samples would stretch the op gaps).
                recording = bool(window.recording) or self._extra_recording()
                if recording and edges.active:
                    edges.pause()
                elif not recording and not edges.active:
                    edges.resume()
            # Phases are measured over the window's steps; after it only step ends are
            # counted, unless steps are long enough for the timing hooks to cost under 1%
            # (then every step keeps its phases: the whole run's split). A loader-anchored
            # loop waits longer: an optimizer may still appear after many accumulation
            # micro-batches and would then become the anchor.
            if (
                window.done
                and step_index >= timed_steps
                and (clock.anchor == "optimizer" or step_index >= LEAN_AFTER_UNANCHORED_STEPS)
            ):
                if not lean_decided or step_index % RETIME_EVERY_STEPS == 0:
                    # Timed while steps are long, lean while they are short; looked at again
                    # every RETIME_EVERY_STEPS steps (with a RETIME_MARGIN margin) as the run
                    # changes: a loop that slows down after a cached start gets its phases back.
                    median_s = clock.median_step_s()
                    clock.read_waits = median_s is not None and median_s >= WAIT_MIN_STEP_S
                    rank = ranks.current(self._rank_at_start)
                    timed_min_s = (
                        JOB_TIMED_MIN_STEP_S
                        if rank is not None and rank.world_size > 1
                        else TIMED_MIN_STEP_S
                    )
                    if median_s is not None and median_s >= timed_min_s:
                        median_s *= waits.own_share()  # a /proc read: only when it can matter
                    if median_s is None or median_s < timed_min_s:
                        clock.lean()
                    elif lean_decided and clock.is_lean and median_s >= RETIME_MARGIN * timed_min_s:
                        clock.retime()
                    lean_decided = True
                if (
                    self._stack_state != "waiting"
                    and self._stack_state != "sampling"
                    and not self._extra_recording()
                ):
                    # Until the next re-timing check or the next window may start, a boundary
                    # costs one call and one comparison.
                    next_look = step_index + RETIME_EVERY_STEPS - step_index % RETIME_EVERY_STEPS
                    if schedule is not None:
                        median_s = clock.median_step_s()
                        due = schedule.next_due_step(
                            step_index,
                            time.perf_counter_ns() - self._t0_ns,
                            None if median_s is None else median_s * 1e9,
                        )
                        if due is not None:
                            next_look = min(next_look, due)
                    # The clock skips the call itself until then (lean steps: one call fewer).
                    clock.listener_due = next_look
                if (
                    not self.options.profile
                    and self._stack_state != "waiting"
                    and self._stack_state != "sampling"
                ):
                    # Nothing left to do at a boundary (no window, no re-timing): the rest of
                    # the cell pays only the step count (lean hooks), not this listener.
                    clock.boundary_listener = None

        clock.boundary_listener = on_boundary
        self._clock = clock
        self._window = window
        if self.options.profile and not window.done:
            window.guard()
        clock.install()

    def _extra_recording(self) -> bool:
        return bool(self._extra_windows) and not self._extra_windows[-1].done

    def _windows_at_boundary(self, step_index: int, window: Any, schedule: Any) -> None:
        """The first window, then later ones as ``schedule`` allows (each stops by itself)."""
        from gpu_notebook.capture.profiler import ProfilerWindow, profiler_active

        current = self._extra_windows[-1] if self._extra_windows else window
        was_recording = current.recording
        t_ns = time.perf_counter_ns()
        current.on_boundary(step_index)
        if current.recording != was_recording:
            schedule.charge(time.perf_counter_ns() - t_ns)
            if current.recording and current is window:
                schedule.started(step_index)
        if not current.done or window.status != "recorded":
            return
        if was_recording:
            # Never start where a window stopped: ranges the stopped session opened around
            # this boundary (the enclosing Optimizer.step) would end inside the new one, which
            # crashes Kineto (a segfault in a later garbage collection, 3/3 runs with windows
            # due every step; `--steps 64` makes the schedule's gap that short). The next
            # boundary's ranges open with no profiler running.
            return
        if not schedule.due(step_index, time.perf_counter_ns() - self._t0_ns) or profiler_active():
            return
        clock = self._clock
        extra = ProfilerWindow(
            warmup=step_index,
            profile_steps=self.options.profile_steps,
            cuda=bool(self._env and self._env.cuda_available),
        )

        def annotate(on: bool) -> None:
            if clock is not None and on:
                clock.window_starts()  # lean or not: the window changes the allocator's state
            if clock is not None and not clock.is_lean:
                clock.annotate = on

        extra.on_start = lambda: annotate(True)
        extra.on_stop = lambda: annotate(False)
        if clock is not None:
            extra.on_stopped = clock.window_stopped
        extra.guard()
        t_ns = time.perf_counter_ns()
        extra.on_boundary(step_index)
        schedule.charge(time.perf_counter_ns() - t_ns)
        schedule.started(step_index)
        self._extra_windows.append(extra)

    def _follow_window_with_stacks(self, step_index: int, window_done: bool) -> None:
        """Sample stacks over ``profile_steps`` steps once the profiler window has ended."""
        stacks = self._stacks
        if stacks is None:
            return
        if self._stack_state == "waiting" and window_done:
            self._stack_state = "sampling"
            self._stack_first_step = step_index
            stacks.resume()
        elif (
            self._stack_state == "sampling"
            and step_index - self._stack_first_step >= self.options.profile_steps
        ):
            self._stack_state = "done"
            stacks.pause()
            self._start_trickle()
        elif self._trickle is not None:
            # Never while a window records (the samples would stretch its op gaps).
            if not window_done or self._extra_recording():
                self._trickle.pause()
            elif not self._trickle.active:
                self._trickle.resume()

    def _edge_segment(self) -> tuple[str, int]:
        """Where the step clock stands, for the edge sampler's thread: two attribute reads."""
        clock = self._clock
        return ("none", 0) if clock is None else (clock.anchor, clock.step_count)

    def _start_trickle(self) -> None:
        """The rest of the run, sparsely. Under a framework's loop (Lightning, the HF Trainer:
        the share its samples give is the framework's, rules/step_logging.py), on a jittered
        clock with the switch interval ours only from just before each sample until it is
        taken; elsewhere at the program's own switch interval throughout, so that a plain
        script that reads it at its end reads its own (stacks.py, "The sparse sampler")."""
        with self._samplers_lock:
            if not self._closed:
                self._trickle = self._new_trickle().start()

    def _new_trickle(self) -> StackSampler:
        framework = any(name in sys.modules for name in _FRAMEWORK_MODULES)
        trickle = StackSampler(
            self._thread_id,
            self.options.trickle_stack_interval_s,
            root_codes=self._stack_root_codes,
            switch_interval_s=0.0002 if framework else None,
            brief_switch=framework,
            back_off=True,
        )
        if self._stack_tid:
            trickle.follow(self._stack_tid)
        return trickle

    def _stop_sampler(self, sampler: StackSampler | None, what: str, lost: str) -> RawStacks | None:
        """Join a stack sampler; its failure is said in a note, never raised into the user's cell."""
        if sampler is None:
            return None
        try:
            return sampler.stop()
        except Exception as exc:  # noqa: BLE001 -- our sampler's failure is said, never the user's
            self._notes.append(
                f"{what} failed ({type(exc).__name__}: {exc}): no {lost} this time; please report it"
            )
            return None

    def _on_sample(self, sample: Sample) -> None:
        listener = self._live_listener
        clock = self._clock
        window = self._window
        if listener is None:
            return
        listener(
            LiveStatus(
                sample=sample,
                step_count=clock.step_count if clock is not None else 0,
                median_step_s=clock.median_step_s() if clock is not None else None,
                recording=bool(window is not None and window.recording) or self._extra_recording(),
                step_times_s=clock.step_times_s() if clock is not None else (),
            )
        )

    def stop(self) -> None:
        """Stop the profiler, remove every hook, join the sampler. Safe to call twice."""
        if self._pid and os.getpid() != self._pid:
            # A forked child (the code called os.fork): our threads were not copied into it,
            # and the parent's capture is the one that reports. Nothing to stop here (nor the
            # lock to take: it may have been copied held).
            self._closed = True
            return
        # Under the lock: a thread the cell started and left running may be starting the
        # trickle at a boundary of its own (the sampler it started outlived the cell, sampling).
        with self._samplers_lock:
            if self._closed:
                return
            self._closed = True
        self._wall_s = (time.perf_counter_ns() - self._t0_ns) / 1e9 if self._t0_ns else 0.0
        for watch in self._watches:
            watch.close()
        self._watches.clear()
        try:
            self._raw_stacks = self._stop_sampler(self._stacks, "line sampling", "hot lines")
            self._raw_trickle = self._stop_sampler(
                self._trickle, "sparse stack sampling", "framework frames"
            )
            self._raw_edges = self._stop_sampler(
                self._edges, "edge stack sampling", "lines outside the steps"
            )
            # Latest first: each window's guard wraps the one before it.
            self._extra_records = [w.close() for w in reversed(self._extra_windows)][::-1]
            if self._window is not None:
                self._window_record = self._window.close()
        finally:
            try:
                if self._clock is not None:
                    self._clock.uninstall()
            finally:
                if self._sampler is not None:
                    self._series = self._sampler.stop()

    # ---------------------------------------------------------------- result

    def finish(self, status: CellStatus, error: str | None, scratch: str | None = None) -> Run:
        """Stop (if still running) and return the frozen Run.

        The cell ends at ``stop()``: nothing of ours runs in the process after it. What only
        the analysis needs is done here, after the cell: writing the window's trace file
        (Kineto's JSON, ~1 ms a profiled step) into ``scratch`` (a private folder the caller
        removes once the report is built; no folder: the trace is not written) and turning the
        step clock's rows into records.
        """
        self.stop()
        assert self._env is not None, "finish() before start()"
        # The threads the cell ran with (it may have called torch.set_num_threads).
        self._env = dataclasses.replace(self._env, torch_threads=torch_threads())
        trace_path = None
        if self._window is not None:
            trace_path = self._window.export(
                Path(scratch) / "window.trace.json" if scratch is not None else None
            )
        if self._clock is not None and self._steps is None:
            self._steps = self._clock.record()
        window = self._window_record
        if window is None:
            window = ProfileWindow(
                status="unavailable",
                warmup_steps=self.options.warmup_steps,
                profile_steps=self.options.profile_steps,
                message="the code never imported torch"
                if torch_installed()
                else "torch is not installed",
            )
        elif trace_path is not None:
            window = dataclasses.replace(window, trace_path=trace_path)
        if not self.options.profile:
            window = ProfileWindow(
                status="disabled",
                warmup_steps=self.options.warmup_steps,
                profile_steps=self.options.profile_steps,
                message="profiling disabled (--no-profile): sampling and step timing only",
            )
        more_windows = []
        for k, (extra, rec) in enumerate(
            zip(self._extra_windows, self._extra_records, strict=False)
        ):
            path = extra.export(
                Path(scratch) / f"window{k + 2}.trace.json" if scratch is not None else None
            )
            if rec.first_step is not None and rec.recorded_steps > 0:
                more_windows.append(dataclasses.replace(rec, trace_path=path))
        notes = list(self._notes)
        if self._clock is not None:
            notes.extend(self._clock.notes)
            notes.extend(self._clock.thread_notes())
            notes.extend(self._clock.child_notes())
        if self._env.nvml_message:
            notes.append(self._env.nvml_message)
        if window.message and window.status == "stepped-aside":
            notes.append(window.message)
        series = self._series or SampleSeries(
            requested_interval_s=self.options.interval_s, interval_s=self.options.interval_s
        )
        return Run(
            env=self._env,
            cell_source=self.source,
            status=status,
            error=error,
            wall_s=self._wall_s,
            samples=series,
            steps=self._steps or StepClockRecord(anchor="none", step_count=0),
            window=window,
            started_at=self._started_at,
            notes=tuple(notes) + series.notes,
            stacks=self._raw_stacks,
            framework_stacks=self._raw_trickle,
            edge_stacks=self._raw_edges,
            first_line=self.first_line,
            magic_line=self.magic_line,
            more_windows=tuple(more_windows),
            program=self.program,
            # A process group the cell made (and maybe tore down) or the launcher's variables.
            rank=ranks.current(self._rank_at_start),
        )
