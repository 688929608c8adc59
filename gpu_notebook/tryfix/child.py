"""One trial run, in a process of its own: the script (or its patched copy) runs as ``python
script.py`` would, the step clock's global hooks time its steps, and the run stops at the step
boundary once it has its warm-up and measured steps.

Usage (by ``trials``)::

    python -m gpu_notebook.tryfix.child OUT.json WARMUP STEPS CODE_PATH SCRIPT_PATH [ARGS...]

``CODE_PATH`` is what runs (the patched copy in the scratch folder, or the script itself);
``SCRIPT_PATH`` is the user's script: ``__file__``, ``sys.argv[0]`` and ``sys.path[0]`` are
its, so a script that finds its data beside itself finds it from the copy too. The copy's path
names the code, so a traceback says which file failed.

Stopping: at the boundary that starts step ``WARMUP + STEPS`` the hook raises ``StopTrial``, a
``BaseException`` (a script's ``except Exception`` does not swallow it; Lightning and the HF
Trainer tear down and re-raise it). The step that just ended has been fully run: the optimizer
stepped, the loader handed its batch. Under torchrun every rank counts the same steps in
lockstep, so every rank stops at the same boundary.

The result file is written (whole, renamed into place) as soon as the script's run ends, before
the teardown (loader workers, a pin-memory thread, a process group, the interpreter's exit): the
parent reads it from then on and times and bounds the exit apart, so a slow exit never costs a
run its steps. At its time limit the parent sends ``LIMIT_SIGNAL``: the script's thread raises
``RunLimit`` where it is and the result says how far it got (``ended``: "limit", its timed steps
apart as ``partial_steps_s``, when its first step and its warm-up ended), and every thread's
stack at that moment goes into a file beside it (``stacks_file``: from the signal handler, so a
thread blocked in C is seen too). After the result, the workers of every DataLoader iterator
still alive are ended as ``del loader`` ends them (``_end_loader_workers``), not left to the
interpreter's exit hooks (torch up to 2.11 joins a pinned persistent loader's workers there
one at a time, 5 s each); a pin-memory thread is joined first, for at most ``PIN_JOIN_S``.

Beside each step's time the child reports its thread's wait for a core during it (the step
clock's schedstat reading at each step end; None where not read) and how many processes the
run had below it (DataLoader workers and any other children, counted at the end of the warm-up
and at the stop, outside the timed steps): ``trials`` then counts each step's own time where
both arms ran as many processes (``analysis.interference.counted_step_times``).
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

from gpu_notebook.exception_text import exception_message
from gpu_notebook.script_module import compile_file, fresh_main

ERROR_LINES = 4  # of a broken variant's error, in the report


class StopTrial(BaseException):
    """Raised at the step boundary once the trial has its steps."""


class RunLimit(BaseException):
    """Raised in the script's thread when the parent signals its time limit (``LIMIT_SIGNAL``):
    the run ends where it is, and its result still says how far it got (the steps it timed,
    when its warm-up ended) instead of a kill leaving nothing."""


# The parent's "your time is up" (not SIGTERM or SIGINT: frameworks catch those to save and
# carry on; SIGUSR2 is left to the script by torch, Lightning and the HF Trainer).
LIMIT_SIGNAL = getattr(signal, "SIGUSR2", None)


class Recorder:
    """Boundary times of the current anchor's steps; raises ``StopTrial`` when enough are in."""

    def __init__(self, clock: Any, warmup: int, steps: int, warm_marker: str | None = None) -> None:
        self._clock = clock
        # A file made once the warm-up has ended: a run stopped at its time limit tells from it
        # whether its warm-up (compilation, worker start-up) or its timed steps ran out of time.
        self._warm_marker = warm_marker
        self._warmup = warmup
        self._steps = steps
        self.boundaries: list[tuple[int, int]] = []  # (steps completed, perf_counter ns)
        # When the first step ended and when the warm-up did (perf_counter ns; None: not yet):
        # a run stopped at its limit says which of its start-up, warm-up or steps took the time.
        self.first_ns: int | None = None
        self.warm_ns: int | None = None
        self.anchor = "none"
        # Samples a step takes, read at the end of the warm-up (before the clock goes lean):
        # a fix that changes them (a bigger batch, folded micro-batches) is read per sample.
        self.samples_per_step: int | None = None
        # The most processes below this one seen at the end of the warm-up or at the stop.
        self.processes: int | None = None

    def on_boundary(self, count: int) -> None:
        if count == max(0, self._warmup - 1):
            # In the last warm-up step: its time and any wait for a core it meets are untimed.
            self.count_processes()
        now = time.perf_counter_ns()
        if self._clock.anchor != self.anchor or (
            self.boundaries and count <= self.boundaries[-1][0]
        ):
            # A new anchor restarts the count: what came before was warm-up.
            self.boundaries = []
            self.anchor = self._clock.anchor
            if self._clock.is_lean:
                # Gone lean at the old anchor's warm-up (LBFGS: 5 backward calls in its first
                # step), its hooks for a lower anchor's steps (a closure's calls uncounted,
                # each step read as doing none): timed again, lean at this anchor's warm-up.
                self._clock.retime()
        self.boundaries.append((count, now))
        if count >= 1 and self.first_ns is None:
            self.first_ns = now
        if count == self._warmup:
            self.warm_ns = now
            self.samples_per_step = self._clock.samples_per_step
            self._mark_warm()
            self._clock.lean()  # only the step-ending hook from here: both arms pay the same
        if count >= self._warmup + self._steps:
            self.count_processes()  # the last timed step ended at ``now``
            raise StopTrial

    def _mark_warm(self) -> None:
        if self._warm_marker is None:
            return
        # On an error the run goes on; a time-out then reads as in its warm-up.
        with contextlib.suppress(OSError):
            os.close(os.open(self._warm_marker, os.O_WRONLY | os.O_CREAT, 0o600))
        self._warm_marker = None

    def count_processes(self) -> None:
        """Every process below this one now (a loader's workers live while its iterator does)."""
        import psutil

        try:
            n = len(psutil.Process().children(recursive=True))
        except psutil.Error:
            return
        self.processes = max(n, self.processes or 0)

    def _timed(self) -> list[int]:
        """Indices into ``boundaries`` that start a timed step (k >= warm-up, k + 1 follows)."""
        b = self.boundaries
        return [
            i for i in range(len(b) - 1) if b[i][0] >= self._warmup and b[i + 1][0] == b[i][0] + 1
        ]

    def timed_steps(self) -> int:
        """Timed steps ended so far (past the warm-up)."""
        return len(self._timed())

    def step_times_s(self) -> list[float]:
        """Step k lasts from the boundary after k steps to the one after k + 1 (k >= warm-up)."""
        b = self.boundaries
        return [(b[i + 1][1] - b[i][1]) / 1e9 for i in self._timed()]

    def step_waits_s(self, waits: dict[int, float | None]) -> list[float | None]:
        """Each timed step's wait for a core, from the clock's steps by index (``waits``): step k
        is the clock's step k, closed at the boundary after k + 1 steps."""
        return [waits.get(self.boundaries[i][0]) for i in self._timed()]

    def step_works(self, works: dict[int, tuple[int, ...] | None]) -> list[tuple[int, ...] | None]:
        """Each timed step's work (its closure's calls, its loader reads; None: not counted),
        from the clock's steps by index as ``step_waits_s`` reads their waits."""
        return [works.get(self.boundaries[i][0]) for i in self._timed()]


def _run(code_path: str, script_path: str, argv: list[str]) -> None:
    code = compile_file(code_path)
    module = fresh_main(script_path)
    sys.modules["__main__"] = module
    sys.argv = [script_path, *argv]
    sys.path[0] = os.path.dirname(script_path)
    _spawned_children_run(code_path, script_path)
    exec(code, module.__dict__)


def _spawned_children_run(code_path: str, script_path: str) -> None:
    """A child started by spawn or forkserver (a loader's workers under
    ``multiprocessing_context="spawn"``, Python 3.14's default forkserver, ``mp.spawn``) first
    runs ``__main__``'s file as ``__mp_main__``: here that would be the user's script, not the
    patched copy that runs, so its workers would unpickle the script's unpatched classes (and an
    unguarded script would train again in each). They run the code that runs, as ``python
    copy.py`` would have them."""
    import multiprocessing.spawn as mp_spawn

    original = mp_spawn.get_preparation_data
    script = os.path.normpath(os.path.abspath(script_path))

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        if data.get("init_main_from_path") == script:
            data["init_main_from_path"] = os.path.normpath(os.path.abspath(code_path))
        return data

    mp_spawn.get_preparation_data = get_preparation_data


def _error_lines(exc: BaseException) -> list[str]:
    """The exception's own lines first, then where it was raised (the innermost frame)."""
    head = traceback.format_exception_only(type(exc), exc)
    lines = [line.rstrip() for chunk in head for line in chunk.splitlines() if line.strip()]
    if len(lines) > 2:
        # A wrapped error (a loader worker's, a rank's) ends with the original's own line.
        lines = [lines[0], lines[-1]]
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        lines.append(f"at {os.path.basename(last.filename)}:{last.lineno}: {last.line or ''}")
    return lines[:ERROR_LINES]


def warm_marker(out: str) -> str:
    """The file a run makes beside its result once its warm-up has ended."""
    return out + ".warm"


def _on_limit(_signum: int, _frame: object) -> None:
    raise RunLimit


def stacks_file(out: str) -> str:
    """The file a run stopped at its limit writes its threads' stacks into, beside its result."""
    return out + ".stacks"


_STACKS: list[Any] = []  # the open stacks file (faulthandler writes to its descriptor)


def _stacks_at_limit(out: str) -> None:
    """At the limit signal, every thread's stack goes into ``stacks_file(out)`` at once, from
    the signal handler itself (faulthandler), before the script's thread raises ``RunLimit``
    (chained): a thread blocked in C (a loader's queue, a CUDA call, a join) never reaches the
    Python handler, and the run is then killed with no result, but its stacks say where it
    was. The file stays empty unless the limit comes."""
    if LIMIT_SIGNAL is None:
        return
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        fd = os.open(stacks_file(out), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        f = os.fdopen(fd, "w")
        _STACKS.append(f)
        faulthandler.register(LIMIT_SIGNAL, file=f, all_threads=True, chain=True)


def _write_result(out: str, result: dict[str, Any]) -> None:
    """Written whole (a temporary file renamed): the parent reads it as soon as it exists, while
    this process still tears down (loader workers, a pin-memory thread, CUDA), so a slow exit
    never loses the run's steps."""
    tmp = out + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(result, f)
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    out, warmup, steps, code_path, script_path, *script_args = argv
    from gpu_notebook.capture.stepclock import StepClock

    t0 = time.perf_counter_ns()
    t0_unix = time.time()
    clock = StepClock(t0)
    recorder = Recorder(clock, int(warmup), int(steps), warm_marker(out))
    clock.boundary_listener = recorder.on_boundary
    clock.install()
    result: dict[str, Any] = {"error": None, "error_lines": [], "stopped": False}
    code = 0
    ended = "finished"  # the script ran to its end on its own
    if LIMIT_SIGNAL is not None:
        signal.signal(LIMIT_SIGNAL, _on_limit)
        _stacks_at_limit(out)
    try:
        _run(code_path, script_path, script_args)
    except StopTrial:
        result["stopped"] = True
        ended = "stopped"
    except RunLimit:
        ended = "limit"
    except SystemExit as exc:
        if exc.code not in (None, 0):
            result["error"] = f"SystemExit: {exc.code}"
            result["error_lines"] = [result["error"]]
            code = 1
            ended = "error"
    except BaseException as exc:  # noqa: BLE001 - the variant broke: its error is the result
        traceback.print_exc()
        result["error"] = f"{type(exc).__name__}: {exception_message(exc)}"
        result["error_lines"] = _error_lines(exc)
        code = 1
        ended = "error"
    finally:
        if LIMIT_SIGNAL is not None:
            with contextlib.suppress(RuntimeError, ValueError):
                faulthandler.unregister(LIMIT_SIGNAL)
            signal.signal(LIMIT_SIGNAL, signal.SIG_IGN)  # the result is being written
        clock.uninstall()
    end_ns = time.perf_counter_ns()
    result["ended"] = ended
    result["wall_s"] = (end_ns - t0) / 1e9
    # Since this process's start (its interpreter's, read as the parent's clock reads it).
    result["t0_unix"] = t0_unix
    result["first_step_s"] = None if recorder.first_ns is None else (recorder.first_ns - t0) / 1e9
    result["warm_s"] = None if recorder.warm_ns is None else (recorder.warm_ns - t0) / 1e9
    result["anchor"] = recorder.anchor
    timed = recorder.step_times_s()
    # A run stopped at its limit keeps its timed steps apart: they say how far it got, and are
    # never compared (a partial run is not a sample of the fix).
    result["steps_s"] = timed if ended != "limit" else []
    result["partial_steps_s"] = timed if ended == "limit" else []
    result["steps_seen"] = recorder.boundaries[-1][0] if recorder.boundaries else 0
    if clock.anchor == recorder.anchor and ended != "limit":
        clock_steps = clock.record().steps
        waits = {s.index: s.wait_s for s in clock_steps}
        result["waits_s"] = recorder.step_waits_s(waits)
        # What each step did, counted lean: steps of other work are compared with their like
        # (``analysis.like_work``: LBFGS's 5-call and 1-call steps).
        from gpu_notebook.analysis.like_work import step_work

        works = {s.index: step_work(s) for s in clock_steps}
        result["works"] = recorder.step_works(works)
    if recorder.processes is None:
        recorder.count_processes()  # the script ended before its warm-up did
    result["processes"] = recorder.processes
    result["samples_per_step"] = recorder.samples_per_step
    _write_result(out, result)
    # The teardown after the result: the parent times it (a run's exit) and bounds it.
    _close_group()
    gc.collect()  # the stopped loop's frames hold its loader iterator: its workers end now
    _end_loader_workers()
    return code


def _end_loader_workers() -> int:
    """End the workers of every DataLoader iterator still alive (a loader with
    ``persistent_workers`` keeps its iterator, as does a script's ``it = iter(loader)``) the way
    ``del loader`` would: torch tells every worker to stop, then joins them, so they end
    together. Left to the interpreter's exit, torch up to 2.11 joins each persistent worker of a
    pinned loader from an ``atexit`` hook, one after the other, each with a 5 s timeout and none
    told to stop (pytorch#81794): the workers fix's 12 workers on a 16-core H100 made its exit
    ~60 s, and before the result came ahead of the exit that lost the run (issue 26). Returns
    how many iterators were ended."""
    module = sys.modules.get("torch.utils.data.dataloader")
    kind = getattr(module, "_MultiProcessingDataLoaderIter", None)
    if not isinstance(kind, type):
        return 0
    # type(), not isinstance(): a proxy's ``__class__`` is user code.
    live = [o for o in gc.get_objects() if issubclass(type(o), kind)]
    ended = 0
    for it in live:
        if getattr(it, "_shutdown", True):
            continue
        with contextlib.suppress(Exception):  # the script's loader; we are exiting anyway
            _end_pin_thread(it)
            it._shutdown_workers()
            ended += 1
    return ended


# How long a loader's pin-memory thread, told to stop, has to end: torch joins it with no
# timeout (``_shutdown_workers``), and one blocked in a pinned host allocation or a copy (a CUDA
# call: it sees its stop event only between batches) would hold the exit up to the parent's cap
# (``trials.EXIT_GRACE_S``), the workers not yet told to stop. Once told it ends within its
# queue's next poll (0.1 s to 5 s: torch's ``MP_STATUS_CHECK_INTERVAL``, the workers' own join
# timeout); past this it is left, a daemon thread the interpreter's exit does not wait for.
PIN_JOIN_S = 5.0


def _end_pin_thread(it: Any) -> bool:
    """Stop a loader iterator's pin-memory thread as torch's ``_shutdown_workers`` does (its
    stop event set, a wake-up put on the queue it reads, then joined, that queue closed), the
    join bounded by ``PIN_JOIN_S``, and take it off the iterator so torch's own join (no
    timeout) is skipped and it goes on to end the workers. Torch starts the thread only with an
    accelerator (``pin_memory=True`` on a CPU-only machine makes none). Returns whether the
    thread ended (True where there was none)."""
    thread = it.__dict__.get("_pin_memory_thread")
    if thread is None:
        return True
    it._pin_memory_thread_done_event.set()
    queue = it._worker_result_queue
    queue.put((None, None))  # it may be waiting on the queue: woken, it sees the event
    thread.join(PIN_JOIN_S)
    del it._pin_memory_thread  # torch's unbounded join skipped
    queue.cancel_join_thread()  # our wake-up never holds the exit if the thread is not reading
    queue.close()
    return not thread.is_alive()


def _close_group() -> None:
    """A torchrun rank stopped mid-training leaves its process group up: close it."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - the group may already be half gone; we are exiting
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
