"""Words of the run-shape rules (rules/run_shape.py): the whole run rather than its typical step."""

from __future__ import annotations

from gpu_notebook.analysis.steady import STALL_FACTOR
from gpu_notebook.cell.blocks import PROFILER_SETTING
from gpu_notebook.formatting import fmt_bytes, fmt_gain, fmt_seconds, fmt_share
from gpu_notebook.records import OwnTime, ProfileWindow
from gpu_notebook.rules.run_shape import (
    Drift,
    Jitter,
    MemoryCreep,
    PeriodicStall,
    WindowUnrepresentative,
)
from gpu_notebook.rules.syncs import EVERY
from gpu_notebook.words.common import (
    PROFILER_CYCLE,
    PROFILER_CYCLE_FIX,
    Words,
    instead,
    place,
    rarer,
    worder,
    words,
)

_SOURCE = "gpu_notebook's own levels (rules/run_shape.py), from the step clock's every step"


def window_cut_short(window: ProfileWindow) -> str | None:
    """The line that says the window recorded fewer steps than ``-s`` asked, and why; None when
    it recorded them all or stopped for another reason (the cell ended, a profiler of its own)."""
    if window.status != "recorded" or window.stopped_at_cpu_s is None:
        return None
    return (
        f"Profiler window: {window.recorded_steps} of the {window.profile_steps} steps asked "
        f"(-s): it stops once its steps took {fmt_seconds(window.stopped_at_cpu_s)} of the "
        "thread's CPU, to bound what profiling costs (the budget grows with the steps asked)"
    )


def read_where(own: OwnTime | None) -> str:
    """Where the steps' waits for a core were read: at every step end, or after slow steps."""
    if own is None or own.every_step:
        return "read at every step end"
    return "read after every slow step; the shorter steps, unread, count their wall time"


_PHASE_WORK = {
    "data": "waiting for the DataLoader",
    "forward": "model calls outside backward (validation, evaluation, the forward itself)",
    "backward": "backward",
    "optimizer": "the optimizer step",
    "other": "work outside the training ops (validation, checkpoint saves, logging flushes, Python)",
}


@worder(WindowUnrepresentative)
def window_unrepresentative(s: WindowUnrepresentative) -> Words:
    shape = s.shape
    where = ", ".join(f"steps {w.first_step}-{w.last_step}" for w in shape.windows) or "the window"
    rests = (
        "the phase split above is that of every step, by hook timings; the window's is beside it"
        if s.whole_phases
        else "no timing covers the rest of the run: profile later steps (%%gpucheck -w N)"
    )
    of_what = ", each step's own time (less its wait for a core)" if shape.window_own_time else ""
    return words(
        "The profiled window does not represent the run",
        [
            f"profiled {where}: {fmt_seconds(shape.window_median_s)} a step unprofiled around them; "
            f"the run's median step is {fmt_seconds(shape.window_run_median_s)} ({s.ratio:.1f}x)"
            f"{of_what}",
            f"steps like the window's hold {fmt_share(s.covers)} of the run's step time",
            rests,
        ],
        "Read the run-wide findings first; profile the steps that hold most of the time "
        "(%%gpucheck -w N starts the window later).",
        _SOURCE,
    )


@worder(Drift)
def drift(s: Drift) -> Words:
    shape = s.shape
    evidence = [
        f"first fifth of the run: {fmt_seconds(shape.first_median_s)} a step; last fifth: "
        f"{fmt_seconds(shape.last_median_s)} ({s.factor:.1f}x)",
        f"trend: {fmt_seconds(shape.slope_s_per_step * 100)} more every 100 steps",
        f"time above the first fifth's pace: {fmt_share(s.removed or 0.0)} of the run's step time "
        f"(if every step kept that pace: {fmt_gain(s.bound)})",
    ]
    fix = "Find what grows with the step count: a list the loop appends to and reads, a cache "
    grew = shape.grown_phase
    if grew is not None:
        phase, before, after = grew
        evidence.insert(
            1, f"{phase} grew from {fmt_seconds(before)} to {fmt_seconds(after)} a step"
        )
        if phase == "data":
            fix = (
                "The input got slower after the first part (a cache, a first shard in memory): "
                "read ahead with DataLoader workers, or keep the whole set where the first part was. "
            )
    own = shape.own
    if own is not None:
        evidence.append(
            f"less each step's own wait for a core ({read_where(own)}): "
            f"{fmt_seconds(own.first_median_s)} a step, then {fmt_seconds(own.last_median_s)} "
            f"({own.drift or 0.0:.1f}x): the code's own time grew"
        )
    if s.unread is not None:
        evidence.append(
            f"the machine's load over the run could not be read ({s.unread} reading(s) of the "
            "loop's wait for a core, two needed): part or all of this may be the machine's"
        )
    if s.unbounded:
        evidence.append(
            "too few undisturbed steps at either end to give this slowdown a range (five a "
            "fifth needed): run more steps before reading it as the code's"
        )
    return words(
        "Steps slow down over the run", evidence, fix + "or data that gets slower to read.", _SOURCE
    )


@worder(Jitter)
def jitter(s: Jitter) -> Words:
    shape = s.shape
    if shape.work_kinds > 1:
        # Each step against the median of its own work: the run's p90 and median in seconds
        # mix kinds of work and are not the figure.
        spread = (
            f"among steps of like work ({shape.work_kinds} kinds: their model calls, closure "
            f"calls, loader reads and batch size), the p90 step is {shape.jitter:.1f}x its "
            "kind's median"
        )
        median = "its kind's median step"
    else:
        spread = (
            f"p90 step {fmt_seconds(shape.p90_s)} is {shape.jitter:.1f}x the median "
            f"{fmt_seconds(shape.median_s)}"
        )
        median = "the median step"
    return words(
        "Step times are uneven",
        [
            spread,
            f"time above {median}: {fmt_share(s.above or 0.0)} of the run ({fmt_gain(s.bound)} "
            "if every step took it)",
        ],
        "Look for work some steps do and others not: variable-length batches (pad or bucket "
        "them), garbage collection, other processes on the machine.",
        _SOURCE,
    )


@worder(PeriodicStall)
def periodic_stall(s: PeriodicStall) -> Words:
    stalls, block = s.stalls, s.block
    of_what = " of their own time (each step less its wait for a core)" if s.own_time else ""
    evidence = [
        f"{stalls.count} step(s) took over {STALL_FACTOR:.0f}x the median{of_what} "
        f"({fmt_seconds(stalls.median_stall_s)} against {fmt_seconds(s.median_s)})"
        + (f", every {stalls.period_steps} steps" if stalls.period_steps else ""),
        f"their extra time: {fmt_seconds(stalls.excess_s)}, {fmt_share(stalls.share)} of the run's step time "
        f"({fmt_gain(s.bound)} without it)",
    ]
    if stalls.phase is not None:
        evidence.append(
            f"where it went (hook timings): {_PHASE_WORK[stalls.phase]}, "
            f"{fmt_share(stalls.phase_share or 0.0)} of the extra time"
        )
    what = "the periodic work"
    if block is not None:
        what = block.work
        every = (
            f"every {block.every} steps"
            if block.every
            else f"once an epoch (every {stalls.period_steps} steps here)"
            if block.per_epoch and stalls.period_steps
            else "periodically (its period is set at run time)"
        )
        evidence.append(
            f"{place(block.line, block.origin)}: `{block.text}` runs {block.work} {every}"
        )
    title = (
        f"Every {stalls.period_steps} steps a step stalls"
        if stalls.period_steps
        else "Some steps stall"
    )
    if s.at_random:
        evidence.append(
            "no regular period and no `if step % N` block in the cell: stalls at random are "
            "often the machine (other processes on its cores); measure again on a quiet machine"
        )
    fix = (
        f"Make {what} cheaper or rarer: run it less often, on a subset, or in a background "
        "thread (checkpoints: save a state_dict copy asynchronously)."
    )
    if block is not None and block.setting == PROFILER_SETTING:
        evidence.append(PROFILER_CYCLE)
        fix = PROFILER_CYCLE_FIX
    elif block is not None and block.setting is not None and block.every:
        # The framework runs it: its keyword is what the cell changes (cell.blocks).
        fix = (
            f"Make {what} rarer: {rarer(block.setting, block.every * EVERY)} on "
            f"{place(block.line, block.origin)} runs it {EVERY}x less often"
            f"{instead(block.setting)}; or cheaper: "
            + (_SMALLER_EVAL.get(block.setting, _SMALLER_EVAL["eval_steps"])
               if block.work == "validation" else "save a state_dict copy asynchronously.")
        )  # fmt: skip
    return words(title + (f" ({what})" if block is not None else ""), evidence, fix, _SOURCE)


# How each framework's validation is made cheaper: its own name for the evaluation data.
_SMALLER_EVAL = {
    "eval_steps": "a smaller eval_dataset (a fixed subset).",
    "val_check_interval": "a smaller validation set (a fixed subset, or limit_val_batches).",
}


@worder(MemoryCreep)
def memory_creep(s: MemoryCreep) -> Words:
    trend = s.trend
    what = "GPU memory" if trend.kind == "gpu" else "process memory (RSS)"
    evidence = [
        f"{what} grows {fmt_bytes(int(trend.bytes_per_step * 100))} every 100 steps "
        f"({fmt_bytes(trend.start_bytes)} at step {trend.first_step}, {fmt_bytes(trend.end_bytes)} "
        f"at step {trend.last_step}; straight line, R^2 {trend.r2:.2f})",
    ]
    if trend.late_bytes_per_step is not None:
        evidence.append(
            f"still {fmt_bytes(int(trend.late_bytes_per_step * 100))} every 100 steps over the "
            "run's later half: the growth does not level off"
        )
    if trend.full_at_step is not None and trend.capacity_bytes is not None:
        evidence.append(
            f"at this rate the {'card' if trend.kind == 'gpu' else 'machine'} "
            f"({fmt_bytes(trend.capacity_bytes)}) is full at step {trend.full_at_step:,}"
        )
    if s.kept is not None:
        line, text, name = s.kept
        evidence.append(f"line {line}: `{text}` keeps `{name}` with its autograd graph every step")
    return words(
        "Memory grows every step",
        evidence,
        "Keep values, not tensors with their graphs: `history.append(loss.detach())` (or "
        "`loss.item()` every N steps); clear lists and caches the loop fills.",
        _SOURCE,
    )
