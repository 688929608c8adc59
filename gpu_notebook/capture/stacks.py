"""Sample the Python stack of one thread (the one running the cell) into bounded folded counts.

Every ``interval_s`` (default 5 ms, 200 Hz) the stack of the thread is counted. It samples wall
time, not CPU time: a line blocked in ``time.sleep``, a DataLoader wait or a torch op that
released the GIL is time the step spends there, which is what the user wants to see. Each
sample also carries the thread's CPU time and wait for a core since the previous one
(``_ThreadClock``): a share that must read the same on a busy machine reads those.

**No signals.** An earlier design sampled the main thread from a SIGALRM handler on an
``ITIMER_REAL`` timer (as Scalene does). It cannot be invisible: ``signal.alarm`` and
``setitimer`` share that one timer with the user's timeouts (a cell's own SIGALRM timeout
handler received our ticks and raised a spurious ``TimeoutError``), every tick interrupts
``signal.pause()``, and C code that does not retry on EINTR fails (Scalene's clash with
Lightning). A sampler thread delivers nothing into the measured program; it costs the same on
the benchmark loops (x1.039 thread vs x1.040 signal, host-bound MLP at 200 Hz, 2-core VM).

**The sampler thread.** A thread the program cannot see (``capture/threads.py``)
wakes every interval and reads ``sys._current_frames()[thread_id]`` (through
``capture/frames``: the collector off for the call, CPython gh-106883). An in-process sampler
thread needs the GIL to read frames, and that biases it twice; both are corrected here, and
``benchmarks/pyspy_crosscheck.py`` checks the result against py-spy, which reads the process
from outside:

* A thread running pure Python hands the GIL over only after the interpreter's switch interval
  (5 ms by default), while a thread entering a GIL-releasing call (a torch op, a sleep, a queue
  wait) hands it over at once. A sampler that wakes during a short pure-Python stretch (a
  Python-level transform, a logging call) therefore waits, and samples the *next* GIL-releasing
  call instead: measured, a 0.7 ms pure-Python function taking 12% of a loop got 0% of the
  samples. While sampling, the switch interval is lowered to ``switch_interval_s`` (0.2 ms:
  12% -> 13%) and restored afterwards. With one busy thread this adds no switches (there is one
  hand-over per sample either way); other busy Python threads would switch more often.
* Sampling slows down while the cell holds the GIL, so each sample is weighted by the wall time
  since the previous one (unweighted, a pure-Python loop got 54% of the time instead of 77%).

**The sparse sampler.** After the few densely sampled steps, a default run goes on with a second
sampler at 25 Hz (``brief_switch=True``). Left at the program's own switch interval throughout
(7ab2f81), a sample that woke while the thread ran pure Python landed on the next GIL-releasing
call, up to 5 ms later, inside a framework's logging or outside it: its count leaned both ways
(an HF Trainer's logging every step read 1.49x its share sampled densely, benchmarks/README.md).
Held low throughout, the program would see ours over the whole run (a script that reads it at
its end did) and other busy Python threads would switch more often. So the interval is ours only
from just before each sample until it is taken: the sampler wakes the program's own interval
(plus 1 ms) ahead, lowers it (that wake may be late, it decides nothing), sleeps to the sample's
time, which it then waits at most 0.2 ms for, and restores the program's value (unless the
program set its own meanwhile). The clock is jittered (0.5-1.5 intervals) so that it cannot lock
to a step of a fixed period. Where a sample falls then does not depend on the program, and the
samples (``RawStacks.clocked``) give the framework's share. The program may still read ours in
those spans (about 6 ms in each 40: a plain script that read it at its end would see it 15% of
the time), so the session samples this way only when Lightning or transformers is imported, and
at the program's own interval throughout otherwise (a count, no share). They are kept apart
(``Run.framework_stacks``) and never reach the hot lines (mixed in, ``loss = model(x)...``
outranked the pure-Python line that took most of a step on a loaded machine, issue 26).

**The edge sampler.** A third sampler, at 20 Hz over the whole cell but for the profiler
windows (``segment_provider``), keeps only the time outside the training steps: the lines that
took the cell's time before its first step (set-up, an evaluation before training) and after its
last (a checkpoint save). Which step is the last is known only once the cell ends, so the
samples of the step now open are held back and dropped as the next step begins (issue 26).
Between the run's step marks (the optimizer's: steps no later anchor can supersede) it takes no
sample at all: the steps are running while marks keep coming, and they are taken to have
stopped once none came for a few step periods (``_StepGate``: 3 periods, between 4 intervals
and 1 s). It then samples again, held back as before, so that a step that is only long (a
validation every N steps) is still dropped at its end, and the time after the last step is kept
but for its first quiet span (its length is the step clock's; the lines are named from the rest).
Under a lower anchor it samples throughout: a later optimizer would make those steps the time
before the run's first (an evaluation over a DataLoader).

A C call that *holds* the GIL throughout (``torch.tensor`` of nested lists, ``json.dumps``) can
not be sampled inside at all: its time lands on the line where the GIL is next released, or
the next line. ``RawStacks.late_s`` says how late samples were taken on average.

Why it is cheap (tens of microseconds a sample at 50+ frames, measured by
``benchmarks/stack_sampler_overhead.py``):

* The hot path builds one tuple of ints per sample: ``id(code)`` and ``f_lasti`` per frame.
  Hashing code objects (CPython hashes their constants every time) and ``f_lineno`` (a walk of
  the line table) cost more than the rest of the walk together; both are done once per
  *distinct* stack, at ``stop()``, where ``f_lasti`` is mapped to a line through a cached table.
* Code objects are registered (kept alive, so an ``id`` can never be reused while the sampler
  lives) only when a stack is seen for the first time.
* The walk stops at IPython's ``run_code`` frame (the *root*): the 20-40 frames of IPython,
  ipykernel, asyncio and tornado above the cell are the same in every sample and say nothing.
  (``gpucheck run`` passes runpy's ``_run_code`` instead, whose frame executes the script.)

Samples that caught the thread outside the cell (before IPython's ``run_code`` called it, or
after it returned) are dropped once any sample is inside: they are IPython's time, not the
cell's. Memory is bounded: at most ``max_stacks`` distinct stacks are kept; past that, samples are
counted under "[other]" while their lines and functions are still counted exactly (a slow path
that only runs past the cap). Samples that caught the target thread inside this module (calling
``pause``/``stop``) are dropped: they are the sampler's own cost, not the cell's.
"""

from __future__ import annotations

import bisect
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from types import CodeType, FrameType
from typing import cast

from gpu_notebook.capture.fds import open_high
from gpu_notebook.capture.frames import current_frames
from gpu_notebook.capture.threads import HiddenThread, StartsAndStops
from gpu_notebook.records import (
    EDGE_AFTER,
    EDGE_BEFORE,
    EDGE_STEPS,
    OTHER,
    CodeRef,
    FunctionCount,
    LineCount,
    RawStacks,
    StackCount,
)

__all__ = [
    "OTHER",
    "THREAD_NAME_PREFIX",
    "CodeRef",
    "FunctionCount",
    "LineCount",
    "PhaseProvider",
    "RawStacks",
    "SegmentProvider",
    "StackCount",
    "StackSampler",
    "default_root_codes",
    "infer_phase",
]

THREAD_NAME_PREFIX = "gpu_notebook-stacks"

# Returns the phase running now ("data", "forward"...) or None; called once per sample from the
# sampler thread, so it must only read an attribute.
PhaseProvider = Callable[[], str | None]
# Returns where the step clock stands now: (its anchor, the steps it has counted under it);
# called once per sample from the sampler thread, so it must only read attributes.
SegmentProvider = Callable[[], tuple[str, int]]
# Anchors no later one can supersede: steps counted under them are the run's for good.
_FINAL_ANCHORS = frozenset({"optimizer"})
# The edge sampler takes the run's steps to have stopped once no step mark came for this many
# step periods (a step a few times the median is still a step: the first after a compile, one
# with a periodic save), within these bounds: at least a few of its intervals (each look is a
# wake of our thread and a GIL hand-over: the gate looks once a quiet span, not every interval),
# at most what an after-span worth naming (a second or more of a save, at 20 Hz) can spare of
# its start. Longer steps are sampled past the bound,
# held back and dropped at their end, as before.
_QUIET_STEPS = 3.0
_QUIET_MIN_INTERVALS = 4.0
_QUIET_MAX_S = 1.0

# A sampler that backs off (``back_off=True``) stretches its interval up to this many times while
# its wakes come late; see ``_BackOff``.
_BACK_OFF_MAX = 8

_OWN_FILENAME = (lambda: None).__code__.co_filename
_JOIN_TIMEOUT_S = 5.0
_MIN_INTERVAL_S = 0.001
_MAX_INTERVAL_S = 1.0


# What stop() returns lives in records.py (CodeRef, StackCount, LineCount, FunctionCount,
# RawStacks): the Run carries it to the analysis.


# --------------------------------------------------------------------------------------------
# Phase read from the stack, for samples the provider did not label.
# --------------------------------------------------------------------------------------------


_CLOSURE_WRAPPER_FILE = "gpu_notebook/capture/stepclock.py"  # StepClock._wrap_closure


# The outermost match wins: a module called from a collate_fn is data time (an LBFGS closure's
# forward is forward: ``infer_phase`` reads under the step clock's closure wrapper). Building a
# model or an optimizer (their __init__, lazy imports) is no phase at all.
def _phase_of(filename: str, qualname: str) -> str | None:
    if "torch/" not in filename:
        return None
    if filename.endswith("torch/utils/data/dataloader.py"):
        return "data" if qualname == "_BaseDataLoaderIter.__next__" else None
    if filename.endswith(("torch/autograd/__init__.py", "torch/_tensor.py")):
        return "backward" if qualname in ("backward", "Tensor.backward") else None
    if filename.endswith("torch/nn/modules/module.py"):
        return "forward" if qualname == "Module._call_impl" else None
    if "torch/optim/" in filename and not filename.endswith("lr_scheduler.py"):
        name = qualname.rsplit(".", 1)[-1]
        if name in ("step", "zero_grad") or qualname.endswith("profile_hook_step.<locals>.wrapper"):
            return "optimizer"
    return None


def infer_phase(functions: Sequence[CodeRef]) -> str | None:
    """The training phase a stack (outermost first) is in, read from torch's own frames.

    Inside the step clock's wrapper of an ``optimizer.step(closure)`` closure, only the frames
    under it count: the closure's forward and backward are theirs, and the rest of it (a
    Lightning callback's logging) is no phase, never the optimizer step around it."""
    for k in range(len(functions) - 1, -1, -1):
        ref = functions[k]
        if ref.function.rsplit(".", 1)[-1] == "closure" and ref.filename.replace(
            "\\", "/"
        ).endswith(_CLOSURE_WRAPPER_FILE):
            functions = functions[k + 1 :]
            break
    for ref in functions:
        phase = _phase_of(ref.filename.replace("\\", "/"), ref.function)
        if phase is not None:
            return phase
    return None


def default_root_codes() -> tuple[CodeType, ...]:
    """Frames the walk stops at: IPython's ``run_code``, which calls the cell's code object."""
    shell_mod = sys.modules.get("IPython.core.interactiveshell")
    if shell_mod is None:
        return ()
    run_code = getattr(shell_mod.InteractiveShell, "run_code", None)
    code = getattr(run_code, "__code__", None)
    return (code,) if isinstance(code, CodeType) else ()


def cell_numbers(functions: Iterable[CodeRef]) -> dict[str, int]:
    """The execution number (In[N]) of each cell among ``functions``' files, as the running
    shell's compiler recorded it when it compiled the cell: ipykernel's file names are a hash of
    the source, and its tracebacks name "Cell In[3]" from this same record
    (``CachingCompiler._filename_map``, behind ``format_code_name``). Empty outside IPython or
    where the compiler keeps no such record."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    known = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if not isinstance(known, Mapping):
        return {}
    out: dict[str, int] = {}
    for ref in functions:
        number = known.get(ref.filename)
        if isinstance(number, int) and not isinstance(number, bool) and number > 0:
            out[ref.filename] = number
    return out


# --------------------------------------------------------------------------------------------
# The edge sampler's gate over the run's steps
# --------------------------------------------------------------------------------------------


class _StepGate:
    """Whether the run's steps are running, from where the step clock stands at each look.

    The last step mark is known only once the cell ends; in real time, the steps are taken to
    run while marks keep coming: a look that saw the count move, or came within the quiet span
    of one that did, closes the gate. The quiet span follows the steps' period, read from the
    looks themselves (marks counted over the time between looks). Only steps counted under a
    final anchor close it: the run's, whose samples would be dropped. Used by the sampler's
    thread alone; times are ``perf_counter`` seconds, passed in (no clock read here).
    """

    def __init__(self, interval_s: float) -> None:
        self.min_s = _QUIET_MIN_INTERVALS * interval_s
        self.max_s = max(_QUIET_MAX_S, self.min_s)
        self.segment: tuple[str, int] | None = None  # the clock's position at the last mark seen
        self.seen_s = 0.0  # when that mark was seen
        self.period_s: float | None = None  # the steps' period, smoothed over the looks

    def quiet_s(self) -> float:
        """How long no mark must come before the steps are taken to have stopped."""
        if self.period_s is None:
            return self.min_s
        return min(max(_QUIET_STEPS * self.period_s, self.min_s), self.max_s)

    def look(self, segment: tuple[str, int], now_s: float) -> float:
        """The seconds until the gate may open again (0: it is open, sample now)."""
        anchor, count = segment
        if count == 0 or anchor not in _FINAL_ANCHORS:
            self.segment = None
            return 0.0
        last = self.segment
        if segment != last:  # a step mark since the last look: the steps are running
            if last is not None and last[0] == anchor and count > last[1]:
                observed_s = (now_s - self.seen_s) / (count - last[1])
                previous = self.period_s
                self.period_s = observed_s if previous is None else (previous + observed_s) / 2
            self.segment, self.seen_s = segment, now_s
            return self.quiet_s()
        return max(0.0, self.seen_s + self.quiet_s() - now_s)


class _BackOff:
    """The interval's multiple for a sampler that backs off while its wakes come late.

    A wake that got the GIL later than the program's switch interval after it was due waited
    at least one whole switch interval for it: the loop thread held the GIL that long (pure
    Python, stretched by a busy machine's waits for a core), so this thread asked it to drop
    the GIL. CPython's forced switch then keeps the loop thread asleep until this thread is on
    a core and has taken the GIL: on a busy machine a wake-up latency of milliseconds (a
    scheduler tick, 4 ms, or more) that the loop's step pays as time off a core, in whatever
    phase held the GIL (the data wait of a Python dataset: benchmarks/README.md, "Our sampler
    threads and the loop thread's time off a core"). Each late wake doubles the interval (up
    to ``_BACK_OFF_MAX`` times), each timely one halves it back: fewer such hand-overs while
    the machine is busy, the set rate on a quiet one. Samples weigh the time since the previous
    one, so a longer gap keeps the counts' time right; only their number falls."""

    def __init__(self) -> None:
        self.factor = 1
        self.late_wakes = 0  # wakes that came later than the switch interval

    def after_wake(self, late_ns: int, switch_ns: int) -> int:
        """The multiple of the interval until the next wake, after one ``late_ns`` late."""
        if late_ns > switch_ns:
            self.late_wakes += 1
            self.factor = min(self.factor * 2, _BACK_OFF_MAX)
        else:
            self.factor = max(1, self.factor // 2)
        return self.factor


class _ThreadClock:
    """One thread's CPU time and wait for a core so far, read from another thread (Linux
    ``/proc/self/task/TID/schedstat``: run time, run-queue wait, both ns; one ``pread`` of a
    file held open, a few us).

    Why a sample carries these too: on a busy machine most of the sampled thread's wall time
    is its wait for a core, and some its wait for the GIL while the thread that holds it waits
    for one; neither is the program's work. The framework's share is read on the thread's own
    clock (analysis/framework_stacks.share_clock)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def open(cls, thread_ident: int) -> _ThreadClock | None:
        """The clock of the live thread ``thread_ident`` (``threading.get_ident()``); None: the
        thread is not found or the system has no schedstat."""
        native = next((t.native_id for t in threading.enumerate() if t.ident == thread_ident), None)
        if native is None:
            return None
        try:
            fd = open_high(f"/proc/self/task/{native}/schedstat")
        except OSError:
            return None
        clock = cls(fd)
        if clock.read() is None:
            clock.close()
            return None
        return clock

    def read(self) -> tuple[int, int] | None:
        """(CPU ns, wait for a core ns) so far; None: not read (the thread ended)."""
        if self._fd is None:
            return None
        try:
            fields = os.pread(self._fd, 96, 0).split()
            return int(fields[0]), int(fields[1])
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


# --------------------------------------------------------------------------------------------
# The sampler
# --------------------------------------------------------------------------------------------


class StackSampler(StartsAndStops):
    """Samples one thread's Python stack at ``interval_s`` into bounded folded counts.

    ``start()`` begins sampling (``start(paused=True)`` installs the sampler without sampling),
    ``pause()``/``resume()`` bracket the spans to sample (e.g. the steps after the profiler
    window), ``stop()`` ends it and returns :class:`RawStacks`. ``cell_filename`` may be set at
    any time before ``stop()``: it restricts the per-line table to the cell (None keeps every
    file). ``phase_provider`` labels each sample with the running phase. If the provider (or the
    sampler itself) raises, sampling stops and ``stop()`` raises that error.
    ``switch_interval_s`` is the interpreter switch interval while the sampler samples (None:
    leave it; restored at ``pause()``/``stop()`` unless the cell set its own meanwhile).
    ``root_codes``: frames the walk stops at (default: IPython's ``run_code``).

    ``segment_provider`` makes it the *edge* sampler: what it keeps is the time outside the
    steps, labelled (``records.EDGE_*``) by where the step clock stood. A sample taken before
    any step is ``before``. One taken inside the steps is held back with the step it fell in;
    at the next step it is dropped under the optimizer anchor (those steps are the run's), or
    kept as ``steps:<anchor>`` under a lower one (a later optimizer would make them the time
    before the run's first step: an evaluation over a DataLoader). At ``stop()`` what is still
    held fell after the last step ended: ``after:<anchor>`` (unless the clock has moved on
    since: then it was a step's). The last step is known only once the cell ends, so that is
    the one way to keep its tail without a timestamp a sample. While the optimizer's steps
    run, no sample is taken at all (``_StepGate``; ``gate_steps=False`` samples through them,
    as before, for the cost benchmark): ``samples_taken`` and ``gated_looks`` count both.
    """

    def __init__(
        self,
        thread_id: int,
        interval_s: float = 0.005,
        max_stacks: int = 2048,
        *,
        phase_provider: PhaseProvider | None = None,
        cell_filename: str | None = None,
        root_codes: Collection[CodeType] | None = None,
        switch_interval_s: float | None = 0.0002,
        brief_switch: bool = False,
        segment_provider: SegmentProvider | None = None,
        gate_steps: bool = True,
        back_off: bool = False,
        thread_clock: bool = True,
    ) -> None:
        if not _MIN_INTERVAL_S <= interval_s <= _MAX_INTERVAL_S:
            raise ValueError(
                f"interval_s must be between {_MIN_INTERVAL_S} and {_MAX_INTERVAL_S} s, "
                f"got {interval_s!r}"
            )
        if max_stacks < 1:
            raise ValueError(f"max_stacks must be at least 1, got {max_stacks!r}")
        self.thread_id = thread_id
        # Sampling a thread the cell started (``follow``): its whole stack is the cell's work.
        self._followed = False
        self.interval_s = float(interval_s)
        self.max_stacks = int(max_stacks)
        self.phase_provider = phase_provider
        self.segment_provider = segment_provider
        self.gate_steps = gate_steps
        # Stretch the interval while wakes come late (``_BackOff``): for the samplers that run
        # through the steps at the program's pace (the sparse and edge ones), not the dense one,
        # whose few steps need every sample.
        self.back_off = _BackOff() if back_off else None
        self.cell_filename = cell_filename
        # Each sample also weighs the thread's CPU time and wait for a core since the previous
        # one (``_ThreadClock``): the shares that must read the same on a busy machine. Not
        # for the edge sampler, whose samples keep the time outside the steps, never a share.
        self._thread_clock = thread_clock and segment_provider is None
        self._clock: _ThreadClock | None = None
        self._clock_base: tuple[int, int] | None = None  # (cpu_ns, wait_ns) at the last sample
        self._clock_lost = False  # a reading failed (the thread ended): no CPU weights at all
        self._clock_opened = False  # the clock was read from the start (else: no CPU weights)
        self.switch_interval_s = switch_interval_s
        self.brief_switch = brief_switch and switch_interval_s is not None
        self._jitter = random.Random()  # never the program's own `random` state
        self._saved_switch_s: float | None = None  # the interpreter's own, while ours is set
        roots = default_root_codes() if root_codes is None else tuple(root_codes)
        self._root_ids = frozenset(id(code) for code in roots)
        self._roots = roots  # keeps the root code objects (and so their ids) alive

        self._lock = threading.Lock()  # held for each thread sample, so pause() means "no more"
        self._resume_event = threading.Event()
        self._thread: HiddenThread | None = None
        self._started = False
        self._active = False
        self._stopping = False
        self._active_since = 0.0
        self._last_sample_ns = 0  # a sample weighs the time since the previous one (or resume)
        self._duration_s = 0.0
        self._error: BaseException | None = None
        self._cpu_s = 0.0
        self._result: RawStacks | None = None

        # Written by the sampler thread only; read by stop() after it ended.
        # a key is (phase, rooted, id(code), f_lasti, ...).
        self._counts: dict[tuple[object, ...], list[int]] = {}
        self._codes: dict[int, CodeType] = {}
        self._missed = 0
        self._late_ns = 0
        # stack key -> [samples, time_us, cpu_us, wait_us] (``_tally``).
        # Folded samples (past max_stacks), counted exactly by the slow path: the same four.
        self._other = [0, 0, 0, 0]
        self._other_own = 0
        self._other_outside = [0, 0]
        self._other_lines: dict[tuple[str, int, str | None], list[int]] = {}
        self._other_self: dict[int, list[int]] = {}
        self._other_total: dict[int, list[int]] = {}
        self._line_tables: dict[int, tuple[list[int], list[int]]] = {}
        # The edge sampler's samples of the step now open (segment_provider): stack key ->
        # [samples, time_us], and the (anchor, step count) they fell in.
        self._held: dict[tuple[object, ...], list[int]] = {}
        self._held_segment: tuple[str, int] | None = None
        # The edge sampler's wakes: those that sampled, those the gate turned away (the steps
        # were running), and whether the last one was turned away (the next sample's weight).
        self._samples_taken = 0
        self._gated_looks = 0
        self._after_gate = False
        # Set by stop(): ends a gated wait (up to _QUIET_MAX_S) at once.
        self._stop_event = threading.Event()

    # ---------------------------------------------------------------- lifecycle

    def start(self, *, paused: bool = False) -> StackSampler:
        """Start the sampler thread; sample unless ``paused``. Raises RuntimeError when started twice."""
        if self._started:
            raise RuntimeError("this StackSampler was already started; make a new one")
        self._started = True
        self._stopping = False
        if self._thread_clock:
            self._clock = _ThreadClock.open(self.thread_id)
            self._clock_opened = self._clock is not None
        if not paused:
            self._set_active(True)
        self._thread = HiddenThread(self._run, f"{THREAD_NAME_PREFIX}-{self.thread_id}").start()
        return self

    def pause(self) -> None:
        """Stop sampling until ``resume()``; no sample is taken after this returns."""
        with self._lock:
            self._set_active(False)

    def follow(self, thread_id: int) -> None:
        """Sample ``thread_id`` from now on: a thread the cell started, where its training steps
        run (the step clock followed it). Its stack never passes the cell's root frame (it
        starts at ``threading``'s bootstrap), so each of its samples counts as inside the cell."""
        # threading's own frames under the thread's target are the root: the walk stops there,
        # so the outermost frame kept is the cell's (it names the cell's file for the hot lines).
        thread = threading.Thread
        codes = (thread.run.__code__, thread._bootstrap_inner.__code__,  # type: ignore[attr-defined]
                 thread._bootstrap.__code__)  # type: ignore[attr-defined]  # fmt: skip
        with self._lock:
            self.thread_id = thread_id
            self._followed = True
            if self._clock is not None:
                self._clock.close()
                self._clock = _ThreadClock.open(thread_id)
                self._clock_lost = self._clock_lost or self._clock is None
                self._clock_base = self._read_clock()
            self._roots = (*self._roots, *codes)
            self._root_ids = self._root_ids | {id(code) for code in codes}

    def resume(self) -> None:
        """Sample again (after ``pause()`` or ``start(paused=True)``)."""
        with self._lock:
            if not self._stopping and self._started:
                self._set_active(True)

    @property
    def active(self) -> bool:
        return self._active

    @property
    def samples_taken(self) -> int:
        """The edge sampler's samples so far (kept, held or dropped): its cost, in samples."""
        return self._samples_taken

    @property
    def late_wakes(self) -> int:
        """Wakes that came later than the program's switch interval (0 without ``back_off``)."""
        return 0 if self.back_off is None else self.back_off.late_wakes

    @property
    def gated_looks(self) -> int:
        """The edge sampler's wakes that took no sample: the run's steps were running."""
        return self._gated_looks

    @property
    def distinct_stacks(self) -> int:
        """Distinct stacks kept so far (never more than ``max_stacks``)."""
        return len(self._counts)

    def stop(self) -> RawStacks:
        """End sampling and return the counts; the handler and timer, or the thread, are gone.

        Calling it again returns the same counts. An error raised while sampling (by the
        phase provider, or a bug here) is raised now rather than hidden.
        """
        if self._result is not None:
            return self._result
        if not self._started:
            raise RuntimeError("StackSampler.stop() called before start()")
        with self._lock:
            self._set_active(False)
            self._stopping = True
            self._resume_event.set()
            self._stop_event.set()
        thread_alive = False
        if self._thread is not None:
            thread = self._thread
            thread.join(_JOIN_TIMEOUT_S)
            self._thread = None
            thread_alive = thread.is_alive()
        error, self._error = self._error, None
        if self._clock is not None:
            with self._lock:
                self._clock.close()
                self._clock, self._clock_lost = None, self._clock_lost or thread_alive
        if not thread_alive:  # else the thread may still write them: leave them out
            # A step mark since the held samples (the cell ended before the next look): they
            # were that step's, not the time after the last one.
            provider = self.segment_provider
            moved = bool(self._held) and provider is not None and provider() != self._held_segment
            self._release_held(final=not moved)
        self._result = self._resolve(thread_alive=thread_alive)
        # The raw keys and code objects are no longer needed: let them (and the memory) go.
        self._counts = {}
        self._codes = {}
        self._line_tables = {}
        if error is not None:
            raise error
        return self._result

    def _set_active(self, active: bool) -> None:
        now = time.perf_counter()
        if active and not self._active:
            self._active_since = now
            self._last_sample_ns = time.perf_counter_ns()
            self._clock_base = self._read_clock()
            if not self.brief_switch:
                self._lower_switch_interval()
            self._resume_event.set()
        elif not active and self._active:
            self._duration_s += now - self._active_since
            self._restore_switch_interval()
            self._resume_event.clear()
        self._active = active

    def _read_clock(self) -> tuple[int, int] | None:
        """The sampled thread's (CPU, wait for a core) so far, ns; None: not read (and from the
        first failed reading on, never: the weights would miss a span)."""
        clock = self._clock
        if clock is None or self._clock_lost:
            return None
        reading = clock.read()
        if reading is None:
            self._clock_lost = True
        return reading

    def _clock_weights(self) -> tuple[int, int]:
        """The sampled thread's CPU time and wait for a core since the previous sample, us."""
        base = self._clock_base
        now = self._read_clock() if base is not None else None
        self._clock_base = now
        if base is None or now is None:
            return 0, 0
        return max(0, now[0] - base[0]) // 1000, max(0, now[1] - base[1]) // 1000

    def _lower_switch_interval(self) -> None:
        wanted = self.switch_interval_s
        current = sys.getswitchinterval()
        if wanted is not None and wanted < current:
            self._saved_switch_s = current
            sys.setswitchinterval(wanted)

    def _restore_switch_interval(self) -> None:
        saved, self._saved_switch_s = self._saved_switch_s, None
        # Only if it is still ours: a cell that set its own interval meanwhile keeps it.
        if (
            saved is not None
            and self.switch_interval_s is not None
            and abs(sys.getswitchinterval() - self.switch_interval_s) < 1e-7
        ):
            sys.setswitchinterval(saved)

    # ---------------------------------------------------------------- thread mode

    def _run(self) -> None:
        cpu0 = time.thread_time()
        interval = self.interval_s
        brief = self.brief_switch
        edge = self.segment_provider is not None
        gate = _StepGate(interval) if edge and self.gate_steps else None
        back_off = self.back_off
        factor = 1
        try:
            next_t = time.perf_counter()
            while not self._stopping:
                if not self._active:
                    self._resume_event.wait()
                    next_t = time.perf_counter()
                    continue
                step_s = interval * factor
                if brief:
                    # A jittered clock (no lock-step with a step of a fixed period), the switch
                    # interval ours only from just before each sample until it is taken.
                    next_t += step_s * self._jitter.uniform(0.5, 1.5)
                    self._lower_before(next_t)
                else:
                    next_t += step_s
                delay = next_t - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)  # returns once this thread holds the GIL again
                else:  # behind (GIL held by the cell): no burst of catch-up samples
                    next_t = time.perf_counter()
                late_ns = int((time.perf_counter() - next_t) * 1e9)
                if back_off is not None:
                    # The program's own switch interval (brief: restored just after the sample,
                    # so read it as saved while ours is set).
                    switch_s = self._saved_switch_s or sys.getswitchinterval()
                    factor = back_off.after_wake(late_ns, int(switch_s * 1e9))
                wait_s = 0.0
                with self._lock:
                    if self._active:
                        if edge:
                            wait_s = self._edge_wake(gate, late_ns)
                        else:
                            self._sample(late_ns)
                    if brief:
                        self._restore_switch_interval()
                if wait_s > 0:
                    # The steps are running: no look before the gate may open (fewer wakes of
                    # ours, each one a GIL hand-over), unless stop() ends the wait.
                    self._stop_event.wait(wait_s)
                    next_t = time.perf_counter() - interval
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop(): a failing provider is the caller's
            self._error = exc
            with self._lock:
                self._set_active(False)
                self._restore_switch_interval()
        finally:
            self._cpu_s = time.thread_time() - cpu0

    def _lower_before(self, sample_t: float) -> None:
        """Lower the switch interval ahead of the sample due at ``sample_t``: by the program's
        own interval (the longest this thread may wait for the GIL to lower it) and 1 ms more,
        so that the sample itself waits at most ours and falls when the clock says, wherever
        the program is, not on its next GIL-releasing call."""
        lead = sys.getswitchinterval() + 0.001
        delay = sample_t - lead - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        with self._lock:
            if self._active:
                self._lower_switch_interval()

    def _sample(self, late_ns: int = 0) -> None:
        """One sample of the target thread, from the sampler thread."""
        self._sample_frame(current_frames().get(self.thread_id), late_ns, time.perf_counter_ns())

    def _edge_wake(self, gate: _StepGate | None, late_ns: int) -> float:
        """One wake of the edge sampler: a sample, unless the run's steps are running (no gate:
        a sample). Returns the seconds until the gate may open (0: sampled)."""
        segment = cast("SegmentProvider", self.segment_provider)()
        now_ns = time.perf_counter_ns()
        wait_s = 0.0 if gate is None else gate.look(segment, now_ns / 1e9)
        if wait_s > 0:
            self._gated_looks += 1
            self._after_gate = True
            if self._held and segment != self._held_segment:
                self._release_held(final=False)  # the step they fell in has ended
            return wait_s
        if self._after_gate:
            # The time since the last look was not sampled (the steps, then the start of what
            # follows them): this sample stands for one interval, as every other.
            self._after_gate = False
            self._last_sample_ns = now_ns - int(self.interval_s * 1e9)
        self._samples_taken += 1
        self._sample_frame(current_frames().get(self.thread_id), late_ns, now_ns, segment=segment)
        return 0.0

    # ---------------------------------------------------------------- both

    def _sample_frame(
        self,
        top: FrameType | None,
        late_ns: int,
        now_ns: int,
        weight_us: int | None = None,
        *,
        segment: tuple[str, int] | None = None,
        cpu_us: int | None = None,
        wait_us: int = 0,
    ) -> None:
        """One sample: the hot path. Ints only; no strings, no line numbers, no code hashing.

        ``weight_us``: the time the sample stands for (default: the wall time since the
        previous sample, for the thread, whose own sampling the GIL delays). ``cpu_us``,
        ``wait_us``: the thread's CPU time and wait for a core in that time (default: read
        from its clock, ``_ThreadClock``). ``segment``: where the step clock stood, already read
        (default: read from ``segment_provider``).
        """
        if weight_us is None:
            weight_us = (now_ns - self._last_sample_ns) // 1000
        self._last_sample_ns = now_ns
        if cpu_us is None:
            cpu_us, wait_us = self._clock_weights()
        weights = (weight_us, cpu_us, wait_us)
        if top is None:
            self._missed += 1
            return
        self._late_ns += late_ns
        provider = self.phase_provider
        key: list[object] = [provider() if provider is not None else None, self._followed]
        held: tuple[str, int] | None = None
        if segment is None and self.segment_provider is not None:
            segment = self.segment_provider()
        if segment is not None:
            held = segment
            if held[1] == 0:
                key[0], held = EDGE_BEFORE, None
        append = key.append
        # The code objects of this very walk: the target thread runs on while we walk (the GIL
        # can pass between our bytecodes), so a second walk from ``top`` could meet another
        # chain (a frame completing, an incomplete one skipped) and leave an id of the key
        # without its code (seen once in CI: KeyError at stop, the user's run failed with it).
        walked: list[CodeType] = []
        keep = walked.append
        roots = self._root_ids
        frame: FrameType | None = top
        while frame is not None:
            code = frame.f_code
            cid = id(code)
            if cid in roots:
                key[1] = True
                break
            keep(code)
            append(cid)
            append(frame.f_lasti)
            frame = frame.f_back
        stack = tuple(key)
        if held is not None:
            self._hold(held, stack, walked, weights)
            return
        counts = self._counts
        tally = counts.get(stack)
        if tally is not None:
            _tally(tally, weights)
        elif len(counts) < self.max_stacks:
            self._register(walked)
            counts[stack] = [1, *weights]
        else:
            self._register(walked)
            self._fold(stack, weights)

    def _hold(
        self, segment: tuple[str, int], stack: tuple[object, ...], walked: list[CodeType],
        weights: tuple[int, int, int],
    ) -> None:  # fmt: skip
        """Hold an edge sample taken inside step ``segment``; a new step releases the last."""
        if segment != self._held_segment:
            self._release_held(final=False)
            self._held_segment = segment
        tally = self._held.get(stack)
        if tally is not None:
            _tally(tally, weights)
        elif len(self._held) < self.max_stacks:  # past it: a step this varied is the steps'
            self._register(walked)
            self._held[stack] = [1, *weights]

    def _release_held(self, *, final: bool) -> None:
        """The held samples' step has ended (``final``: the cell has): drop them where they
        were the run's steps, else count them under their label (see ``segment_provider``)."""
        held, segment = self._held, self._held_segment
        self._held, self._held_segment = {}, None
        if not held or segment is None:
            return
        anchor = segment[0]
        if final:
            label = EDGE_AFTER + anchor
        elif anchor in _FINAL_ANCHORS:
            return
        else:
            label = EDGE_STEPS + anchor
        counts = self._counts
        for stack, (n, *weights) in held.items():
            key = (label, *stack[1:])
            tally = counts.get(key)
            if tally is not None:
                tally[0] += n
                for k, value in enumerate(weights, 1):
                    tally[k] += value
            elif len(counts) < self.max_stacks:
                counts[key] = [n, *weights]
            else:
                self._fold(key, weights)  # its time exact; its samples counted as one

    def _register(self, walked: list[CodeType]) -> None:
        """Keep every code object of a new stack alive, so its id keeps meaning that code."""
        codes = self._codes
        for code in walked:
            cid = id(code)
            if cid not in codes:
                codes[cid] = code

    def _fold(self, stack: tuple[object, ...], weights: Sequence[int]) -> None:
        """Slow path past max_stacks: count the sample's lines and functions exactly."""
        weight_us = weights[0]
        pairs = _pairs(stack)
        codes = self._codes
        refs = [codes[pairs[i]] for i in range(len(pairs) - 2, -1, -2)]
        if any(code.co_filename == _OWN_FILENAME for code in refs):
            self._other_own += 1
            return
        if self._root_ids and not stack[1]:  # outside the cell: see RawStacks.outside_samples
            _add(self._other_outside, weight_us)
            return
        _tally(self._other, weights)
        phase = stack[0] if isinstance(stack[0], str) else None
        if phase is None:
            phase = infer_phase([_code_ref(code) for code in refs])
        cell = self.cell_filename
        seen_lines: set[tuple[str, int]] = set()
        for i in range(0, len(pairs), 2):
            code = codes[pairs[i]]
            if cell is None or code.co_filename == cell:
                seen_lines.add((code.co_filename, self._line_of(code, pairs[i + 1])))
        for filename, line in seen_lines:
            _add(self._other_lines.setdefault((filename, line, phase), [0, 0]), weight_us)
        for cid in set(pairs[0::2]):
            _add(self._other_total.setdefault(cid, [0, 0]), weight_us)
        if pairs:
            _add(self._other_self.setdefault(pairs[0], [0, 0]), weight_us)

    # ---------------------------------------------------------------- resolution (stop time)

    def _line_of(self, code: CodeType, lasti: int) -> int:
        """The line an instruction offset belongs to (what ``f_lineno`` computes, cached)."""
        table = self._line_tables.get(id(code))
        if table is None:
            starts: list[int] = []
            lines: list[int] = []
            for start, _end, line in code.co_lines():
                if line is not None:
                    starts.append(start)
                    lines.append(line)
            table = (starts, lines)
            self._line_tables[id(code)] = table
        starts, lines = table
        i = bisect.bisect_right(starts, lasti) - 1
        if i < 0:
            return lines[0] if lines else code.co_firstlineno
        return lines[i]

    def _resolve(self, *, thread_alive: bool) -> RawStacks:
        codes = self._codes
        index: dict[int, int] = {}
        functions: list[CodeRef] = []

        def function_index(cid: int) -> int:
            i = index.get(cid)
            if i is None:
                i = index[cid] = len(functions)
                functions.append(_code_ref(codes[cid]))
            return i

        merged: dict[tuple[str | None, bool, tuple[tuple[int, int], ...]], list[int]] = {}
        own = self._other_own
        outside = list(self._other_outside)
        # Once some samples are inside a cell, the others are IPython around it, not the cell.
        any_rooted = any(stack[1] for stack in self._counts)
        for stack, tally in self._counts.items():
            pairs = _pairs(stack)
            if any(codes[cid].co_filename == _OWN_FILENAME for cid in pairs[0::2]):
                own += tally[0]
                continue
            if any_rooted and not stack[1]:
                outside[0] += tally[0]
                outside[1] += tally[1]
                continue
            frames = tuple(
                (function_index(pairs[i]), self._line_of(codes[pairs[i]], pairs[i + 1]))
                for i in range(len(pairs) - 2, -1, -2)
            )
            phase = stack[0] if isinstance(stack[0], str) else None
            if phase is None:
                phase = infer_phase([functions[f] for f, _line in frames])
            total = merged.setdefault((phase, bool(stack[1]), frames), [0, 0, 0, 0])
            for k, value in enumerate(tally):
                total[k] += value

        stacks = tuple(
            StackCount(frames=frames, phase=phase, count=n, time_us=us, rooted=rooted,
                       cpu_us=cpu, wait_us=wait)
            for (phase, rooted, frames), (n, us, cpu, wait) in sorted(
                merged.items(), key=lambda kv: (-kv[1][1], -kv[1][0])
            )
        )  # fmt: skip
        read = self._clock_opened and not self._clock_lost
        # Folded functions need indexes too (a function may only ever appear past the cap).
        other_self = {function_index(cid): v for cid, v in self._other_self.items()}
        other_total = {function_index(cid): v for cid, v in self._other_total.items()}
        samples = sum(s.count for s in stacks) + self._other[0]
        return RawStacks(
            thread_id=self.thread_id,
            interval_s=self.interval_s,
            samples=samples,
            time_us=sum(s.time_us for s in stacks) + self._other[1],
            duration_s=self._duration_s,
            functions=tuple(functions),
            stacks=stacks,
            other_samples=self._other[0],
            other_us=self._other[1],
            lines=_line_counts(stacks, functions, self.cell_filename, self._other_lines),
            function_counts=_function_counts(stacks, other_self, other_total),
            cell_filename=self.cell_filename,
            root_filename=_root_filename(stacks, functions),
            missed_samples=self._missed,
            late_s=self._late_ns / 1e9,
            own_samples=own,
            outside_samples=outside[0],
            outside_us=outside[1],
            sampler_cpu_s=self._cpu_s if not thread_alive else 0.0,
            clocked=self.brief_switch,
            cell_numbers=cell_numbers(functions),
            cpu_us=sum(s.cpu_us for s in stacks) + self._other[2] if read else None,
            wait_us=sum(s.wait_us for s in stacks) + self._other[3] if read else None,
        )


def _tally(tally: list[int], weights: Iterable[int]) -> None:
    """One more sample in ``tally`` ([samples, time_us, cpu_us, wait_us]), of ``weights``."""
    tally[0] += 1
    for k, value in enumerate(weights, 1):
        tally[k] += value


def _add(tally: list[int], weight_us: int) -> None:
    tally[0] += 1
    tally[1] += weight_us


def _pairs(stack: tuple[object, ...]) -> tuple[int, ...]:
    """The (id(code), f_lasti) ints of a stack key, innermost frame first."""
    return cast("tuple[int, ...]", stack[2:])


def _code_ref(code: CodeType) -> CodeRef:
    qualname = getattr(code, "co_qualname", code.co_name)  # co_qualname: Python 3.11+
    return CodeRef(filename=code.co_filename, function=qualname, first_line=code.co_firstlineno)


def _line_counts(
    stacks: Iterable[StackCount],
    functions: Sequence[CodeRef],
    cell_filename: str | None,
    other: Mapping[tuple[str, int, str | None], list[int]],
) -> tuple[LineCount, ...]:
    totals: dict[tuple[str, int], list[int]] = {}
    phases: dict[tuple[str, int], Counter[str]] = {}
    for stack in stacks:
        seen = {
            (functions[f].filename, line)
            for f, line in stack.frames
            if cell_filename is None or functions[f].filename == cell_filename
        }
        for where in seen:  # once a sample: a recursive line is still one sample
            tally = totals.setdefault(where, [0, 0])
            tally[0] += stack.count
            tally[1] += stack.time_us
            if stack.phase is not None:
                phases.setdefault(where, Counter())[stack.phase] += stack.time_us
    for (filename, line, phase), (n, us) in other.items():
        tally = totals.setdefault((filename, line), [0, 0])
        tally[0] += n
        tally[1] += us
        if phase is not None:
            phases.setdefault((filename, line), Counter())[phase] += us
    return tuple(
        LineCount(
            filename=f,
            line=ln,
            samples=n,
            time_us=us,
            phase_time_us=dict(phases.get((f, ln), {})),
        )
        for (f, ln), (n, us) in sorted(totals.items())
    )


def _function_counts(
    stacks: Iterable[StackCount],
    other_self: Mapping[int, list[int]],
    other_total: Mapping[int, list[int]],
) -> tuple[FunctionCount, ...]:
    self_counts: dict[int, list[int]] = {f: list(v) for f, v in other_self.items()}
    total_counts: dict[int, list[int]] = {f: list(v) for f, v in other_total.items()}
    for stack in stacks:
        if stack.frames:
            tally = self_counts.setdefault(stack.frames[-1][0], [0, 0])
            tally[0] += stack.count
            tally[1] += stack.time_us
        for f in {f for f, _line in stack.frames}:
            tally = total_counts.setdefault(f, [0, 0])
            tally[0] += stack.count
            tally[1] += stack.time_us
    return tuple(
        FunctionCount(
            function=f,
            self_samples=self_counts.get(f, [0, 0])[0],
            total_samples=n,
            self_us=self_counts.get(f, [0, 0])[1],
            total_us=us,
        )
        for f, (n, us) in sorted(total_counts.items(), key=lambda kv: (-kv[1][1], kv[0]))
    )


def _root_filename(stacks: Iterable[StackCount], functions: Sequence[CodeRef]) -> str | None:
    """The cell's file: that of the code ``run_code`` runs. Its other callees are IPython's
    own display of the cell's exception (``showtraceback``: the edge sampler's whole tail when a
    long traceback takes seconds to show; unseen round 12's DataLoader worker error read "line
    2279" of interactiveshell.py as a cell line): never the cell's."""
    roots: Counter[str] = Counter()
    for stack in stacks:
        if stack.rooted and stack.frames:
            code = functions[stack.frames[0][0]]
            if code.function.rsplit(".", 1)[-1] not in IPYTHON_ERROR_DISPLAY:
                roots[code.filename] += stack.time_us
    return roots.most_common(1)[0][0] if roots else None


# What IPython's run_code calls to show the cell's exception (InteractiveShell's methods).
IPYTHON_ERROR_DISPLAY = frozenset({"showtraceback", "showsyntaxerror"})
