"""The verdict's evidence lines, worded from their figures (``analysis/verdict_said.py``: one
record per line, decided by ``analysis/verdict.py`` and ``analysis/elsewhere.py``)."""

from __future__ import annotations

from functools import singledispatch

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.formatting import fmt_seconds, fmt_share
from gpu_notebook.records import VerdictLine
from gpu_notebook.words.dispatch import says
from gpu_notebook.words.verdict_answers import answer_words, defined_names

__all__ = ["line_words"]


@singledispatch
def line_words(line: VerdictLine) -> str:
    """The evidence line ``line`` says."""
    raise TypeError(f"no words for the verdict's line {type(line).__name__}")


_PHASE_NAMES = {
    "data": "data wait",
    "sync": "host sync",
    "copy": "host-to-device copy",
    "comm": "waiting in collectives (host)",
}


@line_words.register
def _(x: said.AcrossLine) -> str:
    other = x.other or "another verdict"
    return (
        f"{_PHASE_NAMES[x.phase]} {fmt_share(x.share)} of the step (range {fmt_share(x.low)}-"
        f"{fmt_share(x.high)} over {x.steps} steps) lies across the {fmt_share(x.level)} line: "
        f"{x.found} or {other} within the uncertainty; more steps (-s), a later "
        "window or a quieter machine would separate them"
    )


_GPU_FIGURES = {
    "busy": "GPU busy",
    "comm": "exposed collectives",
    "data": "GPU idle while the host waited for data",
    "sync": "GPU idle while the host synced",
    "nvml": "GPU busy (NVML)",
    "memory": "peak GPU memory",
}


@line_words.register
def _(x: said.GpuAcrossLine) -> str:
    of = "of the card" if x.figure == "memory" else "of the GPU's window"
    if x.figure == "nvml":
        of = "of NVML's samples"
    spread = (
        f"range {fmt_share(x.low)}-{fmt_share(x.high)} over {x.steps} steps"
        if x.steps > 1
        else f"read once: two runs of this code may differ by {fmt_share(x.margin)}"
    )
    return (
        f"{_GPU_FIGURES[x.figure]} {fmt_share(x.share)} {of} ({spread}) lies across the "
        f"{fmt_share(x.level)} line: near the line, {x.found} or another verdict within the "
        "uncertainty, read as the line's in both; more steps (-s) or a later window would "
        "separate them"
    )


_RESTS = {
    "data_split": "the run decides: the verdict rests on the data wait of every step, the rest "
    "of the step split as in the window",
    "windows": "the run decides: the verdict rests on every profiled window, each weighted by "
    "the time it stands for",
    "hooks": "the run decides: the verdict rests on hook timings of every step, weighted by "
    "their time",
    "none": "no phase timing covers the rest of the run",
}


@line_words.register
def _(x: said.Unrepresentative) -> str:
    own_time = " (each step's own time, less its wait for a core)" if x.own_time else ""
    return (
        f"the profiled window does not represent this run: its steps take "
        f"{fmt_seconds(x.window_median_s)}, the run's median is "
        f"{fmt_seconds(x.run_median_s)}{own_time} "
        f"(steps like the window's hold {fmt_share(x.covers)} of the run's time); "
        f"{_RESTS[x.rests]}"
    )


@line_words.register
def _(x: said.UndecidedWindow) -> str:
    return (
        f"cannot tell whether the profiled window represents this run: its steps took "
        f"{fmt_seconds(x.window_median_s)} on the host, the run's median is "
        f"{fmt_seconds(x.run_median_s)}, and the GPU's time for them, which would decide it, is "
        f"only known to be at least {fmt_seconds(x.gpu_pace_s)} a step (the GPU timeline is "
        f"partial: {x.unclocked_tail} GPU events without timestamps may have run after the "
        "clocked ones); the verdict reads the window"
    )


says(
    line_words,
    said.WindowAlone,
    lambda x: f"the window alone reads {x.category}: {answer_words(x.answer)[0]}",
)


@line_words.register
def _(x: said.NoisyWindow) -> str:
    took = (
        f"the steps next to the profiled window took {fmt_seconds(x.window_median_s)} "
        f"against the run's median {fmt_seconds(x.run_median_s)}"
    )
    confirm = (
        "the window taken to stand for the run (a quieter machine or a later window, "
        "%%gpucheck -w N, would confirm it)"
    )
    if x.recurs is not None:
        return (
            f"{took}, a pace the run's later half kept in {fmt_share(x.recurs)} of its "
            "stretches too, its fastest steps one pace from start to end: read as the busy "
            f"machine's slower stretches (no wait for a core shows them), {confirm}"
        )
    return (
        f"{took}, their fastest at the run's pace: read as steps the machine preempted, {confirm}"
    )


says(
    line_words,
    said.TrainingDefined,
    lambda x: (
        f"the training is in {defined_names(x.names)}, which this cell defines and never calls, "
        "hands on or decorates with: put %%gpucheck on the cell that calls it"
    ),
)


@line_words.register
def _(x: said.TrainingScheduled) -> str:
    names = defined_names(x.names)
    if x.scheduler is None:
        return f"the training is in {names}, a coroutine this cell calls and never awaits"
    return (
        f"the training is in {names}, a coroutine this cell hands to {x.scheduler}() and "
        "does not await: it runs in the kernel's event loop once the cell has ended, where "
        "nothing is measured"
    )


says(
    line_words,
    said.TrainedUnseen,
    lambda x: (
        "the source calls backward() but no step was seen here: the training ran "
        "where the step clock does not follow it (another process, or a thread beside "
        "one that already trains)"
    ),
)

says(line_words, said.NoHostThread, lambda x: "no host thread with operators in the trace")

says(line_words, said.StepsSeen, lambda x: f"{x.steps} step(s) seen by the step clock")

says(
    line_words,
    said.RunDataWait,
    lambda x: (
        f"data wait {fmt_share(x.share)} of the step over {x.steps} steps (step "
        f"clock, 90% interval {fmt_share(x.low)}-{fmt_share(x.high)}); "
        f"the {x.window_steps} profiled step(s) read {fmt_share(x.window_share)}"
    ),
)

says(
    line_words,
    said.ShareOfStep,
    lambda x: f"{_PHASE_NAMES[x.phase]}: {fmt_share(x.share)} of step time",
)

says(
    line_words,
    said.CommClock,
    lambda x: (
        f"waiting in collectives (host): {fmt_share(x.off_core)} of the loop thread's own time "
        f"over {x.steps} steps (off a core, not waiting for one: its schedstat at each step "
        f"end, the machine's load out); the profiled steps' trace puts that wait in "
        f"collectives and read {fmt_share(x.traced)} of their wall time"
    ),
)


_NOT_MEASURED = {
    "unclocked": "the trace's copies carry no timestamps",
    "no_gpu": "no GPU to copy to",
    "hooks": "the whole-run split is from hook timings",
    "no_trace": "no profiler trace",
}


says(
    line_words,
    said.NotMeasured,
    lambda x: f"not measured ({_NOT_MEASURED[x.why]}): {', '.join(x.phases)}",
)


@line_words.register
def _(x: said.HostOps) -> str:
    host = x.host
    return (
        f"{host.ops_per_step:.0f} host operators a step, median {host.median_op_us:.0f} us each; "
        f"Python between operators {100 * host.between_ops_share:.0f}% of the step, operators "
        f"under {host.small_op_us:.0f} us another {100 * host.small_op_share:.0f}%"
        + (
            f" (up to {100 * x.reach:.0f}% in a traced step: near the "
            f"{100 * x.line:.0f}% line, read as reaching it)"
            if x.reach is not None
            else ""
        )
    )


says(
    line_words,
    said.InMemoryOverhead,
    lambda x: (
        f"with the batches' assembly from memory counted as overhead: "
        f"{fmt_share(x.share)} of the step"
    ),
)


@line_words.register
def _(x: said.GpuBusy) -> str:
    if x.scope == "steps":
        where = f"inside the steps on NVML ({x.ticks} samples there"
    elif not x.clocked:
        where = "of the whole run on NVML (start-up included: no step was clocked"
    else:
        where = (
            f"of the whole run on NVML (start-up included: {x.ticks} sample"
            f"{'s' if x.ticks != 1 else ''} fell inside the steps, {x.min_ticks} needed"
        )
    return (
        f"GPU busy {fmt_share(x.busy)} {where}; any time a kernel ran: more than the "
        "kernels' own time; the trace's GPU timeline did not measure the steps)"
    )


@line_words.register
def _(x: said.HostWaited) -> str:
    w = x.waits
    parts = []
    if w.sync is not None:
        parts.append(f"{fmt_share(w.sync)} of the step in syncs")
    if w.elsewhere is not None and w.elsewhere > 0:
        parts.append(
            f"{fmt_share(w.elsewhere)} outside its syncs (it issued the steps faster than they ran)"
        )
    if w.op_us is not None and w.op_us >= w.small_op_us:
        parts.append(f"inside its operators ({w.op_us:.0f} us typical: a launch may wait there)")
    if not parts:
        return "how long the host waited on the GPU was not measured"
    return "the host waited on the GPU: " + ", ".join(parts)


_WINDOWS = {
    "steps": "the profiled steps",
    "gpu_span": "the GPU span (first to last kernel)",
    "caller": "the window",
}


@line_words.register
def _(x: said.GpuWindow) -> str:
    gpu = x.gpu
    what = _WINDOWS[gpu.window_source]
    least = "at least " if gpu.partial else ""
    text = (
        f"GPU busy {least}{fmt_share(gpu.busy_share)} of {what} "
        f"({fmt_seconds(gpu.window_us / 1e6)})"
    )
    span, span_busy = gpu.span_us, gpu.span_busy_us
    if x.span_differs and span and span_busy is not None:
        outside = max(0.0, gpu.window_us - span)
        text += (
            f"; {fmt_share(span_busy / span)} from its first to its last kernel "
            f"({fmt_seconds(span / 1e6)}, the window HTA and TraceLens use): "
            f"{fmt_seconds(outside / 1e6)} of the window has no GPU work"
        )
    if x.ran_ahead:
        text += (
            f"; the host ran ahead: the GPU finished the steps' work "
            f"{'at least ' if gpu.unclocked_tail else ''}"
            f"{fmt_seconds(gpu.host_ahead_us / 1e6)} after the host had issued it, so the window "
            "runs on to there"
            + (
                f" (at least: {gpu.unclocked_tail} GPU events without timestamps may have run "
                "after the clocked ones)"
                if gpu.unclocked_tail
                else ""
            )
        )
        if gpu.queued_before_trace_us > 0:
            text += (
                f"; it opens when the GPU had spent {fmt_seconds(gpu.queued_before_trace_us / 1e6)} "
                "on work launched before the profiler started"
            )
    return text


@line_words.register
def _(x: said.BusyBounds) -> str:
    if x.high is not None:
        top = f"at most {fmt_share(x.high)} (NVML inside the steps)"
    else:
        run = f" (the run's NVML mean, {fmt_share(x.run_nvml)}, holds the start-up or a tick or "
        run = run + "two: no bound)" if x.run_nvml is not None else ""
        top = f"its top not bounded: NVML was not read inside the steps{run}"
    return (
        f"GPU busy at least {fmt_share(x.low)}, {top}: the trace's GPU timeline is partial "
        f"({x.events} GPU event(s) carry no timestamps), so its busy share is a lower bound and "
        "its idle time an upper bound"
    )


says(
    line_words,
    said.Unclocked,
    lambda x: (
        f"{x.events} GPU event(s) of the trace carry no timestamps (CUPTI wrote 0): left out of "
        "the GPU timeline" + ("; GPU busy from NVML" if x.busy_from_nvml else "")
    ),
)


_IDLE = {
    "host": "waiting for the host to launch",
    "data": "while the host waits for data or copies",
    "sync": "while the host syncs",
    "kernel": "between back-to-back kernels",
    "other": "with work queued behind another stream or event",
}


says(
    line_words,
    said.GpuIdle,
    lambda x: (
        ("GPU idle (each at most: the timeline is partial): " if x.at_most else "GPU idle: ")
        + ", ".join(f"{fmt_share(share)} {_IDLE[c]}" for c, share in x.causes)
    ),
)

# The collectives' figures of a partial GPU timeline, said wherever they are.
PARTIAL_COMM = (
    " (the clocked kernels only: the GPU timeline is partial, so unclocked computation may hide "
    "more of the collectives and unclocked collectives expose more)"
)

says(
    line_words,
    said.CommOverlap,
    lambda x: (
        f"collective kernels {fmt_share(x.busy)} of the window, "
        f"{fmt_share(x.overlap)} of it overlapped by computation: exposed "
        f"{fmt_share(x.exposed)}" + (PARTIAL_COMM if x.partial else "")
    ),
)

says(
    line_words,
    said.GraphReplays,
    lambda x: (
        f"CUDA-graph replays: {x.launches} launch(es) ran "
        f"{fmt_seconds(x.gpu_s)} of GPU work (counted busy; one launch each)"
    ),
)

says(
    line_words,
    said.ExposedCollectives,
    lambda x: f"exposed collectives: {fmt_share(x.exposed)} of the window",
)

says(
    line_words, said.PeakMemory, lambda x: f"peak GPU memory {fmt_share(x.peak_share)} of the card"
)

says(line_words, said.BusyNotMeasured, lambda x: "GPU busy: not measured")

says(
    line_words,
    said.CapturedLaunches,
    lambda x: (
        f"{x.without_work} of {x.launches} kernel launches ran no kernel (captured into a graph)"
    ),
)

says(line_words, said.NoCuda, lambda x: "no CUDA device visible: phases measured on the CPU")


@line_words.register
def _(x: said.ComputeLine) -> str:
    on = x.on_cpu
    if x.kind == "process" and on is not None and on.process is not None:
        return (
            f"this process's threads on a core {on.process:.2f} core(s) per second of the "
            f"steps' own time (the loop thread {fmt_share(on.share)}: it waits for torch's "
            "other threads at each parallel region's end)"
        )
    if x.kind == "loop" and on is not None:
        return (
            f"loop thread on a core {fmt_share(on.share)} of its own step time (range "
            f"{fmt_share(on.low)}-{fmt_share(on.high)} over {on.steps} steps; wall time less "
            "its wait for a core, schedstat)"
        )
    return (
        f"torch operators {fmt_share(x.ops or 0.0)} of the step (the loop thread's time "
        "on a core was not read)"
    )


@line_words.register
def _(x: said.OnCoreAcross) -> str:
    found, other = "cpu-only (compute)", "host-bound (waiting)"
    if not x.found_compute:
        found, other = other, found
    return (
        f"loop thread on a core {fmt_share(x.share)} (range {fmt_share(x.low)}-"
        f"{fmt_share(x.high)}) lies across the {fmt_share(x.line)} line: {found} or "
        f"{other} within the uncertainty; more steps (-s) or a quieter machine would separate them"
    )


says(
    line_words,
    said.OutsideOps,
    lambda x: f"outside torch operators: {fmt_share(x.share)} of the step",
)

says(
    line_words,
    said.DataAsHost,
    lambda x: (
        f"data wait {fmt_share(x.data)} of step time counted as host work, not input starvation: "
        f"{x.why or 'the batches are already in memory'}"
    ),
)


@line_words.register
def _(x: said.ChildrenNote) -> str:
    started = (
        f"the cell starts processes ({', '.join(x.launchers)})"
        + (" and its source trains: " if x.trains else ": ")
        if x.launchers
        else ""
    )
    profile = (
        "to profile each one, run the training as a script under torchrun, where `gpucheck run` "
        "measures every rank (`torchrun --nproc-per-node N -m gpu_notebook run train.py`)"
    )
    if x.in_children:
        whose = (
            "the verdict is read from the children's phases"
            if not x.here
            else "the phases and the verdict are this process's"
        )
        return (
            f"{started}{x.in_children} optimizer step(s) ran in child processes (counted and "
            f"timed per child, see the notes; not profiled), {x.here} here; {whose}; {profile}"
        )
    return (
        f"{started}no optimizer step was counted in its child processes; this report covers "
        f"this process only ({x.here} optimizer step(s) here); {profile}"
    )


@line_words.register
def _(x: said.ChildrenPhases) -> str:
    shares = ", ".join(f"{name} {fmt_share(share)}" for name, share in x.shares)
    return (
        f"the training ran in {x.processes} child process(es) ({x.steps} optimizer steps), "
        f"none here: their steps' time went to {shares} (hooks in each child; not profiled)"
    )
