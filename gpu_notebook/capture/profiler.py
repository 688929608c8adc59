"""The only door to torch.profiler: a window that records K steps after S warm-up steps, once.

Recording is bounded on purpose: torch.profiler keeps every event in memory until it stops
(~200 B an event, never released while running), so the window records ``profile_steps`` steps and stops
for the rest of the cell. The trace is exported with ``export_chrome_trace`` (the fast path) and
read back by ``gpu_notebook.traces``; ``prof.events()`` is never called (~50 us and ~3 KB an event).

If another profiler is active when the window would start (the user's own), ours steps aside and
says so: two Kineto sessions cannot run at once, and starting ours would silently empty theirs.
If the user's profiler starts while ours records, ours stops first (``guard()``: the ways torch
starts a profiler, torch.profiler, the legacy autograd profiler, ``emit_itt``, ``emit_nvtx``,
are watched for the length of the capture) and the user's runs as it would without us.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from gpu_notebook import markers
from gpu_notebook.records import ProfileWindow, WindowStatus, WithinStep

# The window stops at the first step boundary after its recorded steps took this much of the
# cell thread's CPU time, even before ``profile_steps`` steps: steps this long (an LBFGS step of
# 20 closure calls, ~80k ops) give every phase in one step, and each profiled one costs ~1.4x
# its time plus the stop's post-processing: in a 4-step cell, 2 profiled steps were half the
# run. Steps up to ~100 ms keep all three. CPU time, not wall: the same loop records the same
# steps on a busy machine. The budget is that of the default ``-s`` (``WINDOW_BUDGET_STEPS``)
# and grows with the steps asked beyond it: ``-s 32`` on 13 ms steps recorded 7 of them, and
# nothing said so (unseen round 14, nb 29). Asking for more steps is asking for their cost.
WINDOW_MAX_CPU_S = 0.3
WINDOW_BUDGET_STEPS = 3

USER_PROFILER_MESSAGE = (
    "another torch.profiler is active in this cell: gpucheck stepped aside "
    "(sampling and step timing only)"
)
# One already recording as the cell starts (an earlier cell's prof.start(), a library's): it
# records every operator of the steps, so the step times we take include its cost.
EARLIER_PROFILER_MESSAGE = (
    "a torch profiler was already recording when the cell started (set outside this cell): "
    "gpucheck stepped aside (sampling and step timing only, both with that profiler's cost)"
)


# Kineto's logger (libkineto::Logger::severityLevel_, exported by libtorch_cpu): it prints what
# is at or above this level on the process's stderr. Levels: VERBOSE 0, INFO 1, WARNING 2,
# STAGE 3, ERROR 4, USDT 5 ("profiler_start"/"profiler_stop" on every start and stop).
_KINETO_LEVEL_SYMBOL = "_ZN9libkineto6Logger14severityLevel_E"
_KINETO_SILENT = 6  # above every level it has
_KINETO_DEFAULT = 4  # what its first start sets without KINETO_LOG_LEVEL (ERROR: USDT shows)
_kineto_level_cell: list[Any] = []  # [c_int or None], looked up once


def _kineto_level() -> Any:
    """Kineto's severity level as a ctypes int in libtorch_cpu, or None (another build)."""
    if not _kineto_level_cell:
        level = None
        with suppress(OSError, ValueError, AttributeError, ImportError):
            import ctypes

            import torch

            lib_dir = Path(torch.__file__).parent / "lib"
            for lib in sorted(lib_dir.glob("libtorch_cpu.*")):
                # RTLD_NOLOAD: only the copy torch already loaded, never a second one.
                handle = ctypes.CDLL(str(lib), mode=os.RTLD_NOLOAD)
                level = ctypes.c_int.in_dll(handle, _KINETO_LEVEL_SYMBOL)
                break
        _kineto_level_cell.append(level)
    return _kineto_level_cell[0]


def _level_from_env(value: str | None) -> int:
    """The level Kineto's first start reads from ``KINETO_LOG_LEVEL`` (unset: its default)."""
    try:
        return int(value) if value is not None else _KINETO_DEFAULT
    except ValueError:
        return _KINETO_DEFAULT


@contextmanager
def _kineto_quiet() -> Iterator[None]:
    """Kineto's own log lines off for the length of one of our profiler calls, and only those.

    Kineto prints "USDT: profiler_start/stop" on the process's stderr at every start and stop,
    which ipykernel forwards into the cell's output. fd 2 is never touched (pointing it away
    also dropped what the program's other threads, C extensions and subprocesses wrote there
    meanwhile): Kineto's level is raised for our call and put back after. Its logger reads
    ``KINETO_LOG_LEVEL`` once, at its first start: when that first start is ours, the variable
    is set for that call only, and the level is then put where the user's setting (or Kineto's
    default) would have put it, so the user's own profiler later prints as without us.
    """
    level = _kineto_level()
    if level is None:  # a build without the symbol: Kineto's lines pass, stderr stays whole
        yield
        return
    before = int(level.value)
    if before != 0:  # initialised (0 is also VERBOSE: then treated as not yet, which is safe)
        level.value = _KINETO_SILENT
        try:
            yield
        finally:
            level.value = before
        return
    user_env = os.environ.get("KINETO_LOG_LEVEL")
    os.environ["KINETO_LOG_LEVEL"] = str(_KINETO_SILENT)
    level.value = _KINETO_SILENT
    try:
        yield
    finally:
        if user_env is None:
            os.environ.pop("KINETO_LOG_LEVEL", None)
        else:
            os.environ["KINETO_LOG_LEVEL"] = user_env
        level.value = _level_from_env(user_env)


@contextmanager
def _no_inductor_import() -> Iterator[None]:
    """Start torch's profiler without importing ``torch._inductor`` (and dynamo) for it.

    ``torch.profiler.profile.prepare_trace`` asks ``hasattr(torch, "_inductor")`` to read
    inductor's cudagraphs setting, and torch's lazy ``__getattr__`` answers by importing
    inductor and dynamo: some 800 modules, 1.4-5 s inside the user's loop at the first window
    of a process (the first cell paid it; a 5 ms-step loop reported it as data wait). When the
    program has not imported inductor, nothing it compiled can use cudagraphs, and the answer
    the lookup wants is False: for the length of our own start, the profiler module's
    ``hasattr`` says so without the import. Any other lookup goes to the builtin unchanged; the
    name is removed again after the start (it is never there otherwise).
    """
    import builtins

    import torch
    import torch.profiler.profiler as profiler_mod

    if "torch._inductor" in sys.modules or "hasattr" in vars(profiler_mod):
        yield  # imported already (the lookup is free) or not ours to shadow
        return

    def hasattr_without_import(obj: object, name: str) -> bool:
        if obj is torch and name == "_inductor":
            return "torch._inductor" in sys.modules
        return builtins.hasattr(obj, name)

    profiler_mod.hasattr = hasattr_without_import
    try:
        yield
    finally:
        if vars(profiler_mod).get("hasattr") is hasattr_without_import:
            del profiler_mod.hasattr


@contextmanager
def _no_new_warning_filters() -> Iterator[None]:
    """Take back the ``warnings`` filters added during one of our profiler calls.

    Starting torch's profiler imports ``torch._dynamo``, and with it sympy and, when installed,
    accelerate, whose imports add filters (``once SymPyDeprecationWarning``, ``ignore
    UserWarning`` from ``torch.optim.lr_scheduler``...): a program that never compiles would
    find them in ``warnings.filters`` only when measured. (A program that later imports those
    packages itself does not get their filters again: they are imported already.)
    """
    import warnings

    before = list(warnings.filters)
    try:
        yield
    finally:
        added = [f for f in warnings.filters if f not in before]
        if added:
            filters: list[object] = warnings.filters  # type: ignore[assignment]  # a list at run time
            filters[:] = [f for f in filters if f not in added]
            warnings._filters_mutated()  # type: ignore[attr-defined]  # drop the cached lookups


def run_delay_ns() -> int | None:
    """The calling thread's wait for a core so far (Linux schedstat run_delay: runnable, not
    running), ns; None where it cannot be read (no /proc: macOS, Windows)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def profiler_active() -> bool:
    """True when any torch autograd/Kineto profiler is recording in this process."""
    import torch

    return bool(torch._C._autograd._profiler_enabled())


# Times a window done on steps that were then joined records again (``ProfilerWindow.reopen``).
REOPENS = 2


class ProfilerWindow:
    """Starts torch.profiler at the boundary of step ``warmup`` and stops after ``profile_steps`` steps,
    or sooner once the recorded steps took their CPU budget (``cpu_budget_s``; at least one
    step): the record then says where it stopped (``ProfileWindow.stopped_at_cpu_s``).

    The step clock calls ``on_boundary(index)`` at every step boundary (index = the step that
    starts there). ``restart()`` drops a window whose steps were cut by an anchor upgrade.
    """

    def __init__(
        self,
        warmup: int,
        profile_steps: int,
        *,
        cuda: bool,
        record_shapes: bool = False,
        max_cpu_s: float | None = None,
    ) -> None:
        self.warmup = warmup
        self.profile_steps = profile_steps
        # Read when the window starts, so a test or caller can change WINDOW_MAX_CPU_S.
        self._max_cpu_s = max_cpu_s
        self._max_cpu_ns = 0
        self._cpu0_ns = 0
        self._stopped_at_cpu_s: float | None = None  # the budget that ended it before its steps
        self._starting = False  # our own profiler is starting: the guard lets it through
        self._guard: list[tuple[Any, str, Any, Any]] | None = None  # (owner, name, old, new)
        self._guard_inert = False
        self._cuda = cuda
        self._record_shapes = record_shapes
        self._prof: Any = None
        # Ours between the start's first call into Kineto and the end of its stop: a Stop
        # pressed there (the KeyboardInterrupt lands in whatever runs) left Kineto recording
        # after the cell, and every later window stepped aside for it (1 Stop in ~20 landing
        # near a window, unseen round 14, nb 28). ``close()`` stops what is still here.
        self._unstopped: Any = None
        self._first_step: int | None = None
        self._last_step: int | None = None
        # (native thread id, schedstat run_delay ns or None) read at each step mark.
        self._marks: list[tuple[int, int | None]] = []
        self._status: WindowStatus = "not-reached"
        self._message: str | None = None
        self._within_step: WithinStep | None = None
        self._before_cell = False  # stepped aside for a profiler on as the cell started
        self._done = False
        self._reopens = 0  # times done and started again (``reopen``)
        self._cooldown = False
        self._stopped: Any = None  # a stopped profiler whose trace is not exported yet
        # callable() -> bool: True while the steps counted are calls inside an open step of a
        # higher anchor (a closure optimizer's forward and backward inside ``opt.step``). The
        # window then records one call: the calls repeat, and each costs the stop ~0.1 s of
        # Kineto post-processing on an LBFGS time-sequence model (benchmarks/README.md).
        self.inside_step: Any = None
        self.on_start: Any = None  # callable() run right after the profiler starts
        self.on_stop: Any = None  # callable() run right before it stops
        self.on_stopped: Any = None  # callable() run right after it stopped (buffers freed)

    @property
    def recording(self) -> bool:
        return self._prof is not None

    @property
    def done(self) -> bool:
        return self._done

    @property
    def recorded_steps(self) -> int:
        """Steps recorded so far (whole steps at the anchor the window ran under)."""
        return self._recorded_steps()

    @property
    def cpu_budget_s(self) -> float:
        """The thread CPU time (s) the recorded steps may take before the window stops."""
        if self._max_cpu_s is not None:
            return self._max_cpu_s
        return WINDOW_MAX_CPU_S * max(1.0, self.profile_steps / WINDOW_BUDGET_STEPS)

    @property
    def status(self) -> WindowStatus:
        return self._status

    def on_boundary(self, step_index: int) -> None:
        if self._done:
            return
        if self._prof is None:
            if self._cooldown:
                # Never start right where a window was dropped: ranges opened under the old
                # session (the enclosing Optimizer.step) would end inside the new one, which
                # crashes Kineto (seen as a segfault in the garbage collector).
                self._cooldown = False
            elif step_index >= self.warmup:
                self._start(step_index)
            return
        self._mark(step_index)
        self._last_step = step_index
        assert self._first_step is not None
        if step_index - self._first_step >= self.profile_steps or (
            self.inside_step is not None and self.inside_step()
        ):
            self._stop(complete=True)
        elif time.thread_time_ns() - self._cpu0_ns >= self._max_cpu_ns:
            self._stopped_at_cpu_s = self._max_cpu_ns / 1e9
            self._stop(complete=True)

    def restart(self, within_step: WithinStep | None = None) -> None:
        """A higher anchor replaced the steps' anchor: a window in progress is forgotten (its
        step marks belong to the superseded anchor) and starts again at the new one.

        A window already done is kept as what it is, ``within-step``, with ``within_step``
        (the report words it): what it recorded (an LBFGS step's closure calls, a step's
        micro-batches) lies inside the new anchor's steps, not whole steps. Dropping it left a report that
        said 'recorded' with 0 steps; profiling a whole LBFGS step instead (20 closure calls,
        ~80k ops) cost x1.70 of a 4-step loop (benchmarks/README.md).
        """
        if self._done:
            if self._status == "recorded" and self._recorded_steps() > 0:
                self._status = "within-step"
                self._within_step = within_step
            return
        if self._prof is not None:
            self._teardown(export=False)
            self._cooldown = True
        self._first_step = None
        self._last_step = None
        self._marks.clear()

    def reopen(self) -> bool:
        """The steps a window recorded were joined into fewer, longer ones (the loop's cycle of
        several optimizers was learnt after the window): its trace, parts of a step, is dropped
        and the window starts again at the warm-up boundary of the new steps, up to
        ``REOPENS`` times (a loop that reads joins its steps twice: at the end of its first
        cycle and once the cycle has repeated). False where it does not (not done recording,
        or reopened enough): ``restart`` keeps it as it is.

        A critic's 5 D steps each ended a step until its G step showed the cycle, and the
        window (warm-up 2, 3 steps) recorded D steps 3-5 of the first iteration: kept as
        ``within-step``, its trace held no whole step."""
        if not self._done or self._status != "recorded" or self._reopens >= REOPENS or self._prof:
            return False
        self._reopens += 1
        self._stopped = None  # its trace: not exported
        self._done = False
        self._status = "not-reached"
        self._message = None
        self._stopped_at_cpu_s = None
        self._first_step = None
        self._last_step = None
        self._marks.clear()
        self._cooldown = True  # never at the boundary that joined them (see on_boundary)
        return True

    def guard(self) -> None:
        """Watch the ways torch starts a profiler: one the cell starts makes ours stop first.

        ``torch.profiler.profile`` and ``torch.autograd.profiler.profile`` prepare their session
        through ``torch.autograd.profiler.profile._prepare_trace`` (a scheduled profiler does it
        in its warm-up, steps before it records); ``emit_itt``, ``emit_nvtx`` and the legacy
        profiler enable theirs straight through ``_enable_profiler`` /
        ``_enable_profiler_legacy``, looked up in their modules when they start. Kineto refuses
        a second session ("Profiler is already enabled"), so ours gives way to each of them.
        """
        import torch.autograd.profiler as autograd_profiler

        if self._guard is not None:
            return
        window = self

        def on_user_profiler() -> None:
            if not window._guard_inert and not window._starting:
                # The cell's own profiler: ours stops if it records, and never starts after.
                if window._prof is not None:
                    window._yield_to_user()
                elif not window._done:
                    window.step_aside(USER_PROFILER_MESSAGE)

        def watching(original: Any) -> Any:
            def watched(*args: Any, **kwargs: Any) -> Any:
                __tracebackhide__ = True  # the profiler's errors read as without us (stepclock)
                on_user_profiler()
                return original(*args, **kwargs)

            watched.__wrapped__ = original  # type: ignore[attr-defined]
            watched.__doc__ = getattr(original, "__doc__", None)
            return watched

        patches: list[tuple[Any, str, Any, Any]] = []
        cls = autograd_profiler.profile
        owners: list[tuple[Any, str]] = [(cls, "_prepare_trace")]
        owners += [(autograd_profiler, "_enable_profiler")]
        legacy = sys.modules.get("torch.autograd.profiler_legacy")
        for module in (autograd_profiler, legacy):
            if module is not None and "_enable_profiler_legacy" in vars(module):
                owners.append((module, "_enable_profiler_legacy"))
        for owner, name in owners:
            original = vars(owner).get(name)
            if original is None:
                continue
            wrapper = watching(original)
            setattr(owner, name, wrapper)
            patches.append((owner, name, original, wrapper))
        self._guard = patches

    def unguard(self) -> None:
        """Put back what ``guard`` replaced, unless the cell replaced it meanwhile (theirs wins)."""
        if self._guard is None:
            return
        patches, self._guard = self._guard, None
        self._guard_inert = True
        for owner, name, original, wrapper in reversed(patches):
            if vars(owner).get(name) is wrapper:
                setattr(owner, name, original)

    def _yield_to_user(self) -> None:
        self._teardown(export=False)
        self.step_aside(USER_PROFILER_MESSAGE)

    def step_aside(self, message: str, *, before_cell: bool = False) -> None:
        self._before_cell = self._before_cell or before_cell
        self._status = "stepped-aside"
        self._message = message
        self._done = True

    def _start(self, step_index: int) -> None:
        if profiler_active():
            self.step_aside(USER_PROFILER_MESSAGE)
            return
        import torch
        from torch.profiler import ProfilerActivity

        activities = [ProfilerActivity.CPU]
        if self._cuda:
            activities.append(ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=activities, record_shapes=self._record_shapes)
        # Kineto's "USDT: profiler_start/stop" lines are silenced for our own start and stop
        # only (_kineto_quiet); the process's stderr is left alone.
        self._starting = True
        self._unstopped = prof
        try:
            with _kineto_quiet(), _no_new_warning_filters(), _no_inductor_import():
                prof.start()
        finally:
            self._starting = False
        self._prof = prof
        self._max_cpu_ns = int(self.cpu_budget_s * 1e9)
        self._cpu0_ns = time.thread_time_ns()
        self._first_step = step_index
        self._last_step = step_index
        self._marks.clear()
        self._mark(step_index)
        if self.on_start is not None:
            self.on_start()

    def _mark(self, step_index: int) -> None:
        import torch

        with torch.autograd.profiler.record_function(markers.STEP_MARK_PREFIX + str(step_index)):
            pass
        # Right after the mark: the wait between two marks is the trace step's own.
        self._marks.append((threading.get_native_id(), run_delay_ns()))

    def _step_waits_s(self, recorded: int) -> tuple[float, ...] | None:
        """Each recorded step's wait for a core, from the marks' readings; None where one was
        not read or the marks ran on different threads (counters of another thread)."""
        marks = self._marks[: recorded + 1]
        if recorded <= 0 or len(marks) < recorded + 1 or len({tid for tid, _ in marks}) != 1:
            return None
        delays = [ns for _, ns in marks if ns is not None]
        if len(delays) != len(marks):
            return None
        return tuple(max(0, b - a) / 1e9 for a, b in itertools.pairwise(delays))

    def _stop(self, *, complete: bool) -> None:
        recorded = self._recorded_steps()
        exported = self._teardown(export=True)
        self._done = True
        if not exported:
            return
        if complete:
            self._status = "recorded"
        else:
            self._status = "partial" if recorded > 0 else "not-reached"

    def _teardown(self, *, export: bool) -> bool:
        """Stop the profiler; export the trace when asked. Returns True when a trace was written."""
        prof, self._prof = self._prof, None
        if prof is None:
            return False
        if self.on_stop is not None:
            self.on_stop()
        if not profiler_active():
            # A profiler the cell started inside our window ended Kineto's session, ours with
            # it: stopping again would only print a C++ warning into the cell's output.
            self._unstopped = None
            self.step_aside(USER_PROFILER_MESSAGE)
            if self.on_stopped is not None:
                self.on_stopped()
            return False
        try:
            with _kineto_quiet(), _no_new_warning_filters():
                prof.stop()
            self._unstopped = None
        finally:
            if self.on_stopped is not None:
                self.on_stopped()
        if not export:
            return False
        # Exported later, by export() after the cell: writing the file here would land inside
        # the user's step that ends the window (tens of ms for a big window).
        self._stopped = prof
        return True

    def export(self, path: Path | None) -> str | None:
        """Write the stopped window's trace to ``path`` (once; after ``close()``), mode 0600.

        Returns the path written, or None (nothing recorded, or no path: the trace is dropped).
        """
        prof, self._stopped = self._stopped, None
        if prof is None or path is None:
            return None
        with _no_new_warning_filters():
            prof.export_chrome_trace(str(path))
        os.chmod(path, 0o600)
        return str(path)

    def _stop_unstopped(self) -> None:
        """Stop our profiler where an interrupt cut its start or stop short (``_unstopped``):
        its trace is dropped, and nothing of ours records after the cell."""
        prof, self._unstopped = self._unstopped, None
        if prof is None or not profiler_active():
            return  # never enabled, or a profiler of the cell's own ended the session
        with _kineto_quiet(), _no_new_warning_filters():
            prof.stop()

    def _recorded_steps(self) -> int:
        if self._first_step is None or self._last_step is None:
            return 0
        return self._last_step - self._first_step

    def close(self) -> ProfileWindow:
        """Stop whatever still records (cell ended, failed or was interrupted) and describe it.

        The trace file named in the record is written by ``export()``.
        """
        if self._prof is not None:
            self._stop(complete=False)
        self._stop_unstopped()
        self.unguard()
        self._done = True
        recorded = self._recorded_steps() if self._status in ("recorded", "partial") else 0
        # A within-step window's calls have their waits too (read at their marks): the host
        # figures of those calls take the machine's load out as a whole step's do.
        waited = self._recorded_steps() if self._status == "within-step" else recorded
        message = self._message
        if self._status == "not-reached" and message is None:
            message = (
                f"the profiler window waits for {self.warmup} warm-up step(s); "
                "the cell ended before the window recorded a complete step"
            )
        return ProfileWindow(
            status=self._status,
            warmup_steps=self.warmup,
            profile_steps=self.profile_steps,
            first_step=self._first_step if recorded else None,
            recorded_steps=recorded,
            trace_path=None,  # set by the session once export() has written the file
            message=message,
            within_step=self._within_step if self._status == "within-step" else None,
            profiler_before_cell=self._before_cell,
            profiler_in_cell=not self._before_cell and message == USER_PROFILER_MESSAGE,
            step_waits_s=self._step_waits_s(waited),
            stopped_at_cpu_s=(
                self._stopped_at_cpu_s
                if self._status == "recorded" and recorded < self.profile_steps
                else None
            ),
        )


class WindowSchedule:
    """When a long cell gets its next profiler window: spaced out, bounded in number and cost.

    The first window starts after the warm-up (``ProfilerWindow``). Each later one starts at a
    step boundary at least ``spacing`` times further into the cell than the previous one
    started (and ``min_gap_steps`` after it), so windows spread over a cell whose length is not
    known in advance; at most ``max_windows`` in all; and only while what the windows cost so
    far plus what the next one is expected to cost (their start and stop time at step
    boundaries, doubled for the profiled steps' own slowdown: an estimate) stays under
    ``budget_share`` of the cell's time so far. A cell of N
    steps thus pays O(log N) windows: a long cell pays proportionally less than a short one.
    """

    def __init__(
        self,
        *,
        max_windows: int = 4,
        spacing: float = 4.0,
        min_gap_steps: int = 64,
        budget_share: float = 0.01,
    ) -> None:
        self.max_windows = max_windows
        self.spacing = spacing
        self.min_gap_steps = min_gap_steps
        self.budget_share = budget_share
        self.starts: list[int] = []  # first step of each window, the first one's included
        self.cost_ns = 0

    def started(self, step_index: int) -> None:
        self.starts.append(step_index)

    def charge(self, ns: int) -> None:
        """Time spent starting or stopping a window (inside the user's step)."""
        self.cost_ns += 2 * ns

    @property
    def exhausted(self) -> bool:
        return len(self.starts) >= self.max_windows

    def due(self, step_index: int, elapsed_ns: int) -> bool:
        """Whether the next window should start at this boundary."""
        if not self.starts or self.exhausted:
            return False
        last = self.starts[-1]
        if step_index < max(last * self.spacing, last + self.min_gap_steps):
            return False
        # The next window is expected to cost what the ones so far cost on average: it starts
        # only if the total, that one included, stays within the budget.
        expected_ns = self.cost_ns / len(self.starts)
        return self.cost_ns + expected_ns <= self.budget_share * elapsed_ns

    def next_due_step(self, step_index: int, elapsed_ns: int, step_ns: float | None) -> int | None:
        """The first boundary after ``step_index`` at which :meth:`due` can hold (None: never).

        The spacing gives a step; the budget a time (what the windows cost so far plus the next
        one, over ``budget_share``), turned into steps at ``step_ns`` a step (the recent median).
        Until then the session does nothing at a boundary: a cell past the spacing but over the
        budget would otherwise ask at every step. Steps that slow down only bring the budget's
        time sooner: the session looks again at its next re-timing check anyway.
        """
        if not self.starts or self.exhausted:
            return None
        last = self.starts[-1]
        by_spacing = math.ceil(max(last * self.spacing, last + self.min_gap_steps))
        needed_ns = (self.cost_ns + self.cost_ns / len(self.starts)) / self.budget_share
        by_budget = step_index + 1
        if needed_ns > elapsed_ns and step_ns:
            by_budget = step_index + math.ceil((needed_ns - elapsed_ns) / step_ns)
        return max(by_spacing, by_budget, step_index + 1)
