"""Find training steps in an unmodified cell through global torch hooks, and time their phases.

No ``prof.step()`` and no change to the user's code: three kinds of events are watched, and the
highest-priority kind seen so far ends a step (the *anchor*):

1. ``optimizer`` — a global optimizer step post hook (any ``torch.optim.Optimizer``): one step per
   optimizer step, so gradient accumulation (several forward/backward per step) and closure
   optimizers (LBFGS calls forward/backward many times inside ``step``) count right; a closure
   is handed to ``step`` wrapped, so its calls are not the update's time (``_wrap_closure``).
   Several optimizers an iteration (D and G, a critic's D n times then G): one step a period of
   their pattern (``_closes_cycle``), the first one too;
2. ``dataloader`` — ``DataLoader`` iterator ``__next__``: inference loops, manual SGD with a loader;
3. ``backward`` — ``torch.autograd.backward``, and ``torch.autograd.grad`` (which
   ``torch.func.grad`` calls): manual updates, models without an optimizer.

There are no module hooks (the ``forward`` anchor of older records is never set now): global
module hooks are part of what dynamo traces — a ``torch.compile``d model warned, guarded on them
and recompiled once they were gone — and fx hands them Proxies. Forward time is what lies
between a phase's end (the batch arriving, the previous step) and the backward; in a step with
no backward, what follows its data. A loop that only calls a model on in-memory tensors has no
step to find: the report says so.

When a higher kind first appears (the optimizer shows up at the end of the first iteration) the
anchor is upgraded and the steps counted so far are dropped: they were warm-up anyway.

Two modes. *Timing* (the first steps, through the profiler window): every hook is on and each
step's data/forward/backward/optimizer time is measured. *Lean* (``lean()``,
after the window): only the hook that ends a step stays, so a long cell pays almost nothing; the
loader's wait and the optimizer step keep two clock reads each, the run-wide figures that the
profiled window's many small ops would inflate (``lean_data``, ``lean_optimizer``).

Hooks fire only for the thread that runs the cell (or the one thread the cell starts to train
on); optimizer steps of other threads are counted by thread, and those of children the cell
forks or spawns are counted by pid in memory shared with them (children.py). While the profiler window records, the
hooks also write named ranges into the trace (markers.py) so the analysis can split steps into
phases.

Invisible to the user's code: nothing is registered on the user's modules, optimizers or
loaders (only torch's global optimizer hook registry, emptied at ``uninstall``); every hook
returns at once while dynamo compiles, fx traces or the JIT traces. A patched attribute (``torch.autograd.backward``, the DataLoader iterator's ``__next__``) is
restored only if it is still ours; when the cell has replaced it, the cell's wins and ours
turns into a plain pass-through.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable
from time import process_time_ns as _process_time_ns
from time import thread_time_ns as _thread_time_ns
from typing import Any

try:
    import resource
except ImportError:  # Windows: no rusage, no fault counts
    resource = None  # type: ignore[assignment]

from gpu_notebook import markers
from gpu_notebook.capture import children
from gpu_notebook.capture.batch_highs import BatchHighs
from gpu_notebook.capture.fds import open_high
from gpu_notebook.capture.padding import PaddingReader
from gpu_notebook.capture.readahead import ReadAhead, corrected_rows
from gpu_notebook.capture.streams import unsplit_stream
from gpu_notebook.capture.threads import thread_idents, users_thread_left_running
from gpu_notebook.capture.unseen import invisible_to_compilers as _invisible_to_compilers
from gpu_notebook.capture.unseen import skip_in_dynamo
from gpu_notebook.capture.unseen import tracing_probe as _tracing_probe
from gpu_notebook.capture.unseen import visible_again as _visible_again
from gpu_notebook.records import (
    ChildProcessSteps,
    StepAnchor,
    StepClockRecord,
    StepCpu,
    StepMemory,
    StepTiming,
)

_PRIORITY: dict[str, int] = {
    "none": 0,
    "backward": 1,
    "forward": 2,
    "dataloader": 3,
    "optimizer": 4,
}
_LOADER_PRIORITY = _PRIORITY["dataloader"]
# Frames looked through for an optimizer step above a backward when no hook tells (a Lightning
# closure's backward is ~30 frames under its step).
_STEP_FRAME_DEPTH = 64

COMPILED_NOTE = (
    "torch.compile ran in this cell: optimizer steps are not hooked from then on (Dynamo could "
    "guard on the hook and recompile after the cell); steps are counted at the DataLoader or at "
    "backward"
)
GUARDED_NOTE = (
    "a frame compiled earlier by torch.compile guards on torch's optimizer hooks: optimizer "
    "steps are not hooked (Dynamo would recompile it); steps are counted at the DataLoader or "
    "at backward"
)

# Called at each step boundary with the index of the step that starts there.
BoundaryListener = Callable[[int], None]

# One kept step: (index, start_ns, end_ns, data_ns, forward_ns, backward_ns, optimizer_ns,
# forward_calls, backward_calls, batch_size, timed, ours_ns, wait_ns, cpu_ns, blocked_ns,
# unqueued_ns, contention_ns (these five -1 when not read), closure_calls, loader_reads).
# Tuples, not records: this runs every step.
_Row = tuple[int, int, int, int, int, int, int, int, int, "int | None", bool,
             int, int, int, int, int, int, int, int]  # fmt: skip

# The loop thread's scheduler counters (Linux): on-CPU ns, run-queue wait ns, time slices.
_SCHEDSTAT = "/proc/thread-self/schedstat"


class StepClock:
    """Global hooks that turn a cell's torch activity into steps; ``install``/``uninstall``.

    ``capacity`` bounds the kept per-step rows: when full, every other one is dropped and
    ``decimation`` doubles, so a 50,000-step cell costs the same memory as a 5,000-step one.
    """

    def __init__(self, t0_ns: int, capacity: int = 4096, thread_id: int | None = None) -> None:
        self._t0_ns = t0_ns
        self._capacity = capacity
        self._tid = threading.get_ident() if thread_id is None else thread_id
        self._handles: dict[str, Any] = {}
        self._patches: dict[str, tuple[Any, str, Any, Any]] = {}
        self._inert: set[str] = set()  # patches undone: their wrappers only pass through
        self._installed = False
        self._optimizer_hooks_allowed = True  # False once Dynamo compiles (see _on_compile_start)
        self._dynamo_watch: Any = None
        self._compile_callbacks: Any = None
        # Our optimizer hooks taken out while Dynamo compiles (_on_compile_start), and whether
        # a compile has ended since: at the next event of ours they come back unless a compiled
        # frame guards on torch's hook dicts (_after_compile).
        self._hooks_out: tuple[str, ...] = ()
        self._compiled_since = False
        # Without optimizer hooks: the frame of the optimizer step (torch's step wrapper) the
        # last backward ran in, held so that no later frame can reuse its identity, and the
        # file of that wrapper (see _same_step_again).
        self._step_frame: Any = None
        self._optim_file = ""
        self.notes: list[str] = []  # said in the report
        # Steps on other threads: followed when the cell's own thread has none (see
        # _adopt_before_step), counted by thread otherwise.
        self.follow_threads = True
        self._tid_followed: int | None = None
        self._followed_outlived = False  # the followed thread still ran when the clock came off
        self._threads_before: frozenset[int] = frozenset()  # alive at install
        self._cell_tid: int | None = None
        self._steps_elsewhere: dict[int, int] = {}
        # Steps in children the code forks or spawns (and in theirs): a table in memory shared
        # with them, made at the first fork or spawn, read and dropped at uninstall
        # (children.py). In a forked child the clock is inert: a ChildSteps counts there.
        self._in_child = False
        self._child_rows: list[children.ChildRow] = []
        self._table = children.ChildTable()
        self._thread_names: dict[int, str] = {}
        # Batch types whose size needs their own code (a subclass with its own dispatch): named
        # in a note at uninstall, never asked.
        self._unread: dict[str, None] = {}
        # The first training batches' real tokens (capture/padding.py): a few reads, then none.
        self._padding = PaddingReader()
        self._batch_highs = BatchHighs()
        self._tracing: Callable[[], bool] = _never
        self._grad_enabled: Callable[[], bool] = _always  # torch.is_grad_enabled once installed
        # Autograd's anomaly detection, read as each timed backward starts (global state of
        # torch: a helper's ``with detect_anomaly()`` or an earlier cell's switch shows here).
        self._anomaly_enabled: Callable[[], bool] = _never  # torch.is_anomaly_enabled
        self._anomaly_on = 0
        self._anomaly_reads = 0
        self._anomaly_caller: str | None = None
        self._torch_dir = ""
        # Other process-wide modes read at the same backward calls (never set): deterministic
        # algorithms (and warn-only), cuDNN's deterministic flag, a float64 default dtype.
        self._modes: Callable[[], tuple[bool, bool, bool, bool]] = _no_modes
        self._mode_counts = [0, 0, 0, 0]
        # When the latest phase we saw ended: forward is the time from there to a backward (or
        # to the end of a step that has none), as no hook of ours sits on modules.
        self._last_mark_ns = 0
        self._lean = False
        # Lean steps still time their optimizer step (pre and post hook kept): False when they
        # do not, or when a step ran a closure (its forward/backward are no longer timed apart).
        self._lean_optimizer = False
        # The DataLoader's __next__ was still ours when the clock came off (read at
        # ``uninstall``, which unpatches it before ``record``): lean steps carry their data wait.
        self._lean_data = False
        # A closure's calls (``_wrap_closure``): their time less the phases timed inside them,
        # and their CPU time, summed over the cell (an open step keeps where they stood as it
        # began); while one runs, a nested call is part of it.
        self._closure_rest_ns = 0
        self._closure_cpu_ns = 0
        self._closure_calls = 0
        # Where the closure calls and the loader reads stood as the open step began: each step
        # keeps its own counts, lean or timed (``StepTiming.closure_calls``/``loader_reads``).
        self._closures_mark = 0
        self._reads_mark = 0
        self._cpu_step = True  # the thread's CPU clock is read on this step (_on_opt_pre)
        self._opt_closure_mark = 0
        self._in_closure = False
        self.boundary_listener: BoundaryListener | None = None
        # The listener is called at boundaries from this step index on: it says when it next
        # has work (a re-timing look, a window due), so the steps between cost no call.
        self.listener_due = 0
        # Called when a higher-priority anchor replaces the current one (steps restart at 0).
        self.anchor_listener: Callable[[str], None] | None = None
        self.superseded_trained = False  # read by the anchor listener (see _upgrade)
        # While True, forward/backward write ranges into the profiler trace.
        self.annotate = False
        self._record_function: Any = None

        self.anchor: StepAnchor = "none"
        self._rows: list[_Row] = []
        self._decimation = 1
        self._step_count = 0  # complete steps under the current anchor
        self._last_end_ns = 0  # the latest step's end (kept even where its row is thinned out)
        self._counts = {"optimizer": 0, "dataloader": 0, "forward": 0, "backward": 0}
        # Several optimizer steps an iteration (a GAN's D and G, a critic's D n times then G,
        # Lightning's manual optimization): the step is the period of the loop's pattern of
        # optimizer steps (``_closes_cycle``). Each optimizer step is a symbol (the optimizer's
        # id, whether a training batch was read since the last optimizer step); the cycle is the
        # shortest period of the symbols seen since learning began (the first _CYCLE_LEARN of
        # them), and a step ends once a period (``_cycle_ends``: in a loop that reads, at an
        # optimizer step a read follows; a critic reading a batch of its own each D step is one
        # step a G step).
        self._cycle: list[tuple[int, bool]] = []
        self._cycle_closes: list[bool] = []  # whether each position of the cycle ends a step
        self._cycle_pos = 0
        # A cycle that reads ends a step a batch until, at this many symbols, it has been seen
        # three times (_CYCLE_CONFIRM) and ends one a period (_relearn). 0: nothing to confirm.
        self._confirm_at = 0
        # The symbols since learning began, whether each ended a step, and the samples its step
        # held so far as it came: the steps already ended are regrouped (``_regroup``) when a
        # longer cycle shows they were parts of one (d, d, d, g: the first three each ended one).
        self._hist: list[tuple[int, bool]] = []
        self._hist_closed: list[bool] = []
        self._hist_samples: list[int | None] = []
        self._learn_step = 0  # the step the first symbol of _hist fell in
        self._train_reads = 0  # loader reads with autograd on once the loop trains
        self._reads_at_post = 0  # ... at the latest optimizer step
        # Called when steps already ended were joined into one (their boundaries taken back).
        self.regroup_listener: Callable[[], None] | None = None

        # Accumulators of the open step (ns).
        self._cur_start_ns: int | None = None
        self._data_ns = 0
        # The loader's calls read apart in the open step (the steps the thread's CPU clock is
        # read on, ``_CPU_ALL_STEPS``/``_CPU_EVERY``): their time blocked off a core (neither
        # the loop thread's CPU nor its wait for a core), the part no worker's queue explains,
        # and the part of that while other threads ran (``_wrap_next``): -1, none read.
        self._data_blocked_ns = -1
        self._data_unqueued_ns = -1
        self._data_contention_ns = -1
        self._fwd_ns = 0
        self._bwd_ns = 0
        self._opt_ns = 0
        self._fwd_calls = 0
        self._bwd_calls = 0
        # Inside a backward of ours: a backward called from within it (a reentrant
        # checkpoint's CheckpointFunctionBackward runs one per block, on this thread on a CPU)
        # is part of that step's backward, never a step of its own.
        self._in_backward = False
        # DataLoader reads in the open step, and in a step that trained (the dataloader anchor).
        self._reads_in_step = 0
        # The iterator the latest anchoring read came from, and the one that opened the step
        # (0: none, or it ended there): before any backward, a read of another iterator while
        # the step only read joins it (``zip(loader_a, loader_b)``, see _read_joins_step).
        self._read_key = 0
        self._step_iter = 0
        self._reads_per_step = 1
        self._batch_size: int | None = None
        # Our own work inside the open step (the boundary listener: a profiler starting or
        # stopping, a later window): the analysis leaves such steps out or corrects them.
        self._ours_ns = 0
        self._listener_ns = 0  # the latest boundary listener's time (0: fast path)
        # Each step's own wait for a core and its time on a core, from the loop thread's
        # schedstat read at every step end (one pread of a kept descriptor: ~1 us alone, but
        # ~9 us a step inside a training loop on the 2-core VM, benchmarks/README.md): a step
        # the machine preempted is known as such.
        # ``read_waits`` False (the session turns it off for steps too short to pay for it),
        # or no schedstat here: the steps carry no wait (-1), the rules fall back to the
        # sampler's readings.
        self.read_waits = True
        # ... and where it is off (tiny steps), read around slow steps only (their wait alone).
        self.read_stalls = True
        self._sched_mark_at = -(2**62)  # the step after which the last reading was taken
        self._sched_fd: int | None = None
        self._sched_mark: tuple[int, int] | None = None  # (cpu_ns, wait_ns) at the last step end

        self._opt_start_ns = 0
        self._opt_inner_ns = 0  # data + forward + backward already counted when the step began
        self._samples: int | None = None  # samples seen in the open step (all micro-batches)
        # The latest run of reads with no backward between them: its iterator, its length and
        # the samples of its last read (``_count_samples``). 0: none, or it ended (CPython gives
        # the next iterator made the ended one's ``id``: it is another iterator all the same).
        self._run_iter = 0
        self._run_reads = 0
        self._run_last = 0
        # Samples of a run's reads taken back (each read again with no backward between), and
        # the backward passes since the run's last read: a backward for each read prefetched
        # gives them back (``_count_samples``).
        self._run_dropped: list[int] = []
        # The samples of the read before the latest run and its iterator (0: none, or ended),
        # and those a loader that ended before the open step's first backward read ahead for
        # it (``_loader_ended``): the step's first backward adds them, unless a read comes first.
        self._run_before = 0
        self._run_before_iter = 0
        # Whether the open step held samples of another read when the latest run began, and
        # the samples of a run that ended with no backward since its reads and none before it
        # in the step: the next read takes them back, unless a backward comes first (each a
        # read the backward passes did not train on: _loader_ended).
        self._run_joined = False
        self._ended_last = 0
        self._ahead = 0
        self._run_backs = 0
        # Steps credited the batch they consumed where a wrapper reads the loader one ahead
        # (readahead.py): HF Trainer's 32 + 16 an epoch read "batch 16" for every step.
        self._read_ahead = ReadAhead()
        self._grad_bytes: int | None = None
        self._double_bytes = 0  # ... of them float64
        self._grad_tensors: int | None = None
        # (tensors, bytes) the first optimizer of each class to step updates, by class name.
        self._class_tensors: dict[str, tuple[int, int]] = {}
        # Each optimizer class's own step time on the loop thread's CPU clock, outside the
        # profiled windows, by class name: [cpu ns, steps]. The step clock's optimizer time is
        # every optimizer's step together; where a loop steps several (SparseAdam beside Adam),
        # a fused bound rests on its class's part, and a trace's 3 steps split that part by
        # where the machine's time slices fell and by the profiler's cost on the unfused
        # update's many small ops (issue 26: Adam's part read 11%-30% by the trace, 5% here).
        # Thread CPU time: a slice lost to another process counts for no class. Open steps
        # (id, class, CPU at the start, CPU of nested steps): a wrapper's step holds its
        # inner optimizer's, which is the inner one's.
        self._class_cpu: dict[str, list[int]] = {}
        self._open_opt_cpu: list[list[Any]] = []
        # Minor page faults of the loop thread over every timed training step (one every
        # ``_FAULTS_EVERY`` where lean or ``read_waits`` is off: steps under 1 ms) (issue 26: an unfused CPU update's full-size temporaries get fresh pages from the
        # allocator each step, and the heap they leave is trimmed, so the next backward's
        # gradients fault again; a fused kernel makes no such temporaries: save_every_step's
        # Adam faulted ~1,100 pages a step, ~3 ms of its 5 ms step, fused none). By class
        # [faults inside its steps, steps read]; the sampled training steps' faults outside
        # every update [faults, steps]; ``_fault_mark``: the faults when a sampled step began
        # (None: not sampling this step).
        self._class_faults: dict[str, list[int]] = {}
        self._rest_faults = [0, 0]
        self._fault_mark: int | None = None
        self._fault_in_updates = 0
        self._fault_cost: float | None = None
        # Faults are read up to the end of the first profiler window only, its profiled
        # steps' updates included (``_faults_off_step``: where it stopped). The window records
        # into buffers on the loop thread's heap, and what the program allocates meanwhile
        # sits above them: once freed, they leave the heap in a state the program alone does
        # not reach, where the update's temporaries may reuse mapped pages and stop faulting
        # for the rest of the run (zip_two_loaders, captured: 0 a step after the window in 3
        # of 18 runs; its loop with a window like ours, plain: mostly 0 after it in 6 of 12
        # runs, 5 of 12 with the window's results dropped at once, 0 of 12 without a window;
        # benchmarks/README, faultsmisc). The steps after it are not comparable.
        self._faults_off_step: int | None = None

        # Memory at the end of every Nth step (0: off): the process RSS, one pread of
        # /proc/self/statm (~2 us). At most ``memory_readings`` are kept: when full, every
        # other one goes and N doubles, so a cell read every step at first pays ~2 us a step
        # for its first ``memory_readings`` steps, then half as often for as many more, ...
        self.memory_every_steps = 0
        self.memory_readings = capacity
        self._statm_fd: int | None = None
        self._page_bytes = 4096
        # The DataLoader iterator the loop reads and the batches each loader setting gave
        # (num_workers, pin_memory, an unsplit stream, tensors in its first batch) -> batches;
        # the most-read one is the loop's loader.
        self._iterator_id = 0
        self._iterator_key: tuple[Any, Any, bool, Any] = (None, None, False, None)
        self._iterator_batches = 0
        self._loader_batches: dict[tuple[Any, Any, bool, Any], int] = {}
        # The steps whose first batch came from an iterator's first __next__ (a loader's start:
        # a new loader forks its workers there), at most _STARTS_KEPT of them.
        self._starts: list[int] = []
        self._mem_rows: list[tuple[int, int]] = []  # (step index, rss bytes), bounded as _rows
        # (step index, end ns, process CPU ns) at steps 0-4, then each a quarter further on.
        self._cpu_rows: list[tuple[int, int, int]] = []
        self._cpu_next = 0

    # ---------------------------------------------------------------- install / uninstall

    def install(self) -> None:
        """Register the global hooks and patches; ``uninstall`` removes every one of them."""
        import torch
        import torch.optim.optimizer as optim_mod
        from torch.utils.data import dataloader as dl_mod

        if self._installed:
            return
        self._threads_before = thread_idents()
        self._record_function = torch.autograd.profiler.record_function
        self._grad_enabled = torch.is_grad_enabled
        self._anomaly_enabled = torch.is_anomaly_enabled
        self._modes = _modes_probe(torch)
        self._torch_dir = os.path.dirname(torch.__file__) + os.sep
        self._tracing = _tracing_probe(torch)
        self._optim_file = optim_mod.__file__ or ""
        # their code: one constant each
        for make in (self._wrap_next, self._wrap_backward, self._wrap_closure):
            skip_in_dynamo(make(_never).__code__, callees=False)
        _skip_our_code_in_dynamo()
        _watch_forks(self)
        try:
            self._table.install()
            h = self._handles
            if _compiled_frames_guard_optimizer_hooks():
                self._no_optimizer_hooks(GUARDED_NOTE)
            else:
                h["opt_pre"] = _global_optimizer_hook(optim_mod, "pre", self._on_opt_pre)
                h["opt_post"] = _global_optimizer_hook(optim_mod, "post", self._on_opt_post)
                from gpu_notebook.capture.imports import ImportWatch

                # Our own profiler's start imports dynamo too: the callback then waits unused.
                self._dynamo_watch = ImportWatch(["torch._dynamo"], self._watch_compiles).start()
            self._patch("dataloader", dl_mod._BaseDataLoaderIter, "__next__", self._wrap_next)
            self._patch("backward", torch.autograd, "backward", self._wrap_backward)
            # A backward pass that returns the gradients (a manual update, torch.func.grad,
            # which calls it, under vmap too): counted as loss.backward() is.
            self._patch("grad", torch.autograd, "grad", self._wrap_grad)
        except BaseException:
            self.uninstall()
            raise
        self._installed = True

    def uninstall(self) -> None:
        """Remove every hook and restore every patched attribute that is still ours (idempotent)."""
        for handle in self._handles.values():
            handle.remove()
        self._handles.clear()
        if self._dynamo_watch is not None:
            self._dynamo_watch.close()
            self._dynamo_watch = None
        callbacks, self._compile_callbacks = self._compile_callbacks, None
        if callbacks is not None:
            with contextlib.suppress(ValueError):
                callbacks.remove_start_callback(self._on_compile_start)
            with contextlib.suppress(ValueError):
                callbacks.remove_end_callback(self._on_compile_end)
        self._hooks_out = ()
        self._compiled_since = False
        self._step_frame = None
        if self._installed:
            self._lean_data = "dataloader" in self._patches
        for key in reversed(list(self._patches)):
            self._unpatch(key)
        self._installed = False
        followed = self._tid_followed
        before, self._threads_before = self._threads_before, frozenset()
        if followed is None and before and self._adopts_at_end():
            # The cell started its training on a thread and returned before that thread's
            # first optimizer step (a loaded machine, a slow first batch): the note says that
            # thread ran on past the cell, with none of its steps measured.
            followed = users_thread_left_running(before)
            if followed is not None:
                self._tid_followed = followed
                self._name_thread(followed)
        if followed is not None:
            thread = threading._active.get(followed)  # type: ignore[attr-defined]
            self._followed_outlived = thread is not None and thread.is_alive()
        self.close_memory()
        self._forget_sched()
        for kind in self._unread:
            note = (
                f"not read: {kind}, its size needs its own code (the loader's batches: samples "
                "a step not counted)"
            )
            if note not in self.notes:
                self.notes.append(note)
        rows = self._table.uninstall()
        if not self._in_child:
            self._child_rows.extend(rows)

    # ---------------------------------------------------------------- steps on other threads

    def _adopt_before_step(self) -> bool:
        """An optimizer step starts on another thread: follow that thread if the cell's own
        has no step (the cell starts a thread that trains and joins it). True: follow it now."""
        if not self.follow_threads or self._step_count or self.anchor != "none":
            return False
        ident = threading.get_ident()
        if self._tid_followed is not None or ident == self._tid:
            return ident == self._tid
        self._cell_tid, self._tid, self._tid_followed = self._tid, ident, ident
        self._name_thread(ident)
        self._forget_sched()
        self._last_mark_ns = 0
        self._cur_start_ns = None
        self._data_ns = self._fwd_ns = self._bwd_ns = self._opt_ns = 0
        self._fwd_calls = self._bwd_calls = 0
        self._samples = None
        self._opt_start_ns = 0
        return True

    def _adopts_at_end(self) -> bool:
        """No step on any thread: a thread the cell left running may be where it trains."""
        return (
            self.follow_threads
            and not self._step_count
            and self.anchor == "none"
            and not self._steps_elsewhere
        )

    def _elsewhere(self) -> bool:
        """An optimizer step ended on a thread we do not follow: counted by thread. Returns
        True when that thread has just been adopted (see ``_adopt_before_step``)."""
        ident = threading.get_ident()
        if self._adopt_before_step():
            return True
        counts = self._steps_elsewhere
        counts[ident] = counts.get(ident, 0) + 1
        if ident not in self._thread_names:
            self._name_thread(ident)
        return False

    def _name_thread(self, ident: int) -> None:
        thread = threading._active.get(ident)  # type: ignore[attr-defined]  # never makes a dummy
        self._thread_names[ident] = thread.name if thread is not None else f"thread {ident}"

    @property
    def followed_ident(self) -> int | None:
        """The thread the cell started whose steps the clock follows (None: the cell's own)."""
        return self._tid_followed

    @property
    def followed_thread(self) -> bool:
        """Whether the steps are those of a thread the cell started (not the cell's own)."""
        return self._tid_followed is not None

    # ---------------------------------------------------------------- steps in child processes

    def child_steps(self) -> list[tuple[int, int, float, str]]:
        """(pid, optimizer steps, seconds from its first step to its last, "forked" or
        "spawned") of each child process that stepped, read at ``uninstall``."""
        return [(r.pid, r.steps, r.span_ns / 1e9, r.started) for r in self._child_rows]

    def children(self) -> tuple[ChildProcessSteps, ...]:
        """Each process below this one that stepped, with its phases (read at ``uninstall``)."""
        return tuple(
            ChildProcessSteps(
                pid=r.pid,
                parent_pid=r.parent_pid,
                started="spawned" if r.started == "spawned" else "forked",
                steps=r.steps,
                span_s=r.span_ns / 1e9,
                data_s=r.data_ns / 1e9,
                backward_s=r.backward_ns / 1e9,
                optimizer_s=r.optimizer_ns / 1e9,
            )
            for r in self._child_rows
        )

    def child_notes(self) -> list[str]:
        """One line per way children were started (fork, spawn) on the optimizer steps they ran
        and where each one's step time went, when any stepped."""
        notes = []
        rows = self.children()
        here = os.getpid()
        for how, started in (("forked", "forked"), ("spawned", "started by spawn or forkserver")):
            mine = [r for r in rows if r.started == how]
            if not mine:
                continue
            total = sum(r.steps for r in mine)
            each = [_child_words(r, here) for r in mine[:_CHILDREN_NAMED]]
            more = (
                f", and {len(mine) - _CHILDREN_NAMED} more" if len(mine) > _CHILDREN_NAMED else ""
            )
            notes.append(
                f"{total} optimizer step(s) ran in {len(mine)} child process(es) the cell "
                f"{started} ({'; '.join(each)}{more}): counted and timed there (the DataLoader wait, "
                "backward and optimizer step of each; forward and the rest is what is left), "
                "not profiled"
            )
        return notes

    def thread_notes(self) -> list[str]:
        """Where the optimizer steps ran, when not (only) on the cell's thread."""
        notes = []
        if self._tid_followed is not None:
            name = self._thread_names.get(self._tid_followed, f"thread {self._tid_followed}")
            notes.append(
                f"the training steps ran on thread '{name}', started by the cell: the step clock "
                f"followed that thread ({self._counts['optimizer']} optimizer steps)"
                + (
                    # The cell returned without joining it: the rest of its run is unmeasured.
                    "; it was still running when the cell ended: only those steps are measured "
                    "(join it in the cell, e.g. `thread.join()`, to measure its whole run)"
                    if self._followed_outlived
                    else ""
                )
            )
        for ident, n in sorted(self._steps_elsewhere.items(), key=lambda kv: -kv[1]):
            notes.append(
                f"{n} optimizer step(s) ran on thread '{self._thread_names[ident]}', "
                "not measured (the step clock follows one thread)"
            )
        return notes

    # ---------------------------------------------------------------- torch.compile

    def _watch_compiles(self, _name: str) -> None:
        """torch._dynamo is loaded: be told before it compiles anything in this cell."""
        import sys

        callback = getattr(sys.modules.get("torch._dynamo.callback"), "callback_handler", None)
        if callback is None or "opt_pre" not in self._handles:
            return
        callback.register_start_callback(self._on_compile_start)
        callback.register_end_callback(self._on_compile_end)
        self._compile_callbacks = callback

    def _on_compile_start(self, *_args: Any) -> None:
        """Dynamo starts compiling: our optimizer hooks leave torch's dicts before it traces.

        A compiled ``opt.step`` (or a training step that calls it) reads the global optimizer
        hook dicts and guards on what they hold: with ours in them it would compile against
        them, then recompile in every later cell, measured or not. Whether the frame being
        compiled reads them is known only once its guards exist (``_after_compile``): until
        then the hooks are out and the steps' anchor stays as it is.
        """
        if not self._optimizer_hooks_allowed:
            return
        out = tuple(name for name in ("opt_pre", "opt_post") if name in self._handles)
        for name in out:
            self._handles.pop(name).remove()
        self._hooks_out = tuple(dict.fromkeys((*self._hooks_out, *out)))
        self._compiled_since = False

    def _on_compile_end(self, *_args: Any) -> None:
        # The compiled frame's guards are installed after this callback, before its code runs:
        # read at our next event (a backward, a closure's call, a batch).
        self._compiled_since = bool(self._hooks_out)

    def _after_compile(self) -> None:
        """The first event of ours after a compile: the optimizer hooks come back where no
        compiled frame guards on torch's hook dicts (a compiled model, loss or closure: an
        LBFGS closure's calls stay inside one optimizer step, as without compile); where one
        does (a compiled ``opt.step``), steps are found at the DataLoader or at backward, as in
        a loop without an optimizer."""
        import torch.optim.optimizer as optim_mod

        self._compiled_since = False
        out, self._hooks_out = self._hooks_out, ()
        if _compiled_frames_guard_optimizer_hooks():
            self._no_optimizer_hooks(COMPILED_NOTE)
            return
        hooks = {"opt_pre": self._on_opt_pre, "opt_post": self._on_opt_post}
        for name in out:
            if name not in self._handles:
                self._handles[name] = _global_optimizer_hook(optim_mod, name[4:], hooks[name])

    def _no_optimizer_hooks(self, note: str) -> None:
        self._optimizer_hooks_allowed = False
        self._lean_optimizer = False
        for name in ("opt_pre", "opt_post"):
            handle = self._handles.pop(name, None)
            if handle is not None:
                handle.remove()
        if note not in self.notes:
            self.notes.append(note)
        if self.anchor == "optimizer":
            # Steps restart at the next lower kind of event (their profiler window too).
            self.anchor = "none"
            self._upgrade("none")
        self._opt_start_ns = 0

    # ---------------------------------------------------------------- lean / timed

    @property
    def samples_per_step(self) -> int | None:
        """Samples the last recorded step's batches held (its micro-batches summed); None when
        no batch size was read."""
        return self._batch_size

    def lean(self) -> None:
        """Keep only the hook that ends a step and the loader's; phases are no longer timed.

        The DataLoader's ``__next__`` stays timed (two clock reads a batch): the data wait of
        every step is what tells a loop that turns input-bound after its window (a cache that
        runs out) from one that does not, so a whole-run split of data against the rest always
        exists (``StepClockRecord.lean_data``). So does the optimizer step when it ends the
        steps (two clock reads a step, ``lean_optimizer``): a fix's bound rests on the run's
        optimizer time, not on a window where the profiler inflates its many small ops.

        Safe to call from inside a hook: torch copies module hook dicts before iterating them,
        and the optimizer post hook (iterated lazily) is kept when it is the anchor.
        """
        if self._lean or not self._installed:
            return
        self._lean = True
        self.annotate = False
        keep_opt = self.anchor == "optimizer"
        if not keep_opt:
            # The post hook stays (one call an optimizer step, none without one): an optimizer
            # that comes after many steps counted at a lower anchor (an evaluation over a
            # DataLoader before training, issue 26) still takes the steps over.
            handle = self._handles.pop("opt_pre", None)
            if handle is not None:
                handle.remove()
            self._hooks_out = tuple(n for n in self._hooks_out if n != "opt_pre")
        self._lean_optimizer = keep_opt and (
            "opt_pre" in self._handles or "opt_pre" in self._hooks_out
        )
        for key in ("backward", "grad"):
            if self.anchor != "backward" and key in self._patches:
                self._unpatch(key)

    def retime(self) -> None:
        """Time every phase again after ``lean()`` (steps grew long enough to afford it)."""
        import torch
        import torch.optim.optimizer as optim_mod
        from torch.utils.data import dataloader as dl_mod

        if not self._lean or not self._installed:
            return
        if self._hooks_out:  # a compile's guards not read yet: they come back with the others
            self._hooks_out = tuple(dict.fromkeys((*self._hooks_out, "opt_pre", "opt_post")))
        elif self._optimizer_hooks_allowed:
            if "opt_pre" not in self._handles:
                self._handles["opt_pre"] = _global_optimizer_hook(
                    optim_mod, "pre", self._on_opt_pre
                )
            if "opt_post" not in self._handles:
                self._handles["opt_post"] = _global_optimizer_hook(
                    optim_mod, "post", self._on_opt_post
                )
        for key, owner, name, make in (
            ("dataloader", dl_mod._BaseDataLoaderIter, "__next__", self._wrap_next),
            ("backward", torch.autograd, "backward", self._wrap_backward),
            ("grad", torch.autograd, "grad", self._wrap_grad),
        ):
            current = owner.__dict__.get(name, getattr(owner, name, None))
            if key not in self._patches and not hasattr(current, "__wrapped__"):
                # Only over the original attribute: a wrapper the cell put there may hold our
                # old one, which would then count twice.
                self._inert.discard(key)
                self._patch(key, owner, name, make)
        self._last_mark_ns = 0  # no forward is inferred across the switch
        self._lean = False

    def _patch(self, key: str, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = (
            owner.__dict__[name] if name in getattr(owner, "__dict__", {}) else getattr(owner, name)
        )
        wrapper = make(original)
        _invisible_to_compilers(wrapper, original, key)
        setattr(owner, name, wrapper)
        self._patches[key] = (owner, name, original, wrapper)

    def _unpatch(self, key: str) -> None:
        owner, name, original, wrapper = self._patches.pop(key)
        _visible_again(wrapper, original)
        self._inert.add(key)  # a wrapper the cell still holds passes straight through from now on
        current = (
            owner.__dict__.get(name) if hasattr(owner, "__dict__") else getattr(owner, name, None)
        )
        if current is wrapper:
            setattr(owner, name, original)

    # ---------------------------------------------------------------- hooks

    def _on_opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        __tracebackhide__ = True  # torch calls it inside opt.step(): see _wrap_next
        if self._tracing():
            return None
        if threading.get_ident() != self._tid and not self._adopt_before_step():
            return None
        # A closure (LBFGS, Lightning's automatic optimization, any ``step(closure)``) runs
        # forward, backward and whatever hooks the framework calls around them inside step():
        # it is handed to the optimizer wrapped (``_wrap_closure``), so the step's own update
        # is what step() took outside the closure's calls. torch passes step()'s own args, the
        # optimizer first; most steps pass nothing else: no generator is made for them.
        wrapped = None
        if kwargs or len(args) > 1:
            # Inline, not a method: a Lightning step pays each call of ours (test_capture_cost).
            closure = kwargs.get("closure") if kwargs else None
            if callable(closure):
                if not getattr(closure, _CLOSURE_ATTR, False):  # not handed on, wrapped already
                    wrapped = args, {**kwargs, "closure": self._wrap_closure(closure)}
            else:
                for i, arg in enumerate(args):
                    if i and arg is not optimizer and callable(arg):
                        if not getattr(arg, _CLOSURE_ATTR, False):
                            wrapped = (*args[:i], self._wrap_closure(arg), *args[i + 1 :]), kwargs
                        break
        profiled = self.annotate
        if self._step_count > 0 and (not profiled or self._faults_off_step is None):
            # The first step is left out (the optimizer's state is made there). A profiled
            # step's update is read for its faults alone, and only in the first window (its
            # CPU time is the profiler's as much as the update's).
            if len(self._open_opt_cpu) > 8:  # steps whose post hook never came (they raised)
                self._open_opt_cpu.clear()
            read = self._fault_mark is not None or (profiled and _FAULTS_READ)
            # The thread's CPU clock on the first steps and then one in _CPU_EVERY (see
            # _CPU_ALL_STEPS): -1, not read; the closure's calls are read on the same steps.
            cpu = self._step_count < _CPU_ALL_STEPS or self._step_count % _CPU_EVERY == 0
            self._cpu_step = cpu
            self._open_opt_cpu.append([id(optimizer), type(optimizer).__name__,
                                       time.thread_time_ns() if cpu else -1, 0,
                                       self._closure_cpu_ns,
                                       _getrusage(_THREAD).ru_minflt if read else -1,
                                       0, profiled, self._closure_calls])  # fmt: skip
        else:
            self._cpu_step = False  # no update read: its closure's CPU is not either
        self._opt_closure_mark = self._closure_rest_ns
        if self._lean:
            # Only the step's own time: the loader's wait is the one phase lean steps still
            # time, and the closure's calls the wrapper's.
            self._opt_start_ns = time.perf_counter_ns()
            self._opt_inner_ns = self._data_ns + self._fwd_ns + self._bwd_ns
            return wrapped
        self._opt_start_ns = self._last_mark_ns = now = time.perf_counter_ns()
        self._opt_inner_ns = self._data_ns + self._fwd_ns + self._bwd_ns
        if self._cur_start_ns is None:
            self._cur_start_ns = now
        return wrapped

    def _wrap_closure(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """The closure, timed: each call's time less the data, forward and backward timed
        inside it (the framework's hooks around them: Lightning's ``on_before_optimizer_step``
        callbacks, a closure's logging) is neither those phases nor the update: it stays in the
        step's other time. LBFGS calls it several times a step: each call counts. While the
        profiler records, each call is a range (``markers.CLOSURE``) the trace's phases read."""
        clock = self

        def closure(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # the closure's errors read as without us (see __next__)
            if clock._in_closure or threading.get_ident() != clock._tid:
                return original(*args, **kwargs)
            if clock._compiled_since:
                clock._after_compile()
            start = time.perf_counter_ns()
            clock._closure_calls += 1
            cpu0 = time.thread_time_ns() if clock._cpu_step else -1
            inner0 = clock._data_ns + clock._fwd_ns + clock._bwd_ns
            if not clock._lean:
                # The forward runs from here: what step() did before this call (LBFGS's line
                # search between two calls) is the update's.
                clock._last_mark_ns = start
            rng = clock._open_range(markers.CLOSURE) if clock.annotate else None
            clock._in_closure = True
            try:
                return original(*args, **kwargs)
            finally:
                clock._in_closure = False
                if rng is not None:
                    clock._close_range(rng)
                end = time.perf_counter_ns()
                inner = clock._data_ns + clock._fwd_ns + clock._bwd_ns - inner0
                clock._closure_rest_ns += max(0, end - start - inner)
                if cpu0 >= 0:
                    clock._closure_cpu_ns += time.thread_time_ns() - cpu0
                if not clock._lean:
                    clock._last_mark_ns = end
                if clock._compiled_since:  # the closure compiled (its model, itself)
                    clock._after_compile()

        setattr(closure, _CLOSURE_ATTR, True)
        closure.__wrapped__ = original  # type: ignore[attr-defined]
        return closure

    def _on_opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        __tracebackhide__ = True  # torch calls it inside opt.step(): see _wrap_next
        if self._tracing():
            return
        if threading.get_ident() != self._tid:
            if self._in_child:
                return  # a forked child: its ChildSteps counts
            if not self._elsewhere():
                return
        now = time.perf_counter_ns()
        if self._open_opt_cpu and self._open_opt_cpu[-1][0] == id(optimizer):
            _, cls_name, cpu0, nested, closure0, faults0, nested_faults, profiled, calls0 = (
                self._open_opt_cpu.pop()
            )
            # Less its closure's calls: they are the model's and the framework's, not the class's.
            spent = (
                max(0, time.thread_time_ns() - cpu0 - (self._closure_cpu_ns - closure0))
                if cpu0 >= 0
                else 0
            )
            if self._open_opt_cpu:
                self._open_opt_cpu[-1][3] += spent
            if not profiled and cpu0 >= 0:
                entry = self._class_cpu.setdefault(cls_name, [0, 0])
                entry[0] += max(0, spent - nested)
                entry[1] += 1
            if faults0 >= 0:
                faulted = _getrusage(_THREAD).ru_minflt - faults0
                if self._closure_calls != calls0:
                    self._fault_mark = None  # a closure's forward and backward faulted inside
                else:
                    if self._open_opt_cpu:
                        self._open_opt_cpu[-1][6] += faulted
                    else:
                        self._fault_in_updates += faulted
                    own = self._class_faults.setdefault(cls_name, [0, 0])
                    own[0] += max(0, faulted - nested_faults)
                    own[1] += 1
        if self._opt_start_ns:
            # Less the phases timed inside step() and the rest of its closure's calls.
            inner = self._data_ns + self._fwd_ns + self._bwd_ns - self._opt_inner_ns
            rest = self._closure_rest_ns - self._opt_closure_mark
            self._opt_ns += max(0, now - self._opt_start_ns - inner - rest)
            self._opt_start_ns = 0
        self._last_mark_ns = now
        self._counts["optimizer"] += 1
        if self._grad_bytes is None:
            self._grad_bytes, self._grad_tensors, self._double_bytes = _trainable_bytes(
                p for g in optimizer.param_groups for p in g["params"]
            )
        # Several optimizers (SparseAdam beside Adam): the fused bound of one class needs its
        # own tensors, not the first optimizer's (one dict lookup a step after the first).
        cls = type(optimizer).__name__
        if cls not in self._class_tensors:
            size, tensors, _ = _trainable_bytes(
                p for g in optimizer.param_groups for p in g["params"]
            )
            self._class_tensors[cls] = (tensors, size)
        if not self._closes_cycle(id(optimizer)):
            return  # another optimizer of the same iteration ends it: this one's time stays in
        if _FAULTS_READ and self._faults_off_step is None:
            if self.annotate:  # a profiled step: neither timed nor read
                self._fault_mark = None
            else:
                # Every step where steps are long enough to read their wait (``read_waits``:
                # 1 ms or more): an update's faults come in streaks of 5-40 steps of 0 and of
                # 300-700 pages, unprofiled too (zip_two_loaders at load 25), and one step in
                # eight (11 of a 96-step run) read a streak: AdamW 0 a step in the ledger's run.
                # Timed steps only: a lean step keeps its few calls (test_capture_cost).
                every = self.read_waits and not self._lean
                if every or self._fault_mark is not None or self._step_count % _FAULTS_EVERY == 0:
                    self._sample_faults(reopen=every or self._fault_mark is None)
        self._event("optimizer", now, ends_step=True)

    def window_starts(self) -> None:
        """A profiler window begins (the first or a later one, lean or not): a sampled step
        open across its start is not read (the window's start and its steps are ours)."""
        self._fault_mark = None
        self._fault_in_updates = 0

    def window_stopped(self) -> None:
        """A profiler window stopped (its buffers freed, its results kept): the steps after
        it are not read for faults (their heap is ours as much as the program's)."""
        if self._faults_off_step is None:
            self._faults_off_step = self._step_count
        self._fault_mark = None
        self._fault_in_updates = 0

    def _fault_cost_s(self) -> float | None:
        """One page fault's CPU time here, measured once (~1 ms), where an update faulted."""
        if self._fault_cost is None and any(f for f, _ in self._class_faults.values()):
            self._fault_cost = fault_cost_s()
        return self._fault_cost

    def _sample_faults(self, *, reopen: bool) -> None:
        """At the end of a training step: close a sampled step (its faults outside the updates)
        and, ``reopen``, open the next one as sampled."""
        faults = _getrusage(_THREAD).ru_minflt
        if self._fault_mark is not None:
            self._rest_faults[0] += max(0, faults - self._fault_mark - self._fault_in_updates)
            self._rest_faults[1] += 1
        self._fault_mark = faults if reopen and self._step_count > 0 else None
        self._fault_in_updates = 0

    def _closes_cycle(self, key: int) -> bool:
        """Whether this optimizer step ends the training step: the learnt cycle says, at the
        position it expects next (one optimizer: every step). A symbol the cycle does not
        expect is learnt (``_relearn``). Inline: this runs every step (test_capture_cost)."""
        reads = self._train_reads
        symbol = (key, reads != self._reads_at_post)
        self._reads_at_post = reads
        cycle = self._cycle
        pos = self._cycle_pos
        if cycle and cycle[pos] == symbol:
            self._cycle_pos = 0 if pos + 1 == len(cycle) else pos + 1
            closes = self._cycle_closes[pos]
            if len(self._hist) < _CYCLE_LEARN:
                if len(self._hist) + 1 == self._confirm_at:
                    return self._relearn(symbol)  # seen enough: one step a period from here
                self._hist.append(symbol)
                self._hist_closed.append(closes)
                self._hist_samples.append(self._samples)
            return closes
        return self._relearn(symbol)

    def _relearn(self, symbol: tuple[int, bool]) -> bool:
        """An optimizer step the cycle did not expect: the cycle becomes the shortest period of
        the symbols since learning began, and the steps already ended since then are regrouped
        to it where it joins them (d, d, d, g with no loader: the three d ended a step each as
        a one-optimizer loop would; at g they are one step with it). A loop that changes after
        its cycle was learnt learns anew from here. The first symbol's read is not compared
        (batches read before the loop, an evaluation's): its optimizer is."""
        hist, closed, samples = self._hist, self._hist_closed, self._hist_samples
        if self.anchor != "optimizer" or len(hist) >= _CYCLE_LEARN:
            hist.clear()
            closed.clear()
            samples.clear()
            self._learn_step = self._step_count if self.anchor == "optimizer" else 0
        hist.append(symbol)
        n = len(hist)
        period = n
        for p in range(1, n):
            for i in range(p, n):
                if hist[i][0] != hist[i - p][0] or (i != p and hist[i][1] != hist[i - p][1]):
                    break
            else:
                period = p
                break
        cycle = hist[:period]
        if n > period:
            cycle[0] = (cycle[0][0], hist[period][1])
        # Where in the period the step ends: the first place whose boundaries the steps already
        # ended since learning began reach by joins alone (a boundary made where the new cycle
        # has none can be taken back; one missing cannot be made afterwards), else the first.
        # A critic's G every 5th batch (``if i % 5 == 0``) ended a step at its first G, when
        # the loop looked like D, G alternating: its steps end at G from then on (main joined
        # 10 D steps into one of them, and counted one a batch after it).
        # A loop that reads, until its cycle was seen three times: one step a batch (a cycle seen
        # once may be a loop with no period, a GAN whose D steps only when its loss says so:
        # joined a period, its steps were up to 16 batches long, then split at random).
        reads = [r for _, r in cycle]
        self._confirm_at = 0
        if any(reads) and n < max(3 * period, _CYCLE_CONFIRM):
            ends = [reads[(i + 1) % period] for i in range(period)]
            self._confirm_at = max(3 * period, _CYCLE_CONFIRM)
        else:
            places = _cycle_ends(reads)
            for end in places:
                if all(was or i % period != end for i, was in enumerate(closed)):
                    break
            else:
                end = places[0]
            ends = [i == end for i in range(period)]
        self._cycle, self._cycle_closes = cycle, ends
        self._cycle_pos = n % period
        keep = [ends[i % period] for i in range(n - 1)]
        # Only joins: a boundary the new cycle has where none was made stays missing.
        if (
            keep != closed
            and all(was or not now for was, now in zip(closed, keep, strict=False))
            and self._regroup([now for was, now in zip(closed, keep, strict=False) if was])
        ):
            closed[:] = keep
        closes = ends[(n - 1) % period]
        closed.append(closes)
        samples.append(self._samples)
        return closes

    def _regroup(self, keep: list[bool]) -> bool:
        """Join the steps ended since learning began (one a ``keep`` entry: whether it still
        ends a step) into the steps of the new cycle; those after the last kept join the open
        step. False where their rows are not all here (thinned out, an anchor changed)."""
        m = len(keep)
        first = self._step_count - m
        rows = self._rows
        if (
            m == 0
            or first != self._learn_step
            or self._decimation != 1
            or len(rows) < m
            or rows[-m][0] != first
            or len(self._hist_samples) != len(self._hist_closed)
        ):
            return False
        # The samples each ended step held (its row may carry an earlier step's batch size).
        held = [n for n, c in zip(self._hist_samples, self._hist_closed, strict=False) if c]
        tail = rows[-m:]
        del rows[-m:]
        group: _Row | None = None
        samples: int | None = None
        made = 0
        for row, kept, n in zip(tail, keep, held, strict=False):
            if n is not None:
                samples = (samples or 0) + n
            if group is None:
                group = row
            else:
                group = (group[0], group[1], row[2],
                         group[3] + row[3], group[4] + row[4], group[5] + row[5],
                         group[6] + row[6], group[7] + row[7], group[8] + row[8],
                         group[9], group[10] and row[10], group[11] + row[11], -1, -1,
                         _read_sum(group[14], row[14]), _read_sum(group[15], row[15]),
                         _read_sum(group[16], row[16]), group[17] + row[17],
                         group[18] + row[18])  # fmt: skip
            if kept:
                size = group[9] if samples is None else samples
                rows.append((first + made, *group[1:9], size, *group[10:]))
                made += 1
                group, samples = None, None
        count = first + made
        self._step_count = count
        if group is not None:
            # Steps after the last one kept: the open step began where they did.
            self._cur_start_ns = group[1]
            self._data_ns += group[3]
            self._fwd_ns += group[4]
            self._bwd_ns += group[5]
            self._opt_ns += group[6]
            self._fwd_calls += group[7]
            self._bwd_calls += group[8]
            self._ours_ns += group[11]
            self._closures_mark -= group[17]
            self._reads_mark -= group[18]
            if samples is not None:
                self._samples = (self._samples or 0) + samples
        self._last_end_ns = rows[-1][2] if rows else 0
        self._cpu_rows = [r for r in self._cpu_rows if r[0] < count]
        self._mem_rows = [r for r in self._mem_rows if r[0] < count]
        self._starts = [i for i in self._starts if i <= count]
        self._cpu_next = min(self._cpu_next, count)
        self._sched_mark_at = -(2**62)  # the next step's wait is not read from a joined one
        if self.regroup_listener is not None:
            self.regroup_listener()
        return True

    def _wrap_next(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock = self

        def __next__(it: Any) -> Any:  # noqa: N807 - replaces the iterator method
            # A dataset's error passes through this frame: IPython's traceback (and pdb, and
            # pytest) leaves it out, so the user reads the error as without us (it showed this
            # file's source, unseen round 12's DataLoader worker error).
            __tracebackhide__ = True
            if "dataloader" in clock._inert or threading.get_ident() != clock._tid:
                return original(it)
            if clock._compiled_since:
                clock._after_compile()
            start = time.perf_counter_ns()
            clock._counts["dataloader"] += 1
            if clock._cur_start_ns is None or _PRIORITY[clock.anchor] <= _LOADER_PRIORITY:
                # A batch under a higher anchor with its step open changes nothing there (the
                # common case, an optimizer loop): the call is skipped, not made to return.
                clock._read_key = id(it)
                clock._event("dataloader", start, ends_step=False)
            if getattr(it, "_num_yielded", None) == 0 and len(clock._starts) < _STARTS_KEPT:
                # The iterator's first batch (torch counts them; ``iter()`` of a persistent
                # loader resets it): the step that waits for its workers' start, lean or not.
                clock._note_start()
            ours = (
                clock._listener_ns
            )  # a profiler started at this boundary is ours, not the loader's
            # A loader read with autograd off while the loop trains (validation's
            # `with torch.no_grad(): for x, y in val_loader`, Lightning's inference_mode) is not
            # the training step's wait for its data, nor its samples: its time stays in the step.
            evaluating = _PRIORITY[clock.anchor] > _LOADER_PRIORITY and not clock._grad_enabled()
            if not evaluating:
                clock._train_reads += 1  # the optimizers' cycle reads a batch (_closes_cycle)
            # On the steps the thread's CPU clock is read (``_CPU_ALL_STEPS``, ``_CPU_EVERY``),
            # the wait is read apart: the loop thread's CPU (the in-process loader's work), its
            # wait for a core (schedstat; the step's own reading takes it out), and the other
            # threads' CPU (this process's clock less the thread's). What it spent blocked off a
            # core while another thread of the process ran is no wait for the loader: the GIL
            # held by a side thread (a logger, a progress bar, our samplers), "contention",
            # taken out of the data wait. Not told apart here: a holder of the GIL waiting for
            # a core (the other threads' run delay is mostly their wake-ups, not the GIL: two
            # threads ticking every 5 ms read 72% of a sleeping loader's block as theirs at load
            # 12; ``analysis.loader_wait`` reads it from how the block comes and goes), and a
            # side thread's CPU while the loader sleeps (read as contention). A loader
            # with workers whose queue held no batch for it at the start waited on its workers:
            # its block is theirs. Inline, builtins only: this runs every step
            # (tests/test_capture_cost.py).
            n, fd = clock._step_count, clock._sched_fd or -1
            split = not evaluating and fd >= 0 and (n < _CPU_ALL_STEPS or n % _CPU_EVERY == 0)
            if split:
                queued = True
                if getattr(it, "_num_workers", 0):
                    try:  # a batch already there (in order, or received out of order)
                        queued = (
                            it._data_queue.qsize() > 0
                            or len(it._task_info.get(it._rcvd_idx, ())) == 2
                        )
                    except (AttributeError, NotImplementedError, OSError, TypeError):
                        queued = False  # not known: the block stays the loader's
                # The thread's clocks first (a system call that can preempt the thread: Linux's
                # update_curr), then the wall and the run delay next to each other: a wait for a
                # core between two marks would read as a block, or hide one.
                all0, cpu0 = _process_time_ns(), _thread_time_ns()
                t0 = time.perf_counter_ns()
                try:
                    run0 = int(os.pread(fd, 64, 0).split()[1])
                except (OSError, ValueError, IndexError):
                    split = False
            try:
                batch = original(it)
            except StopIteration:
                clock._loader_ended(id(it), evaluating)
                evaluating = True  # no step's data wait
                raise
            finally:
                if split:
                    t1 = time.perf_counter_ns()
                    try:
                        run1 = int(os.pread(fd, 64, 0).split()[1])
                    except (OSError, ValueError, IndexError):
                        split = False
                    cpu1, all1 = _thread_time_ns(), _process_time_ns()
                clock._last_mark_ns = end = time.perf_counter_ns()
                if not evaluating:
                    wall = max(0, end - start - ours)
                    if split:
                        cpu = cpu1 - cpu0
                        blocked = max(0, min(wall, t1 - t0) - cpu - max(0, run1 - run0))
                        taken = min(blocked, max(0, all1 - all0 - cpu)) if queued else 0
                        wall -= taken
                        clock._data_blocked_ns = max(0, clock._data_blocked_ns) + blocked
                        clock._data_unqueued_ns = max(0, clock._data_unqueued_ns) + (
                            blocked if queued else 0
                        )
                        clock._data_contention_ns = max(0, clock._data_contention_ns) + taken
                    clock._data_ns += wall
            if evaluating:
                return batch
            clock._batch_highs.read(clock._step_count, batch)
            if clock._lean:
                # Lean steps count their samples too (the timed steps' reading, a few type
                # checks a batch): a loop of 32- and 16-sample steps is two works whichever
                # way it was clocked (analysis.work_spread, analysis.like_work). No backward
                # is seen: each training read is the step's (``_count_samples``'s bookkeeping
                # of reads no backward followed is the timed steps'); a validation with
                # autograd on between two steps adds its reads (a work of other reads).
                size = _leading_size(batch, clock._unread)
                fixes = clock._read_ahead.read(id(it), size)
                if fixes:
                    corrected_rows(clock._rows, fixes, 9)
                if size is not None:
                    clock._samples = (clock._samples or 0) + size
                return batch
            if id(it) != clock._iterator_id:
                clock._switch_iterator(it, batch)
            clock._iterator_batches += 1
            clock._count_samples(id(it), _leading_size(batch, clock._unread))
            if clock._padding.wants():
                clock._padding.read(batch)
            return batch

        __next__.__wrapped__ = original  # type: ignore[attr-defined]
        return __next__

    def _count_samples(self, key: int, n: int | None) -> None:
        """Add a read's samples to the open step's, less those of reads no backward followed.

        A micro-batch is read, then backward (accumulation: read, backward, read, backward); two
        loaders zipped are read once each before it. An iterator read again with no backward
        since its last read is not training on those batches: a validation pass with autograd
        on (no ``torch.no_grad()``) between two steps read 32 batches of 64 there, and the step
        after it read "batch 2112". Each such read's samples go when the next read of the same
        iterator comes, and the last one's when another iterator is read after it; a backward
        for each read taken back gives it back (micro-batches read ahead of their backward
        passes: HF Trainer under ``gradient_accumulation_steps`` read "batch 8" for 4 x 8). Only under
        a backward or optimizer anchor: where reads end the steps, each read is its step."""
        fixes = self._read_ahead.read(key, n)  # a read first after an end: none read ahead
        if fixes:
            corrected_rows(self._rows, fixes, 9)
        if _PRIORITY[self.anchor] <= _LOADER_PRIORITY:
            if n is not None:
                self._samples = (self._samples or 0) + n
            return
        if self._ended_last:
            if not self._run_backs and self._samples:
                self._samples = max(0, self._samples - self._ended_last)
            self._ended_last = 0
        self._run_backs = 0
        self._ahead = 0  # a read after a loader's end: the backward trains on it, not on ahead
        if key == self._run_iter and self._run_reads:
            if self._samples:
                self._samples = max(0, self._samples - self._run_last)
                self._run_dropped.append(self._run_last)
            self._run_reads += 1
        else:
            if self._run_reads >= 2 and self._samples:
                self._samples = max(0, self._samples - self._run_last)
            self._run_before, self._run_before_iter = self._run_last, self._run_iter
            self._run_joined = bool(self._samples)
            self._run_iter, self._run_reads = key, 1
            self._run_dropped = []
        self._run_last = n or 0
        if n is not None:
            self._samples = (self._samples or 0) + n

    def _loader_ended(self, key: int, evaluating: bool) -> None:
        """An iterator raised StopIteration. Where it opened the step, a read of another
        iterator is no longer one of a ``zip`` (_read_joins_step). Where the loop trains and
        the open step has run no backward yet, the backward passes that follow train batches
        read before the loader ended: a wrapper reading one ahead (accelerate's
        DataLoaderShard under the HF Trainer) read the step's first micro-batch in the step
        before, and main counted the epoch's last step of 2 x 4 "batch 4". Its first backward
        adds the read before the step's reads (the latest read where the step read none).

        Only the loader the step trains on reads ahead for it: the ended run's reads follow a
        read of the same iterator, or the run is that iterator's trained read. A run of
        another iterator that ends before any backward trained on none of its reads (each
        read but the last went at the next read): after another loader's read in the open
        step (a validation with autograd on inside a step) its last read's samples go now;
        where the run began the step's reads (a validation between two steps, or an epoch of
        a single step), they go at the next read, and stay where a backward comes first. The
        ended iterator is forgotten either way: the next one made may have its ``id`` (a
        validation iterator's end after an epoch read as the training loader's, and the next
        epoch's first step held 8 samples more)."""
        if key == self._step_iter:
            self._step_iter = 0
            if _PRIORITY[self.anchor] <= _LOADER_PRIORITY and self._reads_in_step == 1:
                # The read that found the end opened the step: none is open (the next read
                # closed it as a step of its own: main counted 10 steps for two loops of 3
                # and 6 batches).
                self._cur_start_ns = None
        if not evaluating:
            self._read_ahead.ended(key)  # a backward before the next read: it read ahead
        if (
            evaluating
            or self._lean
            or key != self._run_iter
            or _PRIORITY[self.anchor] <= _LOADER_PRIORITY
        ):
            return
        if not self._run_reads:
            if not self._bwd_calls:
                self._ahead = self._run_last
        elif self._run_before_iter == key:
            if not self._bwd_calls:
                self._ahead = self._run_before
        elif not self._run_joined:
            self._ended_last = self._run_last
        elif self._samples:
            self._samples = max(0, self._samples - self._run_last)
        self._run_iter = self._run_reads = 0
        if self._run_before_iter == key:
            self._run_before_iter = 0

    def _switch_iterator(self, it: Any, batch: Any) -> None:
        """The loader settings of the iterator the loop now reads (the fix reads the
        loader's real num_workers / pin_memory even where the source gives no literal), and the
        tensors its first batch holds (each one a shared-memory storage a worker would fill and
        the main process receive). Two values are read from the iterator; no reference to it or
        to the batch is kept (its workers end with it)."""
        self._note_iterator()
        self._iterator_id = id(it)
        self._iterator_key = (
            getattr(it, "_num_workers", None),
            getattr(it, "_pin_memory", None),
            unsplit_stream(it),
            _batch_tensors(batch),
        )

    def _note_start(self) -> None:
        if _PRIORITY[self.anchor] > _LOADER_PRIORITY and not self._grad_enabled():
            return  # an evaluation's loader (no_grad) in a loop that trains: not its loader
        if not self._starts or self._starts[-1] != self._step_count:
            self._starts.append(self._step_count)

    def _note_iterator(self) -> None:
        if self._iterator_batches:
            key = self._iterator_key
            self._loader_batches[key] = self._loader_batches.get(key, 0) + self._iterator_batches
        self._iterator_batches = 0

    def _wrap_grad(self, original: Callable[..., Any]) -> Callable[..., Any]:
        return self._wrap_backward(original, key="grad")

    def _wrap_backward(
        self, original: Callable[..., Any], key: str = "backward"
    ) -> Callable[..., Any]:
        clock = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # backward's own errors read as without us (see __next__)
            if key in clock._inert or threading.get_ident() != clock._tid or clock._in_backward:
                return original(*args, **kwargs)
            if clock._compiled_since:  # the forward before it compiled
                clock._after_compile()
            start = time.perf_counter_ns()
            if clock._last_mark_ns and not clock._lean:
                # Forward (and the loss): from the latest phase's end to this backward. Inside a
                # closure optimizer's step the optimizer pre hook is the latest mark.
                clock._fwd_ns += max(0, start - clock._last_mark_ns)
                clock._fwd_calls += 1
            clock._counts["backward"] += 1
            clock._bwd_calls += 1
            clock._run_reads = 0  # the reads before it trained (_count_samples)
            if clock._ahead:
                clock._samples = (clock._samples or 0) + clock._ahead
                clock._ahead = 0
            clock._run_backs += 1
            if clock._run_backs >= 2 and clock._run_dropped and clock._samples is not None:
                # Micro-batches read ahead, then a backward each (HF Trainer's
                # get_batch_samples under gradient_accumulation_steps): the first backward
                # trains the run's last read, each further one an earlier read given back.
                clock._samples += clock._run_dropped.pop()
            if not clock._lean:
                clock._read_anomaly()
            if clock._optimizer_hooks_allowed or not clock._same_step_again():
                clock._event("backward", start, ends_step=False)
            # Opened and closed in methods of ours: the wrapper's own callees are Dynamo's to
            # judge (skip_in_dynamo), and record_function's frames would count as compiled.
            rng = clock._open_range(markers.BACKWARD) if clock.annotate else None
            clock._in_backward = True
            try:
                return original(*args, **kwargs)
            finally:
                clock._in_backward = False
                if rng is not None:
                    clock._close_range(rng)
                clock._last_mark_ns = end = time.perf_counter_ns()
                clock._bwd_ns += end - start

        backward.__doc__ = original.__doc__
        backward.__wrapped__ = original  # type: ignore[attr-defined]
        return backward

    def _same_step_again(self) -> bool:
        """Without optimizer hooks (a compiled frame guards on them): whether this backward
        runs inside the same optimizer step as the one before it, a closure's next call (LBFGS
        calls it up to ``max_iter`` times a step), which is no new step. The step is torch's
        step wrapper's frame on the stack (Dynamo runs the wrapper's own frame when it compiles
        ``opt.step``, its resume functions above it)."""
        frame: types.FrameType | None = sys._getframe(2)
        for _ in range(_STEP_FRAME_DEPTH):
            if frame is None:
                break
            code = frame.f_code
            if code.co_name == "wrapper" and code.co_filename == self._optim_file:
                same = frame is self._step_frame
                self._step_frame = frame
                return same
            frame = frame.f_back
        self._step_frame = None
        return False

    def _read_anomaly(self) -> None:
        """Whether this backward runs with anomaly detection on (a read of torch's flag; it is
        never set), and, the first time it does, which function called it."""
        self._anomaly_reads += 1
        for i, on in enumerate(self._modes()):
            self._mode_counts[i] += on
        if not self._anomaly_enabled():
            return
        self._anomaly_on += 1
        if self._anomaly_on == 1:
            self._anomaly_caller = _caller_outside(sys._getframe(2), self._torch_dir)

    def _open_range(self, name: str) -> Any:
        rng = self._record_function(name)
        rng.__enter__()
        return rng

    @staticmethod
    def _close_range(rng: Any) -> None:
        rng.__exit__(None, None, None)

    # ---------------------------------------------------------------- step accounting

    def _event(self, kind: str, now_ns: int, *, ends_step: bool) -> None:
        """One hook event. Start-kind anchors open a step at ``now``; the optimizer closes one."""
        __tracebackhide__ = True  # an interrupt here reads as the user's step's (see below)
        if kind != self.anchor:
            if _PRIORITY[kind] <= _PRIORITY[self.anchor]:
                if self._cur_start_ns is None:
                    self._cur_start_ns = now_ns
                return
            self._upgrade(kind)  # type: ignore[arg-type]
        if ends_step:
            if self._cur_start_ns is None:
                self._cur_start_ns = now_ns
            self._close_step(now_ns)
        elif self._cur_start_ns is not None and self._read_joins_step(kind):
            self._reads_in_step += 1
            return  # a second loader read in the same training iteration (zip(a, b))
        elif self._cur_start_ns is not None and (
            self._fwd_calls or self._bwd_calls or self._data_ns or self._opt_ns
        ):
            if kind == "dataloader" and self._bwd_calls and not self._lean:
                self._reads_per_step = self._reads_in_step  # learnt from a step that trained
            self._close_step(now_ns)
        self._reads_in_step = 1
        self._step_iter = self._read_key if kind == "dataloader" else 0
        self._cur_start_ns = now_ns
        if not ends_step or not self._last_mark_ns:
            self._last_mark_ns = now_ns
        self._listener_ns = 0
        listener = self.boundary_listener
        if listener is not None and self._step_count >= self.listener_due:
            before_ns = time.perf_counter_ns()
            try:
                listener(self._step_count)
            except KeyboardInterrupt:
                # Stop pressed at this step boundary while gpucheck's profiler started or
                # stopped: the user's interrupt, raised here afresh (IPython shows this frame,
                # the one raising, and not the session's and profiler's frames below it).
                raise KeyboardInterrupt from None
            # The listener's own time (a profiler starting) is ours, not the next forward's.
            self._last_mark_ns = after_ns = time.perf_counter_ns()
            if after_ns - before_ns > _OURS_MIN_NS:
                self._listener_ns = after_ns - before_ns
                self._ours_ns += after_ns - before_ns

    def _read_joins_step(self, kind: str) -> bool:
        """Whether a DataLoader read that anchors the steps belongs to the step already open:
        a loop that trains (a backward was seen) and reads several loaders an iteration
        (``zip(loader_a, loader_b)``) has no backward between its reads. Timed steps see the
        backward; lean ones (no backward hook) join as many reads as a timed step that trained
        held. Before any backward (an inference loop, or training's first iteration) no hook
        tells a model's call between two reads: a read joins the step only where it reads
        another iterator than the one that opened the step, still running (``zip``: main
        counted the first training step of a zip of two loaders with one loader's batch, an
        inference zip two steps an iteration); one loader's reads each end a step."""
        if kind != "dataloader":
            return False
        if self._fwd_calls or self._bwd_calls or self._opt_ns:
            return False
        if not self._counts["backward"]:
            return self._step_iter != 0 and self._read_key != self._step_iter
        return not self._lean or self._reads_in_step < self._reads_per_step

    def _upgrade(self, kind: StepAnchor) -> None:
        # Whether the superseded steps trained (a backward in one of their timed steps): a
        # step's micro-batches or a closure's calls did; an evaluation before training did not.
        self.superseded_trained = any(r[8] for r in self._rows if r[10])
        if kind == "optimizer" and self.anchor == "dataloader":
            self._absorb_micro_batches()
        self.anchor = kind
        self._learn_step = 0  # the steps restart: the first optimizer step is step 0's
        if kind != "optimizer":
            self._cycle = []  # learnt anew at the next optimizer step
        self._rows.clear()
        self._read_ahead.forget_steps()  # their rows are gone
        self._cpu_rows.clear()
        self._mem_rows.clear()  # read at the superseded steps' ends: indices of another count
        self._starts.clear()
        self._cpu_next = 0
        self._sched_mark_at = -(2**62)
        self._decimation = 1
        self._step_count = 0
        if self.anchor_listener is not None:
            self.anchor_listener(kind)

    def _absorb_micro_batches(self) -> None:
        """The first optimizer step ends the first training step: the steps counted at the
        loader before it that were its micro-batches join the open step, which then starts
        where the first of them did. Looking back from the last: a step that ran a backward
        (accumulation: read, backward, read, backward, step), and one that did not while the
        steps joined ran more backward passes than they read batches (micro-batches read ahead:
        HF Trainer under ``gradient_accumulation_steps`` reads them all, then a backward each).
        An evaluation before training (reads, no backward) stays out. Without this the first
        step held its last micro-batch only ("batch 4" for 2 x 4)."""
        rows = self._rows
        backs, reads = self._bwd_calls, self._reads_in_step
        taken = 0
        for row in reversed(rows):
            if not row[10] or row[0] != self._step_count - taken - 1 or taken >= _CYCLE_LEARN * 4:
                break
            if not row[8] and backs <= reads:
                break
            backs += row[8]
            reads += 1
            taken += 1
        if not taken:
            return
        joined = rows[-taken:]
        self._cur_start_ns = joined[0][1]
        self._data_ns += sum(r[3] for r in joined)
        self._fwd_ns += sum(r[4] for r in joined)
        self._bwd_ns += sum(r[5] for r in joined)
        self._opt_ns += sum(r[6] for r in joined)
        self._fwd_calls += sum(r[7] for r in joined)
        self._bwd_calls += sum(r[8] for r in joined)
        self._ours_ns += sum(r[11] for r in joined)
        self._closures_mark -= sum(r[17] for r in joined)
        self._reads_mark -= sum(r[18] for r in joined)
        sizes = [r[9] for r in joined if r[9] is not None]
        if sizes:
            self._samples = (self._samples or 0) + sum(sizes)

    def _close_step(self, end_ns: int) -> None:
        if not self._bwd_calls and self._last_mark_ns and not self._lean:
            # No backward (inference): the model's time is what the step did after its data.
            self._fwd_ns += max(0, end_ns - max(self._last_mark_ns, self._cur_start_ns or 0))
            self._fwd_calls += 1
        index = self._step_count
        self._step_count = index + 1
        self._last_end_ns = end_ns
        closures, self._closures_mark = (
            self._closure_calls - self._closures_mark,
            self._closure_calls,
        )
        reads = self._counts["dataloader"]
        reads, self._reads_mark = reads - self._reads_mark, reads
        wait_ns = cpu_ns = -1
        if self.read_waits:
            now = self._read_sched()
            last, self._sched_mark = self._sched_mark, now
            if now is not None and last is not None and self._sched_mark_at == index - 1:
                cpu_ns, wait_ns = now[0] - last[0], now[1] - last[1]
            self._sched_mark_at = index
        elif self.read_stalls and self._sched_fd != -1:
            # Steps too short to read at each end: read after a slow one (a time slice lost to
            # another process, or the code's own stall) and every _MARK_EVERY steps, so a slow
            # step's wait is that of the few steps since the last reading: the machine's, or not.
            slow = end_ns - (self._cur_start_ns or end_ns) >= _STALL_READ_NS
            if slow or index - self._sched_mark_at >= _MARK_EVERY:
                now = self._read_sched()
                last, self._sched_mark = self._sched_mark, now
                if slow and now is not None and last is not None:
                    wait_ns = now[1] - last[1]
                self._sched_mark_at = index
        if _PRIORITY[self.anchor] > _LOADER_PRIORITY:
            # The batch the step consumed where the loop reads ahead (a wrapper read it in the
            # step before), and the steps before corrected once an iterator's end tells. A lean
            # step counts no backward pass (``ReadAhead.close`` decides on its reads alone).
            backs = None if self._lean else self._bwd_calls
            self._samples, fixes = self._read_ahead.close(index, backs, self._samples)
            if fixes:
                corrected_rows(self._rows, fixes, 9)
        if index % self._decimation == 0:
            start_ns = self._cur_start_ns if self._cur_start_ns is not None else end_ns
            if self._samples is not None:
                self._batch_size = self._samples
            self._rows.append(
                (
                    index,
                    start_ns,
                    end_ns,
                    self._data_ns,
                    self._fwd_ns,
                    self._bwd_ns,
                    self._opt_ns,
                    self._fwd_calls,
                    self._bwd_calls,
                    self._batch_size,
                    not self._lean,
                    self._ours_ns,
                    wait_ns,
                    cpu_ns,
                    self._data_blocked_ns,
                    self._data_unqueued_ns,
                    self._data_contention_ns,
                    closures,
                    reads,
                )
            )
            if len(self._rows) >= self._capacity:
                self._decimation *= 2
                self._rows = [r for r in self._rows if r[0] % self._decimation == 0]
        self._data_ns = self._fwd_ns = self._bwd_ns = self._opt_ns = 0
        self._data_blocked_ns = self._data_unqueued_ns = self._data_contention_ns = -1
        self._fwd_calls = self._bwd_calls = 0
        self._samples = None
        self._run_dropped = []
        self._ahead = self._ended_last = 0
        self._ours_ns = 0
        every = self.memory_every_steps
        if every and index % every == 0:
            fd = self._statm_fd
            if fd is None:
                self._read_memory(index)  # opens the file: once a cell
            else:
                # Read inline: short cells read every step, and a call of ours a step more is
                # what tests/test_capture_cost.py bounds (the pread alone is ~2 us).
                try:
                    rss = int(os.pread(fd, 128, 0).split()[1]) * self._page_bytes
                except (OSError, ValueError, IndexError):
                    rss = -1
                if rss >= 0:
                    self._mem_rows.append((index, rss))
                    if len(self._mem_rows) >= max(2, self.memory_readings):
                        self._thin_memory()
        if index >= self._cpu_next:
            # A few dozen readings over any run (each a quarter of the index further on): the
            # process's cores over the loop, all its threads, without a per-step read.
            self._cpu_next = index + 1 + index // 4
            self._cpu_rows.append((index, end_ns, _process_time_ns()))

    def _read_sched(self) -> tuple[int, int] | None:
        """(on-CPU ns, run-queue wait ns) of the loop thread so far, or None (not Linux: the
        reading turns off for good). The wait is exact to the last time the thread was switched
        in; the on-CPU figure is updated at the scheduler's ticks (a step's is within a tick)."""
        fd = self._sched_fd
        if fd is None:
            try:
                fd = self._sched_fd = open_high(_SCHEDSTAT)
            except OSError:
                self._sched_fd = -1
                return None
        if fd < 0:
            return None
        try:
            cpu, wait, _slices = os.pread(fd, 64, 0).split()  # every step: no slice made
            return int(cpu), int(wait)
        except (OSError, ValueError):
            self._sched_fd = -1
            os.close(fd)
            return None

    def _forget_sched(self) -> None:
        """The steps moved to another thread (or the capture ends): its own counters next."""
        fd, self._sched_fd, self._sched_mark = self._sched_fd, None, None
        if fd is not None and fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_memory(self, index: int) -> None:
        """Append the process RSS after step ``index`` (Linux /proc; elsewhere: nothing)."""
        if self._statm_fd is None:
            try:
                self._statm_fd = open_high("/proc/self/statm")
                self._page_bytes = os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, AttributeError):
                self.memory_every_steps = 0
                return
        try:
            rss_pages = int(os.pread(self._statm_fd, 128, 0).split()[1])
        except (OSError, ValueError, IndexError):
            return
        self._mem_rows.append((index, rss_pages * self._page_bytes))
        if len(self._mem_rows) >= max(2, self.memory_readings):
            self._thin_memory()

    def _thin_memory(self) -> None:
        """Keep every other reading and read half as often: a long cell, same memory."""
        self.memory_every_steps *= 2
        self._mem_rows = [r for r in self._mem_rows if r[0] % self.memory_every_steps == 0]

    def close_memory(self) -> None:
        """Close the /proc file the memory readings use (``uninstall`` calls it)."""
        fd, self._statm_fd = self._statm_fd, None
        if fd is not None:
            os.close(fd)

    def step_times_s(self, buckets: int = 60) -> tuple[float, ...]:
        """Step time over the run so far, the kept steps in ``buckets`` groups (their medians),
        for the live sparkline."""
        rows = self._rows
        n = len(rows)
        if n == 0:
            return ()
        size = max(1, -(-n // buckets))
        out = []
        for start in range(0, n, size):
            chunk = sorted(r[2] - r[1] for r in rows[start : start + size])
            out.append(chunk[len(chunk) // 2] / 1e9)
        return tuple(out)

    # ---------------------------------------------------------------- results

    @property
    def step_count(self) -> int:
        return self._step_count

    def inside_optimizer_step(self) -> bool:
        """An optimizer step is open (its pre hook ran, its post hook not yet) while the steps
        are counted at a lower anchor: each step is then a call inside it (a closure
        optimizer's forward and backward, LBFGS's first step)."""
        return bool(self._opt_start_ns) and self.anchor != "optimizer"

    @property
    def is_lean(self) -> bool:
        return self._lean

    def median_step_s(self, last: int = 50) -> float | None:
        """Median of the latest kept steps, for the live view (cheap, no numpy)."""
        recent = sorted(r[2] - r[1] for r in self._rows[-last:])
        if not recent:
            return None
        return recent[len(recent) // 2] / 1e9

    def record(self) -> StepClockRecord:
        t0 = self._t0_ns
        steps = tuple(
            StepTiming(
                index=r[0],
                start_s=(r[1] - t0) / 1e9,
                duration_s=(r[2] - r[1]) / 1e9,
                data_s=r[3] / 1e9,
                forward_s=r[4] / 1e9,
                backward_s=r[5] / 1e9,
                optimizer_s=r[6] / 1e9,
                forward_calls=r[7],
                backward_calls=r[8],
                batch_size=r[9],
                timed=r[10],
                ours_s=r[11] / 1e9,
                wait_s=r[12] / 1e9 if r[12] >= 0 else None,
                cpu_s=r[13] / 1e9 if r[13] >= 0 else None,
                data_blocked_s=r[14] / 1e9 if r[14] >= 0 else None,
                data_unqueued_s=r[15] / 1e9 if r[15] >= 0 else None,
                data_contention_s=r[16] / 1e9 if r[16] >= 0 else None,
                closure_calls=r[17],
                loader_reads=r[18],
            )
            for r in self._rows
        )
        grad_bytes = self._grad_bytes
        self._note_iterator()
        loader = max(self._loader_batches.items(), key=lambda kv: kv[1], default=None)
        return StepClockRecord(
            anchor=self.anchor,
            step_count=self._step_count,
            steps=steps,
            decimation=self._decimation,
            event_counts=dict(self._counts)
            | (
                {"optimizer_in_children": sum(r.steps for r in self._child_rows)}
                if self._child_rows
                else {}
            ),
            grad_bytes=grad_bytes or None,
            grad_tensors=self._grad_tensors or None,
            optimizer_tensors=dict(self._class_tensors),
            optimizer_cpu={c: (ns / 1e9, n) for c, (ns, n) in self._class_cpu.items()},
            optimizer_faults={c: (f, n) for c, (f, n) in self._class_faults.items()},
            rest_faults=(self._rest_faults[0], self._rest_faults[1]),
            faults_off_step=self._faults_off_step,
            fault_cost_s=self._fault_cost_s(),
            memory=tuple(StepMemory(index=i, rss_bytes=b) for i, b in self._mem_rows),
            process_cpu=tuple(
                StepCpu(index=i, end_s=(e - t0) / 1e9, process_cpu_s=c / 1e9)
                for i, e, c in self._cpu_rows
            ),
            lean_data=self._lean_data or "dataloader" in self._patches,
            lean_optimizer=self._lean_optimizer,
            loader_num_workers=loader[0][0] if loader else None,
            loader_pin_memory=loader[0][1] if loader else None,
            loader_unsplit_stream=loader[0][2] if loader else None,
            loader_batch_tensors=loader[0][3] if loader else None,
            children=self.children(),
            anomaly_backwards=self._anomaly_on if self._anomaly_reads else None,
            anomaly_backward_reads=self._anomaly_reads,
            anomaly_caller=self._anomaly_caller,
            deterministic_backwards=self._mode_counts[0],
            deterministic_warn_only_backwards=self._mode_counts[1],
            cudnn_deterministic_backwards=self._mode_counts[2],
            double_default_backwards=self._mode_counts[3],
            double_grad_bytes=self._double_bytes if self._grad_bytes is not None else None,
            last_end_s=(self._last_end_ns - t0) / 1e9 if self._step_count else None,
            loader_starts=tuple(self._starts),
            padding=self._padding.record(),
            batch_highs=self._batch_highs.record(),
        )


# With per-step readings off, a step this long gets its wait for a core read (a time slice
# is 1-4 ms; tiny steps run well under a millisecond), and the mark is refreshed this often.
_STALL_READ_NS = 1_000_000
_MARK_EVERY = 16
# Loader starts kept (one an epoch for most loops; a loop that makes an iterator a step, such
# as ``next(iter(loader))``, fills it at once and says no more).
_STARTS_KEPT = 4096
# Optimizer steps the cycle of several optimizers is learnt over from the loop's start (or
# from a change of it): a critic stepping D up to 15 times a G step with no loader to tell.
_CYCLE_LEARN = 24
# ... and a cycle that reads is taken for the loop's once seen three times, and over this many
# symbols at least: a loop with no period (D stepped when its loss says so, at random) repeats a
# short pattern by chance (seen twice: 5 of 8 such 60-batch runs joined 2-5 batches a step).
_CYCLE_CONFIRM = 12

# Where steps are too short to read their wait (``read_waits`` off, under 1 ms) or lean, one
# training step in this many has its page faults read (two readings of ~1-3 us each, at its start and
# end, and one around each update inside it); every step otherwise.
_FAULTS_EVERY = 8
# The loop thread's CPU clock (``time.thread_time_ns``, the optimizer classes' own CPU time)
# on every step up to this one, then on one step in _CPU_EVERY. Reading a thread's own CPU
# clock is a system call that updates the scheduler's account of the running thread (Linux's
# update_curr): on a busy machine, where the thread's slice has run out, it is preempted right
# there, and a stack sampler that asks for the GIL while the thread waits for a core takes its
# sample at the next bytecode, in our hook. Read on every step, the reads drew 21% of a busy
# Lightning run's sparse samples (load 23-28), each one's time taken from the code before the
# read (benchmarks/README.md, "The framework's share under load: preemption at our clock
# reads"). The mean per step is what is kept (``optimizer_cpu``: CPU time, steps read).
_CPU_ALL_STEPS = 40
_CPU_EVERY = 8


def _read_sum(a: int, b: int) -> int:
    """Two steps' readings joined: -1 where neither was read."""
    return -1 if a < 0 and b < 0 else max(0, a) + max(0, b)


_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None) if resource else None
_FAULTS_READ = _RUSAGE_THREAD is not None
# Read inline in the hooks (a builtin call, no function of ours a step: test_capture_cost).
_getrusage: Callable[[int], Any] = resource.getrusage if resource else (lambda _who: None)
_THREAD: int = _RUSAGE_THREAD if _RUSAGE_THREAD is not None else 0


def _cycle_ends(reads: list[bool]) -> list[int]:
    """The positions of a learnt cycle (whether each optimizer step read a batch since the one
    before) whose optimizer step may end the training step, the one to prefer first: one a
    period, the loop's iteration.

    Learnt from the loop's start (its first optimizer step read a batch, or none reads): the
    period's last step. Learnt from the middle of a loop that reads: the step after which the
    reads resume (a critic's ``x = next(it)`` each D step, then G with no batch: G ends it), or
    else the last one a read follows. In a loop that reads, only a step a read follows may end
    one. One step a batch instead counted a WGAN critic reading its own batch for each of 5 D
    steps 5 steps a G step."""
    period = len(reads)
    if not any(reads):
        return list(range(period - 1, -1, -1))
    after = [p for p in range(period - 1, -1, -1) if reads[(p + 1) % period]]
    if reads[0]:
        return after  # period - 1 first
    resume = [p for p in after if not reads[p]]
    return resume + [p for p in after if reads[p]]


def _minor_faults() -> int:
    """The loop thread's minor page faults so far (Linux's per-thread rusage)."""
    assert resource is not None and _RUSAGE_THREAD is not None
    return resource.getrusage(_RUSAGE_THREAD).ru_minflt


def fault_cost_s(pages: int = 256) -> float | None:
    """What one minor page fault costs this thread's CPU clock here (a fresh anonymous page
    zeroed and mapped on first touch): ``pages`` fresh pages written once, less the same writes
    again on mapped pages. ~3 us on a loaded 2-core VM (benchmarks/README, pfault). None: no
    per-thread fault count here, or none counted."""
    if not _FAULTS_READ:
        return None
    step = mmap.PAGESIZE
    buf = mmap.mmap(-1, pages * step)
    try:
        times = []
        for _ in range(2):
            f0, t0 = _minor_faults(), time.thread_time_ns()
            for i in range(0, pages * step, step):
                buf[i] = 1
            times.append((time.thread_time_ns() - t0, _minor_faults() - f0))
    finally:
        buf.close()
    (first_ns, faults), (again_ns, _) = times
    if faults <= 0:
        return None
    return max(0, first_ns - again_ns) / faults / 1e9


# Set on our wrapper of a step()'s closure: an optimizer whose step hands the closure on to an
# inner optimizer's step (a wrapper optimizer) gets it wrapped once (a child's too: one name).
_CLOSURE_ATTR = children.CLOSURE_ATTR

# A boundary listener that returns within this was only its fast path (a comparison): not
# counted as ours, so the steps it touched are not left out of the analysis for nothing.
_OURS_MIN_NS = 20_000


def _trainable_bytes(params: Any) -> tuple[int, int, int]:
    """Bytes of the parameters that get gradients (what data parallelism all-reduces a step),
    how many tensors they are, and the bytes of those that are float64."""
    seen: set[int] = set()
    total = double = 0
    for p in params:
        if id(p) in seen or not getattr(p, "requires_grad", False):
            continue
        seen.add(id(p))
        size = p.numel() * p.element_size()
        total += size
        if str(getattr(p, "dtype", "")) == "torch.float64":
            double += size
    return total, len(seen), double


def _modes_probe(torch: Any) -> Callable[[], tuple[bool, bool, bool, bool]]:
    """A reader of torch's process-wide modes that slow every step, each a read of a flag:
    deterministic algorithms, their warn-only form, cuDNN's deterministic flag, and a float64
    default dtype. A torch without one of them reads it off."""
    deterministic = getattr(torch, "are_deterministic_algorithms_enabled", _never)
    warn_only = getattr(torch, "is_deterministic_algorithms_warn_only_enabled", _never)
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    default_dtype = torch.get_default_dtype
    double = torch.float64

    def read() -> tuple[bool, bool, bool, bool]:
        on = bool(deterministic())
        return (
            on,
            on and bool(warn_only()),
            bool(getattr(cudnn, "deterministic", False)),
            default_dtype() is double,
        )

    return read


def _no_modes() -> tuple[bool, bool, bool, bool]:
    return (False, False, False, False)


def _caller_outside(frame: Any, torch_dir: str) -> str | None:
    """The qualname of the first frame from ``frame`` outward whose code is not torch's
    (``Tensor.backward`` calls ``torch.autograd.backward``); None at a module's top level."""
    while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
        frame = frame.f_back
    if frame is None or frame.f_code.co_name == "<module>":
        return None
    code = frame.f_code
    return str(getattr(code, "co_qualname", code.co_name))


def _never() -> bool:
    return False


def _always() -> bool:
    return True


def _dynamo_has_compiled() -> bool:
    """Whether Dynamo compiled any frame in this process already (its code may run now)."""
    import sys

    counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
    if counters is None:
        return False
    try:
        return int(counters["frames"]["total"]) > 0
    except (KeyError, TypeError, ValueError):
        return False


# Where torch keeps the global optimizer step hooks: a guard whose source names one of these
# (G['_global_optimizer_pre_hooks'] in Optimizer's step wrapper, or reached through the module
# from a frame that inlined it) fails as soon as our hook is in the dict.
_HOOK_DICT_NAME = "_global_optimizer_"
# A guard tree this large is not walked: as if it guarded the dicts (no optimizer hooks).
_MAX_GUARD_NODES = 100_000


def _compiled_frames_guard_optimizer_hooks() -> bool:
    """Whether a frame Dynamo compiled in this process guards on torch's optimizer hook dicts.

    Such a frame (a compiled ``opt.step``, or a training step that traced one) would recompile
    the moment our hook entered the dict, so the cell must go without it; a compiled model or
    loss guards nothing of the optimizer's and leaves the optimizer hooks to later cells. Read
    from Dynamo's own records (the frames it converted, each cache entry's guard tree: private
    torch APIs, read-only); anything we cannot read counts as a guard. Frames compiled during
    the cell are handled by ``_on_compile_start``.
    """
    import sys

    if not _dynamo_has_compiled():
        return False
    try:
        convert_frame = sys.modules["torch._dynamo.convert_frame"]
        cache_entries = sys.modules["torch._dynamo.eval_frame"]._debug_get_cache_entry_list
        budget = _MAX_GUARD_NODES
        for ref in list(convert_frame.input_codes.seen):
            code = ref()
            if code is None:
                continue
            for entry in cache_entries(code):
                todo = [entry.guard_manager.root]
                while todo:
                    manager = todo.pop()
                    budget -= 1
                    if budget < 0 or _HOOK_DICT_NAME in manager.get_source():
                        return True
                    todo.extend(manager.get_child_managers())
    except Exception:  # noqa: BLE001 -- a torch without these records: as if they guarded
        return True
    return False


def _skip_our_code_in_dynamo() -> None:
    """Every function of the capture, nested ones included: what our hooks call at a step
    boundary (the step accounting, the profiler window, the session's listener) runs inside
    the user's compiled function after a graph break, where Dynamo would compile its frames."""
    import sys

    todo: list[Any] = []
    # dict.copy() is one step under the GIL; iterating the live dict raced another thread's
    # import ("dictionary changed size during iteration", seen once in a loaded test run).
    for name, module in sys.modules.copy().items():
        if module is None or not name.startswith(("gpu_notebook.capture", "gpu_notebook.markers")):
            continue
        if name in _SKIPPED_MODULES:
            continue
        _SKIPPED_MODULES.add(name)
        for value in vars(module).copy().values():
            if isinstance(value, type) and value.__module__ == name:
                todo.extend(vars(value).values())
            else:
                todo.append(value)
    seen: set[int] = set()
    while todo:
        item = todo.pop()
        if isinstance(item, (staticmethod, classmethod)):
            item = item.__func__
        wrapped = getattr(item, "__wrapped__", None)  # @contextmanager's generator function
        if wrapped is not None and not isinstance(item, types.CodeType):
            todo.append(wrapped)
        elif isinstance(item, property):
            todo.extend(f for f in (item.fget, item.fset, item.fdel) if f is not None)
            continue
        code = getattr(item, "__code__", None) if not isinstance(item, types.CodeType) else item
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        if not code.co_filename.startswith(_OUR_DIR):
            continue
        seen.add(id(code))
        skip_in_dynamo(code)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_SKIPPED_MODULES: set[str] = set()


def _leading_size(batch: Any, unread: dict[str, None] | None = None) -> int | None:
    """Samples in a batch: the first dimension of its first tensor, found without user code.

    Looks into tensors, plain tuples/lists, dicts and ``UserDict``-style mappings (Hugging Face's
    ``BatchEncoding`` keeps its dict in ``.data``); anything else is left alone, so no
    ``__len__`` or property of the user's runs. Nested tensors count their components. Types are
    read with ``type()`` (``isinstance`` may read a ``__class__`` property), and a tensor's size
    with torch-function handling off: a Tensor subclass's ``__torch_function__`` and the cell's
    torch-function modes never see our reading. A subclass of the user's with its own
    ``__torch_dispatch__`` may compute its sizes there: it is skipped, its type name put in
    ``unread``. Never raises (None: not known).

    Every lean step reads its batch too: a plain tensor (no torch-function mode on, so nothing
    of the user's can see the reading) is read here, with no call of ours.
    """
    import torch

    plain = None if torch._C._is_torch_function_mode_enabled() else torch.Tensor
    try:
        for _ in range(3):  # a (inputs, targets) pair of dicts, at most three levels deep
            kind = type(batch)
            if kind is plain and not batch.is_nested:
                return batch.shape[0] if batch.ndim else None
            if issubclass(kind, torch.Tensor):
                return _tensor_leading_size(batch, kind, torch, unread)
            # (the call only where the first item could begin a list of samples)
            if (
                kind is list
                and type(batch[0] if batch else None) in (tuple, dict)
                and _sample_list(batch)
            ):
                return len(batch)
            if kind in (tuple, list):
                # A loop, not a generator: this runs for every batch of a timed step.
                for item in batch:
                    if issubclass(type(item), (torch.Tensor, tuple, list, dict)):
                        break
                else:
                    return None
                if not issubclass(type(item), torch.Tensor):
                    batch = item
                    continue
                # The first dimension the batch's tensors share; None where two differ: such
                # a batch has no one count of samples (a graph batch of node features, edge
                # index, node owners and per-graph labels; time-major source and target of
                # different lengths). Inline: every step, lean or timed, reads it.
                size = None
                for item in batch:
                    kind = type(item)
                    if kind is plain and not item.is_nested:
                        n = item.shape[0] if item.ndim else None
                    elif not issubclass(kind, torch.Tensor):
                        continue
                    else:
                        n = _tensor_leading_size(item, kind, torch, unread)
                    if n is None:
                        continue
                    if size is not None and n != size:
                        return None
                    size = n
                return size
            elif issubclass(kind, dict):
                batch = next(iter(dict.values(batch)), None)
            else:
                try:
                    data = object.__getattribute__(batch, "__dict__").get("data")
                except AttributeError:
                    return None
                if type(data) is not dict:
                    return None
                batch = next(iter(dict.values(data)), None)
    except Exception:  # noqa: BLE001 -- a batch we cannot read has no size; the loop goes on
        return None
    return None


# A batch is counted this far (a dict of many fields is still "many storages"), so the count
# stays a few type() checks whatever the batch holds.
_BATCH_TENSORS_MAX = 64


def _batch_tensors(batch: Any) -> int | None:
    """Tensors a batch holds, looking into plain tuples/lists and dicts (and ``UserDict``-style
    mappings' ``.data``) at most three levels deep, as ``_leading_size`` reads them: types with
    ``type()``, no user code. At most ``_BATCH_TENSORS_MAX``. Never raises (None: no tensor
    found, or a batch we cannot read)."""
    import torch

    count = 0
    todo: list[tuple[Any, int]] = [(batch, 0)]
    try:
        while todo and count < _BATCH_TENSORS_MAX:
            item, depth = todo.pop()
            kind = type(item)
            if issubclass(kind, torch.Tensor):
                count += 1
            elif depth >= 3:
                continue
            elif kind in (tuple, list):
                todo.extend((x, depth + 1) for x in item)
            elif issubclass(kind, dict):
                todo.extend((x, depth + 1) for x in dict.values(item))
            else:
                try:
                    data = object.__getattribute__(item, "__dict__").get("data")
                except AttributeError:
                    continue
                if type(data) is dict:
                    todo.extend((x, depth + 1) for x in dict.values(data))
    except Exception:  # noqa: BLE001 -- a batch we cannot read has no count; the loop goes on
        return None
    return count or None


def _sample_list(batch: list[Any]) -> bool:
    """A list of samples, not a collated batch: every item a plain tuple, or every item a plain
    dict (``collate_fn=lambda b: b``, a loop that then runs the model sample by sample). The
    default collate never makes one: tuples collate to a list of stacked fields, dicts to one
    dict. Read as the fields of one sample, the first field's length was taken for the batch
    (issue 26, unseen round 9: "batch 15" for 16 sequences, the first 15 tokens long, and a
    bigger batch's trial read per sample from it: "0.10x, slower")."""
    if len(batch) < 2:
        return False
    first = type(batch[0])
    if first is not tuple and first is not dict:
        return False
    for item in batch:  # noqa: SIM110 -- a loop, not a generator: this runs every timed step
        if type(item) is not first:
            return False
    return True


def _tensor_leading_size(
    tensor: Any, kind: type, torch: Any, unread: dict[str, None] | None = None
) -> int | None:
    own_dispatch = getattr(kind, "__torch_dispatch__", None) is not torch.Tensor.__torch_dispatch__
    if own_dispatch and not kind.__module__.startswith("torch."):  # torch's own: NestedTensor
        if unread is not None:
            unread[kind.__name__] = None
        return None
    with torch._C.DisableTorchFunction():
        if torch.Tensor.is_nested.__get__(tensor):
            return int(torch.Tensor.size(tensor, 0))
        return int(torch.Tensor.size(tensor, 0)) if torch.Tensor.dim(tensor) > 0 else None


class _QuietHandle:
    """Our hook, put straight into one of torch's global hook dicts under a key of our own.

    torch's ``register_*_hook`` functions number hooks from one counter shared by every hook in
    the process (``RemovableHandle.next_id``): registering ours would shift the ids of every
    hook the user registers afterwards, and with them the keys of their modules' hook dicts,
    and so the bytes of ``pickle.dumps(model)`` / ``torch.save(model)``.
    """

    def __init__(self, hooks: dict[Any, Any], fn: Callable[..., Any]) -> None:
        self._hooks = hooks
        self._key = ("gpu_notebook", id(self))
        hooks[self._key] = fn

    def remove(self) -> None:
        self._hooks.pop(self._key, None)


def _global_optimizer_hook(optim_mod: Any, when: str, fn: Callable[..., Any]) -> Any:
    hooks = getattr(optim_mod, f"_global_optimizer_{when}_hooks", None)
    if isinstance(hooks, dict):
        return _QuietHandle(hooks, fn)
    register = getattr(optim_mod, f"register_optimizer_step_{when}_hook")  # older torch
    return register(fn)


# Clocks installed in this process. A child the code forks (os.fork, a fork-started worker that
# trains) inherits our hooks but none of our threads, and the capture reports from the parent:
# in the child every hook turns inert at once (a hook reaching a lock a parent thread held at
# the fork, or starting a profiler there, would hang it).
_CLOCKS: weakref.WeakSet[StepClock] = weakref.WeakSet()
_FORK_HOOK = False


def _watch_forks(clock: StepClock) -> None:
    global _FORK_HOOK
    _CLOCKS.add(clock)
    if not _FORK_HOOK and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_children_before_fork, after_in_child=_inert_after_fork)
        _FORK_HOOK = True


_CHILDREN_NAMED = 8  # children named one by one in a note


def _child_words(row: ChildProcessSteps, here: int) -> str:
    """'pid N: 10 in 0.05 s (5.0 ms a step; forward and the rest 60%, ...: bound by ...)'."""
    under = f" (a grandchild, under pid {row.parent_pid})" if row.parent_pid != here else ""
    if row.steps < 2 or row.span_s <= 0:
        return f"pid {row.pid}{under}: {row.steps}"
    phases = sorted(row.phases_s().items(), key=lambda kv: -kv[1])
    shares = ", ".join(f"{name} {100 * t / row.span_s:.0f}%" for name, t in phases)
    return (
        f"pid {row.pid}{under}: {row.steps} in {row.span_s:.2f} s "
        f"({row.span_s / (row.steps - 1) * 1e3:.1f} ms a step; {shares}: bound by {phases[0][0]})"
    )


def _children_before_fork() -> None:
    """In the parent, just before a fork: the table its children write their steps into.

    The children's table (a memfd, numbered high, close-on-exec, closed at ``uninstall``;
    children.py), made at the first fork or spawn while a clock is installed, so a cell that
    never starts a process pays nothing.
    """
    for clock in list(_CLOCKS):
        if clock._installed and not clock._in_child:
            clock._table.fd()


def _inert_after_fork() -> None:
    import sys

    tables = set()
    for clock in list(_CLOCKS):
        fd = clock._table._fd
        if fd is not None and not clock._in_child:
            tables.add(fd)
        clock._in_child = True  # its optimizer steps go to the parent's table (a ChildSteps)
        clock._tid = -1  # no thread has this id: every hook returns at its first check
        clock.follow_threads = False
        clock.boundary_listener = None
        clock.anchor_listener = None
        clock.read_waits = False
        clock.read_stalls = False
        clock._inert.update(("dataloader", "backward", "grad"))
    _CLOCKS.clear()
    for fd in tables:
        with contextlib.suppress(Exception):  # the child runs as without us, uncounted
            children.ChildSteps(fd, children.FORKED).hook(sys.modules)
