"""Run the script as it is and each offered fix's patched copy, interleaved, under a budget.

After the planned rounds, a fix still undecided (its interval holds both 1x and its predicted
gain) gets added rounds, the script as it is beside it, while the budget allows and up to a cap,
until it is decided (``sequential``: the rule and its correction for repeated looks).

Steps are counted as the notebook's before/after counts them (one rule,
``analysis.interference.counted_step_times``): each step's own time (its wall time less its
thread's wait for a core, which every child reads) where every run of both arms had as many
processes below it; wall times for a fix that adds processes (loader workers: the wait their CPU
causes is its cost) or where a wait was not read. ``FixTrial.own_time`` says which.

A fix's range is read with the trial's own run-to-run margin, what its planned runs of the
script as it is differed by (``base_margin``; the profiled run's where there is no pair of them),
not the margin of the one run the report profiled: its planned look's interval is widened by it,
and its stated range (``FixTrial.predicted_low``/``predicted_bound``) is the model's widened by
it. ``FixTrial.margin_source``/``margin_runs`` say which, from how many runs.

Every run is a fresh process (``tryfix.child``): a fix that rebinds a loader or compiles the
model cannot leak into the next run, and a variant that breaks takes only its own process down.
A run is stopped at a time limit (``RUN_TIMEOUT_FACTOR`` times the slowest run so far, at least
``MIN_RUN_TIMEOUT_S``, or what is left of the budget where that is less). The limit bounds the
run up to its result; its exit (loader workers, a pin-memory thread, CUDA's teardown) is timed
and bounded apart and never costs the run its steps (``run_child``). A fix stopped in its
warm-up (its compile, its workers' start-up: the child marks the warm-up's end) is run once more
with what is left of the budget, and if that also runs out it is "not measured", never "broke
the script"; so is one stopped in its timed steps after a warm-up that took half its limit or
more (its timed steps then get the usual limit after such a warm-up). One stopped in its timed
steps otherwise, or by the budget's end, is "not measured" too, the
reason said: "slower" comes only from measured steps. Only an error is "broke the script". A run
is not started where what is left of the budget cannot hold it (a fix's own runs' median, else
the script's run): the fix is said to be short of runs for the budget. The script as it is runs
only beside a fix still measured: with none kept (the budget holds no fix's runs beside its own)
or every kept one broken or ended early, nothing more is run. Every run's record (how it
ended, its limit, when its first step and warm-up ended, its steps, its exit) is kept in
``TryFixes.runs``.

Patched copies are written into a 0700 scratch folder (files 0600) that is removed at the end;
the user's script is only read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpu_notebook.analysis.compare_samples import RUN_TO_RUN
from gpu_notebook.analysis.interference import counted_step_times
from gpu_notebook.analysis.like_work import like_work
from gpu_notebook.records import (
    TOO_SMALL_TO_MEASURE,
    Finding,
    FixTrial,
    FixTrialVerdict,
    Report,
    TrialRun,
    TrialSaid,
    TryFixes,
)
from gpu_notebook.rules.common import FEW_STEPS
from gpu_notebook.tryfix import DEFAULT_ROUNDS
from gpu_notebook.tryfix import said as S
from gpu_notebook.tryfix.base_margin import (
    MIN_MARGIN_RUNS,
    TrialMargin,
    restated,
    too_small_here,
)
from gpu_notebook.tryfix.child import stacks_file, warm_marker
from gpu_notebook.tryfix.plan import (
    BASELINE,
    RunSize,
    Variant,
    declined,
    offered_variants,
    run_size,
    schedule,
    unmeasurable,
)
from gpu_notebook.tryfix.sequential import MAX_ADDED_ROUNDS, Decision, decide, rounds_to_decide

__all__ = ["DEFAULT_ROUNDS", "MIN_ROUNDS", "RunResult", "TrialSettings", "run_child", "try_fixes"]

MIN_ROUNDS = 2  # fewer than this per arm measures nothing: the fix is skipped
TRIAL_WARMUP_STEPS = 5  # worker start-up, compilation, cuDNN autotuning, allocator growth
# A run may take this many times the slowest run seen so far before it is stopped.
RUN_TIMEOUT_FACTOR = 4.0
MIN_RUN_TIMEOUT_S = 60.0
# The first trial run's own step sizes the runs again where it asks this many times more (or
# fewer) steps than the measured run's step did: the profiled run's steps can be many times the
# plain ones (plain_logging's: 20x), and a run sized on them would be as short as before.
RESIZE_FACTOR = 1.5


@dataclass(frozen=True)
class TrialSettings:
    steps: int
    budget_s: float
    warmup: int = TRIAL_WARMUP_STEPS
    rounds: int = DEFAULT_ROUNDS


# How a run ended: "stopped" at the step boundary with its steps; "finished" on its own (the
# script's end); "error"; "limit": stopped at its time limit, its result written (how far it
# got); "killed": stopped at its limit with no result written in ``LIMIT_GRACE_S``; "no result":
# it exited with none.
RunEnd = Literal["stopped", "finished", "error", "limit", "killed", "no result"]
# After a run's time limit, how long its script has to end where it is and write how far it got.
LIMIT_GRACE_S = 10.0
# After a run's result is written, how long its process has to exit (loader workers, a
# pin-memory thread, CUDA) before its process group is killed: its steps are kept either way.
EXIT_GRACE_S = 15.0
POLL_S = 0.05


@dataclass
class RunResult:
    steps_s: list[float] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)
    stopped: bool = False  # reached warm-up + steps and was stopped at the boundary
    timed_out: bool = False
    # Stopped at its time limit after its warm-up ended (False: in its warm-up, where a
    # compiled model compiles and workers start; True for a run that was not stopped so).
    warmed: bool = True
    wall_s: float = 0.0
    samples_per_step: int | None = None  # as the step clock read it at the end of the warm-up
    # Each step's thread wait for a core (aligned with steps_s; an entry None: not read; None:
    # not reported) and the processes below the run's (its loader's workers): what decides
    # whether its steps are compared as own times (analysis.interference.counted_step_times).
    waits_s: list[float | None] | None = None
    processes: int | None = None
    # Each step's work (aligned with steps_s: its closure's calls, its loader reads; an entry
    # None: not counted; None: not reported): steps of other work are compared with their like
    # (``analysis.like_work``).
    works: list[tuple[int, ...] | None] | None = None
    # Steps the run's step clock counted, warm-up included (None: not reported): a run that
    # ended on its own short of its warm-up and steps says how far it got.
    steps_seen: int | None = None
    # How it went (``TrialRun``): how it ended, the limit it had, from its start to its first
    # step's end and its warm-up's (None: not reached or not read), the steps a run stopped at
    # its limit had timed (never compared), and from its result written to its exit.
    ended: RunEnd = "stopped"
    limit_s: float = 0.0
    first_step_s: float | None = None
    warm_s: float | None = None
    partial_steps_s: list[float] = field(default_factory=list)
    exit_s: float | None = None
    exit_killed: bool = False
    exit_code: int | None = None
    # Where its threads were at its limit (one line per thread, innermost frames first; empty:
    # no limit came), and the last lines of its output where it did not end as planned.
    stacks: list[str] = field(default_factory=list)
    output_tail: list[str] = field(default_factory=list)

    @property
    def broke(self) -> bool:
        return bool(self.error_lines)


# (code path, script path, script args, timeout s, scratch dir, measured steps) -> its result
Runner = Callable[[Path, Path, Sequence[str], float, Path, int], RunResult]


def run_child(
    settings: TrialSettings,
    env: Mapping[str, str] | None = None,
) -> Runner:
    """A runner that starts ``python -m gpu_notebook.tryfix.child`` with this package first on
    its path, to its warm-up and the measured steps each call asks (``trials`` sizes them,
    ``plan.run_size``); the script's output goes to files in the scratch folder (their error is
    read back). The timeout bounds the run up to its result: past it the child is signalled to
    end where it is (``child.LIMIT_SIGNAL``) and say how far it got, and after ``LIMIT_GRACE_S``
    it is killed with its process group (its loader workers). Once its result is written its
    exit is timed apart and bounded by ``EXIT_GRACE_S``: a slow teardown never loses the run's
    steps nor counts as its time."""
    # The folder that holds the package (this file is <root>/gpu_notebook/tryfix/trials.py): not
    # read from the package root, whose __init__ is the IPython extension (magic and views).
    root = str(Path(__file__).resolve().parents[2])
    base_env = dict(os.environ if env is None else env)
    base_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, base_env.get("PYTHONPATH", "")) if p)
    counter = iter(range(1_000_000))

    def run(
        code: Path, script: Path, args: Sequence[str], timeout_s: float, scratch: Path, steps: int
    ) -> RunResult:
        n = next(counter)
        out = scratch / f"run{n}.json"
        log = scratch / f"run{n}.log"
        cmd = [sys.executable, "-m", "gpu_notebook.tryfix.child", str(out), str(settings.warmup),
               str(steps), str(code), str(script.resolve()), *args]  # fmt: skip
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as sink:
            started_unix = time.time()
            started = time.monotonic()
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                env=base_env, start_new_session=True,
            )  # fmt: skip
            try:
                limited, written, exit_killed = _watch(proc, out, started + timeout_s)
            finally:
                wall = time.monotonic() - started
                _kill_group_leftovers(proc.pid)
        exit_s = None if written is None else max(0.0, started + wall - written)
        stacks = thread_stacks(stacks_file(str(out))) if limited else []
        try:
            data = json.loads(out.read_text())
        except (OSError, ValueError):
            tail = output_tail(log)
            if limited:
                warmed = os.path.exists(warm_marker(str(out)))
                return RunResult(timed_out=True, warmed=warmed, wall_s=wall, ended="killed",
                                 limit_s=timeout_s, exit_code=proc.returncode, stacks=stacks,
                                 output_tail=tail)  # fmt: skip
            return RunResult(error_lines=[f"exit code {proc.returncode}", *tail[-3:]],
                             wall_s=wall, ended="no result", limit_s=timeout_s,
                             exit_code=proc.returncode, output_tail=tail)  # fmt: skip
        # The child's times are from its own start: moved to the run's (its interpreter's start).
        offset = _number(data.get("t0_unix"))
        offset = 0.0 if offset is None else max(0.0, offset - started_unix)
        first, warm = _number(data.get("first_step_s")), _number(data.get("warm_s"))
        said_end = data.get("ended")
        ended: RunEnd = said_end if said_end in _ENDS else "stopped"
        lines = list(data.get("error_lines") or [])
        # A non-zero exit after a run that ended its steps (a crash in its teardown) is kept in
        # its record, not read as the script broken: its steps were run and written.
        if (
            not lines
            and not exit_killed
            and proc.returncode not in (0, None)
            and ended
            not in (
                "limit",
                "stopped",
            )
        ):
            lines = [f"exit code {proc.returncode}"]
        return RunResult(
            steps_s=[float(x) for x in data.get("steps_s", [])],
            error_lines=lines,
            stopped=bool(data.get("stopped")),
            timed_out=ended == "limit",
            warmed=ended != "limit" or warm is not None,
            wall_s=wall,
            samples_per_step=_positive_int(data.get("samples_per_step")),
            waits_s=_waits(data.get("waits_s")),
            processes=_count(data.get("processes")),
            works=_works(data.get("works")),
            steps_seen=_count(data.get("steps_seen")),
            ended=ended,
            limit_s=timeout_s,
            first_step_s=None if first is None else first + offset,
            warm_s=None if warm is None else warm + offset,
            partial_steps_s=[float(x) for x in data.get("partial_steps_s") or []],
            exit_s=exit_s,
            exit_killed=exit_killed,
            exit_code=proc.returncode,
            stacks=stacks,
            output_tail=[] if ended == "stopped" and not exit_killed else output_tail(log),
        )

    return run


TAIL_LINES = 6  # of a run's output, in its record where it did not end as planned
_TAIL_CHARS = 240  # of each line
_STACK_THREADS = 8  # threads named in a run's record
_STACK_FRAMES = 4  # innermost frames of each


def output_tail(log: Path) -> list[str]:
    """The last lines of a run's output (its script's and ours, stdout and stderr together)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16_384))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    lines = [line.rstrip()[:_TAIL_CHARS] for line in text.splitlines() if line.strip()]
    return lines[-TAIL_LINES:]


def thread_stacks(path: str) -> list[str]:
    """faulthandler's dump of every thread at the limit, one line per thread: "current" for the
    thread the signal came to (the script's, unless it was blocked), its innermost frames
    first as file:line function, joined by " < "."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    threads: list[tuple[bool, list[str]]] = []
    for line in text.splitlines():
        head = line.strip()
        if head.endswith("first):"):  # a thread's header ("Current thread 0x..." for ours)
            threads.append((head.startswith("Current"), []))
        elif head.startswith("File ") and threads:
            # File "/a/b.py", line 12 in name
            where, _, name = head[5:].partition(" in ")
            file, _, lineno = where.partition(", line ")
            threads[-1][1].append(f"{os.path.basename(file.strip(chr(34)))}:{lineno} {name}")
    threads.sort(key=lambda t: not t[0])  # the current thread first
    return [
        ("current: " if current else "thread: ") + " < ".join(frames[:_STACK_FRAMES])
        for current, frames in threads[:_STACK_THREADS]
    ]


_ENDS = ("stopped", "finished", "error", "limit")


def _number(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]


def _watch(
    proc: subprocess.Popen[bytes], out: Path, deadline: float
) -> tuple[bool, float | None, bool]:
    """Wait for the run: (stopped at its limit, when its result was seen written (monotonic;
    None: never), its exit killed after ``EXIT_GRACE_S``). Past ``deadline`` with no result the
    child is signalled to end where it is (``child.LIMIT_SIGNAL``), then given ``LIMIT_GRACE_S``
    to write how far it got."""
    from gpu_notebook.tryfix.child import LIMIT_SIGNAL

    limited = False
    written: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        if written is None and out.exists():
            written = now
        if written is not None:
            if now - written > EXIT_GRACE_S:
                _kill_group(proc)
                return limited, written, True
        elif not limited and now >= deadline:
            limited = True
            if LIMIT_SIGNAL is None:
                _kill_group(proc)
                break
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, LIMIT_SIGNAL)
        elif limited and now >= deadline + LIMIT_GRACE_S:
            _kill_group(proc)
            break
        time.sleep(POLL_S)
    if written is None and out.exists():
        written = time.monotonic()
    return limited, written, False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _kill_group_leftovers(pgid: int, grace_s: float = 10.0) -> None:
    """A variant's loader workers outliving it would load the next run. They end on their own
    once the run's process is gone (cleaning their files up); what is still there after
    ``grace_s`` is killed (only the process group we started)."""
    deadline = time.monotonic() + grace_s
    try:
        while time.monotonic() < deadline:
            os.killpg(pgid, 0)  # raises once no process of the group is left
            time.sleep(0.05)
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def try_fixes(
    report: Report,
    script: Path,
    script_args: Sequence[str],
    settings: TrialSettings,
    runner: Runner | None = None,
    progress: Callable[[TrialSaid], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TryFixes:
    """Measure every fix the report offers against the script as it is (see module doc).
    ``clock`` (seconds) is what the budget is spent on. What it says comes up as records
    (``tryfix/said.py``: the progress callback's argument, ``said`` of the result and of each
    trial), worded by the views (``views/tryfix_text.word_trials``)."""
    runner = runner or run_child(settings)
    say = progress or (lambda _msg: None)
    variants = offered_variants(report)
    started = clock()
    notes: list[TrialSaid] = [declined_note(f) for f in declined(report)]
    notes += [not_tried_note(f) for f in unmeasurable(report)]
    short = _too_short(report.run.steps.step_count, settings)
    if variants and short is not None:
        # Every run would end inside its warm-up, or time too few steps to compare: no run is
        # spent, and no fix is said to have failed.
        notes += [S.RunTooShort(v.title, *short) for v in variants]
        return TryFixes(settings.warmup, settings.steps, 0, settings.budget_s, 0.0, (),
                        said=tuple(notes))  # fmt: skip
    if not variants:
        return TryFixes(settings.warmup, settings.steps, 0, settings.budget_s, 0.0, (),
                        said=(*notes, S.NothingToTry()))  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gpucheck-tryfix-") as tmp:
        scratch = Path(tmp)  # mkdtemp: 0700
        codes = [script.resolve()] + [_write_copy(scratch, i, script.name, v.source)
                                      for i, v in enumerate(variants, 1)]  # fmt: skip
        runs: dict[int, list[RunResult]] = {i: [] for i in range(len(codes))}
        broken: set[int] = set()
        # Fixes a run of which did not end its steps: in its warm-up twice, in its timed steps
        # at its limit, or at what was left of the budget: each "not measured", why said (a
        # stopped run is no sample: never "slower").
        ended_early: dict[int, TrialSaid] = {}
        retried: set[int] = set()
        # Fixes whose next run the budget could not hold (too few runs: said so).
        unaffordable: set[int] = set()
        every_run: list[TrialRun] = []

        def left() -> float:
            return settings.budget_s - (clock() - started)

        # A run's measured steps are sized by time (plan.run_size): first from the measured
        # run's median step, then from the first trial run's own.
        planned_runs = settings.rounds * (len(variants) + 1)

        def sized(step_s: float | None) -> RunSize:
            return run_size(settings.steps, step_s, settings.budget_s, planned_runs,
                            report.run.steps.step_count or None, settings.warmup)  # fmt: skip

        size = sized(report.analysis.step_stats.median_s)
        # The first baseline run sizes the plan: how many rounds of how many fixes fit.
        say(S.TryingBaseline(settings.warmup, size.steps))
        limit = max(1.0, left())
        first_asked = size.steps
        first = _limited(runner(codes[BASELINE], script, script_args, limit, scratch, size.steps),
                         limit)  # fmt: skip
        ended = _too_short(first.steps_seen, settings) if not first.stopped else None
        if not first.broke and not first.timed_out and ended is not None:
            # The script ended on its own before a run's steps (its arguments, its data): the
            # same for every fix, measured by none.
            notes += [S.RunTooShort(v.title, *ended) for v in variants]
            return TryFixes(settings.warmup, settings.steps, 0, settings.budget_s,
                            clock() - started, (), said=tuple(notes))  # fmt: skip
        if first.broke or first.timed_out or not first.steps_s:
            why = S.BaselineFailed(
                "timed out" if first.timed_out else "broke" if first.broke else "no steps",
                tuple(first.error_lines) if first.broke and not first.timed_out else (),
            )
            trials = tuple(_unmeasured(v, "not measured", why) for v in variants)
            return TryFixes(settings.warmup, size.steps, 0, settings.budget_s,
                            clock() - started, trials, said=(why,),
                            runs=(_run_record("", first, first_asked, False),))  # fmt: skip
        per_run = first.wall_s
        own_step = statistics.median(first.steps_s)
        own = sized(own_step)
        # Asked for far more steps than it ran, the first run was a pilot: it sizes the runs and
        # is not compared (a round of a short run beside sized ones is decided by one burst).
        pilot = own.steps > RESIZE_FACTOR * size.steps
        if pilot or own.steps * RESIZE_FACTOR < size.steps:
            per_run += max(0, own.steps - len(first.steps_s)) * own_step
            notes.append(_sized_note(own, len(first.steps_s) if pilot else None))
            size = own
        else:
            notes.append(_sized_note(dataclasses.replace(size, step_s=own_step), None))
        if not pilot:
            runs[BASELINE].append(first)
        rounds, kept = _fit(len(variants), per_run, left() + (0.0 if pilot else per_run),
                            settings.rounds)  # fmt: skip
        if kept < len(variants):
            notes.append(S.BudgetFixesCut(settings.budget_s, per_run, kept, len(variants), rounds))
        elif rounds < settings.rounds:
            notes.append(S.BudgetRoundsCut(settings.budget_s, rounds, settings.rounds))
        order = schedule(kept, rounds)[0 if pilot else 1 :]  # a kept first run is round 1's

        def arm_id(arm: int) -> str:
            return "" if arm == BASELINE else variants[arm - 1].finding.fix_id or f"fix{arm}"

        def record(arm: int, r: RunResult, usual_s: float) -> None:
            every_run.append(_run_record(arm_id(arm), r, size.steps, r.limit_s < usual_s))

        def run_arm(arm: int) -> bool:
            """Run one arm; False: the budget cannot take another run of it (said, not run)."""
            slowest = max([first.wall_s, *(r.wall_s for rs in runs.values() for r in rs)])
            usual = max(MIN_RUN_TIMEOUT_S, RUN_TIMEOUT_FACTOR * slowest)
            timeout = min(left(), usual)
            # What a run of this arm takes: a fix's own runs' median where it has run (one
            # that starts workers or compiles may take longer than the script: its first run
            # says so), else the script's.
            own = [r.wall_s for r in runs[arm] if not r.timed_out] if arm != BASELINE else []
            if timeout < (statistics.median(own) if own else min(per_run, slowest)):
                if arm != BASELINE:
                    unaffordable.add(arm)
                return False
            label = None if arm == BASELINE else variants[arm - 1].title
            say(S.Trying(label))
            result = _limited(runner(codes[arm], script, script_args, timeout, scratch,
                                     size.steps), timeout)  # fmt: skip
            record(arm, result, usual)
            warm_ate = _warmup_ate_limit(result)
            if (arm != BASELINE and result.timed_out and (not result.warmed or warm_ate)
                    and arm not in retried and left() > timeout):  # fmt: skip
                # Its warm-up ran out of time (a compile on a busy machine), or took so much of
                # its limit that its timed steps had less than half of it (hf_trainer's compile
                # at load 16: "timed steps not done in 60 s" after its warm-up): once more, with
                # what is left of the budget (its timed steps given the usual limit after a
                # warm-up as long as this one); what a run may take is not a fix's effect.
                retried.add(arm)
                timeout = left()
                if warm_ate and result.warm_s is not None:
                    timeout = min(timeout, result.warm_s + usual)
                say(S.Trying(label, retry_s=timeout))
                result = _limited(runner(codes[arm], script, script_args, timeout, scratch,
                                         size.steps), timeout)  # fmt: skip
                record(arm, result, max(usual, timeout))
            runs[arm].append(result)
            if arm == BASELINE:
                return True
            if result.broke:
                broken.add(arm)
            elif result.timed_out and timeout < usual and not (arm in retried and result.warmed):
                # The budget's remainder, not the run's usual limit, stopped it.
                ended_early[arm] = S.BudgetEndedRun(timeout, result.warmed,
                                                    len(result.partial_steps_s), size.steps,
                                                    per_run)  # fmt: skip
            elif result.timed_out and not result.warmed:
                ended_early[arm] = S.WarmupStalled(settings.warmup, timeout)
            elif result.timed_out:
                done = [x for r in runs[BASELINE] for x in r.steps_s]
                part = result.partial_steps_s
                ended_early[arm] = S.StepsUnfinished(
                    timeout, RUN_TIMEOUT_FACTOR, len(part), size.steps,
                    statistics.median(part) if part else None,
                    statistics.median(done) if done else None,
                )  # fmt: skip
            return True

        def compared(i: int) -> bool:
            """Whether fix ``i`` is still measured: kept, not broken, not ended early."""
            return i <= kept and i not in broken and i not in ended_early

        for arm in order:
            if arm in broken or arm in ended_early:
                continue
            if arm == BASELINE and not any(compared(i) for i in range(1, kept + 1)):
                # No fix is left to compare a run of the script with (none kept, or every kept
                # one broke or ended early): a run of it would measure nothing.
                continue
            if not run_arm(arm):
                notes.append(S.BudgetRanOut())
                break
        # Baseline runs each fix is read against: the planned ones, then those of the added
        # rounds it took part in (a prefix of them: a decided fix leaves the added rounds).
        paired = {i: len(runs[BASELINE]) for i in range(1, kept + 1)}

        def undecided(i: int) -> bool:
            d = _decide(runs[BASELINE][: paired[i]], runs[i], rounds, variants[i - 1])
            ended = i in broken or i in ended_early
            return not ended and d is not None and d.verdict == "undecided"

        open_ = [i for i in range(1, kept + 1) if undecided(i)]
        added = 0
        while open_ and added < MAX_ADDED_ROUNDS:
            arms = [BASELINE, *open_] if (rounds + added) % 2 == 0 else [*open_[::-1], BASELINE]
            typical = statistics.median(r.wall_s for rs in runs.values() for r in rs)
            if left() < len(arms) * typical or not all(run_arm(a) for a in arms):
                break
            added += 1
            for i in open_:
                paired[i] = len(runs[BASELINE])
            open_ = [i for i in open_ if undecided(i)]
        if open_:
            names = tuple(variants[i - 1].title for i in open_)
            notes.append(
                S.StillUndecided(added, names, added >= MAX_ADDED_ROUNDS, MAX_ADDED_ROUNDS)
            )
        trials = tuple(
            _unmeasured(v, "not measured", ended_early[i])
            if i in ended_early and i not in broken
            else _trial(v, runs[BASELINE][: paired[i]], runs[i], i in broken, rounds,
                        budget_out=i in open_ and added < MAX_ADDED_ROUNDS,
                        run_s=per_run if i in unaffordable else None) if i <= kept
            else _unmeasured(v, "skipped", S.BudgetNotReached())
            for i, v in enumerate(variants, 1)
        )  # fmt: skip
    first_record = _run_record("", first, first_asked, False)
    return TryFixes(settings.warmup, size.steps, rounds, settings.budget_s,
                    clock() - started, trials, said=tuple(notes),
                    runs=(first_record, *every_run))  # fmt: skip


# A run stopped in its timed steps whose warm-up had taken at least this share of its limit:
# its warm-up (a compile, workers' start-up), not its steps, used the limit.
WARMUP_ATE_SHARE = 0.5


def _warmup_ate_limit(r: RunResult) -> bool:
    """Whether a run stopped at its limit after its warm-up ended had spent at least
    ``WARMUP_ATE_SHARE`` of that limit in its warm-up (its record's ``warm_s``; not read: no)."""
    return (
        r.timed_out
        and r.warmed
        and r.warm_s is not None
        and r.limit_s > 0
        and r.warm_s >= WARMUP_ATE_SHARE * r.limit_s
    )


def _limited(r: RunResult, limit_s: float) -> RunResult:
    """The run with the limit it was given (a runner may leave it unsaid)."""
    return r if r.limit_s else dataclasses.replace(r, limit_s=limit_s)


def _run_record(arm: str, r: RunResult, asked: int, budget_limited: bool) -> TrialRun:
    ended = r.ended
    if r.timed_out and ended not in ("limit", "killed"):
        ended = "killed"
    steps = r.partial_steps_s if r.timed_out else r.steps_s
    return TrialRun(arm, ended, r.limit_s, budget_limited, r.wall_s, r.first_step_s, r.warm_s,
                    asked, len(steps), statistics.median(steps) if steps else None, r.exit_s,
                    r.exit_killed, r.exit_code, tuple(r.stacks),
                    tuple(r.output_tail))  # fmt: skip


def _sized_note(size: RunSize, pilot_steps: int | None) -> S.RunsSized:
    return S.RunsSized(size.steps, size.asked, size.step_s, size.target_s, size.held_by,
                       pilot_steps)  # fmt: skip


def _too_short(steps: int | None, settings: TrialSettings) -> tuple[int, int, int] | None:
    """(steps, warm-up, steps needed past it) where a run of ``steps`` steps ends before a
    trial run has its warm-up and the ``FEW_STEPS`` a comparison needs past it (as a report's
    bound needs them: ``rules._unsized``); None: long enough, or its steps not counted."""
    if steps is None or not 0 < steps < settings.warmup + FEW_STEPS:
        return None
    return steps, settings.warmup, FEW_STEPS


def declined_note(f: Finding) -> S.NoPatch:
    """Why a fix the report offers was left untried: no patch of the script could be written."""
    return S.NoPatch(f.title, f.proposal.refusal if f.proposal is not None else None)


def not_tried_note(f: Finding) -> S.BoundTooSmall:
    """Why a patch was left untried: its model's bound is within what two runs differ by (the
    model's ends, and the range a run may read, widened by the run's margin, beside them)."""
    return S.BoundTooSmall(f.title, f.gain_bound, f.gain_low, f.stated_high, f.stated_low,
                           RUN_TO_RUN)  # fmt: skip


def _fit(variants: int, per_run_s: float, budget_s: float, rounds: int) -> tuple[int, int]:
    """(rounds, fixes kept): as many rounds as asked if every fix fits, else fewer rounds down
    to ``MIN_ROUNDS``, then fewer fixes (the least important, last in the report, go first)."""
    runs_affordable = int(budget_s / max(per_run_s, 1e-3))
    for r in range(rounds, MIN_ROUNDS - 1, -1):
        if r * (variants + 1) <= runs_affordable:
            return r, variants
    kept = max(0, runs_affordable // MIN_ROUNDS - 1)
    return MIN_ROUNDS, min(variants, kept)


def _write_copy(scratch: Path, index: int, name: str, source: str) -> Path:
    folder = scratch / f"fix{index}"
    folder.mkdir(mode=0o700)
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(source)
    return path


def _unmeasured(v: Variant, verdict: str, note: TrialSaid) -> FixTrial:
    f = v.finding
    return FixTrial(f.fix_id or "", f.rule_id, v.title, f.stated_high, verdict,  # type: ignore[arg-type]
                    recommended=False, said=(note,), predicted_low=f.stated_low, predicted_margin=f.gain_margin,
                    profiled_margin=f.gain_margin,
                    predicted_model_bound=f.gain_bound, predicted_model_low=f.gain_low)  # fmt: skip


def _compared(
    base: list[RunResult], mine: list[RunResult], work: float = 1.0
) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...], bool]:
    """(the script's runs' step times, the fix's, whether they are own times): each finished
    run's steps, counted as the notebook's before/after counts them (own times where every
    step of every run carries its wait for a core and every run had as many processes below
    it, ``counted_step_times``), at one mix of work where steps do different work
    (``like_work``: LBFGS's 5-call and 1-call steps, a varying accumulation); the fix's per
    ``work`` (a step that does ``work`` times the script's work is read per the script's step:
    throughput, not step time)."""
    done = [r for r in base if r.steps_s and not r.broke]
    runs = done + [r for r in mine if r.steps_s and not r.broke]
    times, own = counted_step_times(
        [r.steps_s for r in runs], [r.waits_s for r in runs], [r.processes for r in runs]
    )
    arms = [0] * len(done) + [1] * (len(runs) - len(done))
    times = like_work(times, [r.works for r in runs], arms) or times
    fix = tuple(tuple(s / work for s in run) for run in times[len(done) :])
    return times[: len(done)], fix, own


def _waits(value: object) -> list[float | None] | None:
    if not isinstance(value, list):
        return None
    return [float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None
            for x in value]  # fmt: skip


def _works(value: object) -> list[tuple[int, ...] | None] | None:
    if not isinstance(value, list):
        return None
    return [tuple(x) if isinstance(x, list) and all(_count(n) is not None for n in x) else None
            for x in value]  # fmt: skip


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _work(v: Variant, base: list[RunResult], mine: list[RunResult]) -> float:
    """How many of the script's steps one step of the fix does: the samples a step of the fix
    takes over the script's, as the runs read them (a bigger batch's step is longer by design;
    samples/s is what it changes; folded micro-batches keep the samples of a step); without
    that reading, a bigger batch's factor, else 1."""
    read = (
        [r.samples_per_step for r in base if r.samples_per_step],
        [r.samples_per_step for r in mine if r.samples_per_step],
    )
    if read[0] and read[1]:
        return statistics.median(read[1]) / statistics.median(read[0])
    factor = v.finding.fix_params.get("factor") if v.finding.fix_id == "bigger_batch" else None
    return float(factor) if isinstance(factor, (int, float)) and factor > 0 else 1.0


def _decide(
    base: list[RunResult], mine: list[RunResult], planned: int, v: Variant
) -> Decision | None:
    base_steps, my_steps, _own = _compared(base, mine, _work(v, base, mine))
    busy = _planned_busy(base, mine, planned) is not None
    return decide(base_steps, my_steps, planned, v.finding.gain_low, busy=busy,
                  profiled_margin=v.finding.gain_margin)  # fmt: skip


def _planned_busy(
    base: list[RunResult], mine: list[RunResult], planned: int
) -> tuple[float, float] | None:
    """``_too_busy`` over the planned rounds' runs, the runs the planned look reads: the same
    runs whenever the fix is looked at, so the look that asked for added rounds and the trial's
    verdict after them agree (issue 26: a Lightning trial's first 2 runs read too busy,
    undecided, 2 rounds added; the 4 runs together read not busy, the planned look decided, and
    the trial said 2 rounds over 4 runs of steps each side)."""
    return _too_busy(base[:planned], mine[:planned])


def _wait_share(runs: list[RunResult]) -> float | None:
    """The median over ``runs`` of each one's wait for a core over its steps' wall time (the
    step clock's schedstat at every step end). None: a run's waits were not all read."""
    shares = []
    for r in runs:
        if r.broke or not r.steps_s:
            continue
        waits = r.waits_s
        wall_s = sum(r.steps_s)
        if waits is None or len(waits) != len(r.steps_s) or None in waits or wall_s <= 0:
            return None
        shares.append(sum(w or 0.0 for w in waits) / wall_s)
    return statistics.median(shares) if shares else None


def _too_busy(base: list[RunResult], mine: list[RunResult]) -> tuple[float, float] | None:
    """(the script's runs' wait share, the fix's) where either arm waited ``TOO_BUSY_WAIT`` of
    its steps' time for a core or more (as the notebook's before/after reads a pair, and a
    verdict calls too busy to judge), else None. Own times take out the loop thread's wait, not
    torch's other intra-op threads' (the children do not say how many ran): such arms are
    compared by their interleaved rounds' spread only (``samples.compare_runs``)."""
    from gpu_notebook.analysis.too_busy import TOO_BUSY_WAIT

    before, after = _wait_share(base), _wait_share(mine)
    if before is None or after is None or max(before, after) < TOO_BUSY_WAIT:
        return None
    return before, after


def _round_s(base: list[RunResult], mine: list[RunResult]) -> float | None:
    """What one more round of this fix takes: a run of each arm, at their median wall time."""
    walls = [r.wall_s for r in base + mine if r.wall_s > 0]
    return 2 * statistics.median(walls) if walls else None


def _trial(
    v: Variant,
    base: list[RunResult],
    mine: list[RunResult],
    broke: bool,
    planned: int,
    budget_out: bool = False,
    run_s: float | None = None,
) -> FixTrial:
    f = v.finding
    work = _work(v, base, mine)
    base_steps, my_steps, own = _compared(base, mine, work)
    if broke:
        bad = next(r for r in mine if r.broke)
        lines = tuple(bad.error_lines)
        return FixTrial(f.fix_id or "", f.rule_id, v.title, f.stated_high, "broke the script",
                        recommended=False, error_lines=lines, predicted_low=f.stated_low, predicted_margin=f.gain_margin,
                        profiled_margin=f.gain_margin, predicted_model_bound=f.gain_bound, predicted_model_low=f.gain_low, said=(S.PatchBroke(),))  # fmt: skip
    if len(my_steps) < MIN_ROUNDS or len(base_steps) < MIN_ROUNDS:
        few = S.TooFewRuns(len(my_steps), run_s is not None, run_s)
        return _unmeasured(v, "not measured", few)
    busy = _planned_busy(base, mine, planned)
    d = decide(base_steps, my_steps, planned, f.gain_low, busy=busy is not None,
               profiled_margin=f.gain_margin)  # fmt: skip
    if d is None:
        return _unmeasured(v, "not measured", S.TooFewSteps())
    short = [len(s) for s in my_steps + base_steps if len(s) < min(len(x) for x in base_steps)]
    notes: list[TrialSaid] = [S.RunEnded(min(short))] if short else []
    if busy is not None:
        notes.append(S.TooBusy(busy[0], busy[1], d.rounds))
    if work != 1.0:
        notes.append(S.PerSample(work))
    if d.verdict == "undecided":
        why: Literal["budget", "cap", "no round"] = (
            "budget" if budget_out else "cap" if d.added_rounds >= MAX_ADDED_ROUNDS
            else "no round"
        )  # fmt: skip
        need = rounds_to_decide(d.per_round, f.gain_low)
        notes.insert(0, S.Undecided(
            d.rounds, d.low, d.high, why, MAX_ADDED_ROUNDS,
            spread=need.spread if need else None, gain=need.gain if need else None,
            rounds_needed=need.rounds if need else None, round_s=_round_s(base, mine),
        ))  # fmt: skip
    elif d.added_rounds:
        notes.insert(0, S.DecidedAfter(d.added_rounds))
    verdict: FixTrialVerdict = d.verdict
    if (
        verdict not in ("verified", "slower")  # undecided, or no measurable effect
        and too_small_here(f, d.margin)
        and f.gain_bound is not None
    ):
        # Its whole gain is within the machine's noise here: said as that, with the numbers.
        # Decided or not, a look at a gain the runs cannot tell from none says nothing of the
        # fix (lbfgs_closure's log_every_n, up to 1.06x against runs 10% apart, read "no
        # measurable effect" beside a CI); a decided slowdown is still said as one.
        verdict = TOO_SMALL_TO_MEASURE
        notes.insert(0, S.TooSmallHere(f.gain_bound, f.gain_low, d.margin.margin,
                                       d.margin.runs, d.margin.source))  # fmt: skip
    notes.append(_margin_note(d.margin))
    # The range this trial reads: the model's, widened by what its runs of the script differed
    # by (the profiled run's where they were too few).
    stated = restated(f, d.margin)
    return FixTrial(
        f.fix_id or "", f.rule_id, v.title, stated.stated_high, verdict,
        recommended=verdict == "verified",
        speedup=d.speedup, speedup_low=d.low, speedup_high=d.high, per_round=d.per_round,
        baseline_steps_s=base_steps, variant_steps_s=my_steps, said=tuple(notes),
        predicted_low=stated.stated_low, predicted_margin=stated.gain_margin,
        margin_source=d.margin.source, margin_runs=d.margin.runs, profiled_margin=f.gain_margin,
        predicted_model_bound=f.gain_bound, predicted_model_low=f.gain_low,
        rounds=d.rounds, added_rounds=d.added_rounds, interval_level=d.level, own_time=own,
    )  # fmt: skip


def _margin_note(m: TrialMargin) -> S.MarginRead:
    return S.MarginRead(m.margin, m.source, m.runs, m.spread, m.profiled, MIN_MARGIN_RUNS)
