"""The verdict: one category, the numbers behind it, and "will more GPUs help?".

Decided here and handed up as figures: its answer and each evidence line one record of
``analysis/verdict_said.py`` (``Verdict.answer``, ``Verdict.lines``), worded by
``gpu_notebook.words.verdict`` when the report is built. No sentence is written here.

Thresholds, with their sources:
- input wait / sync share: warn 10%, critical 20% (TraceML diagnostics/step_time/policy.py);
  the primary verdict takes the critical level, smaller shares appear as evidence only;
- GPU busy >= 80% of the window: GPU-bound (TraceML calls >= 90% compute-bound; the seed
  articles call < 80% sustained "more cards waste money", so 80% is where adding cards starts
  to pay);
- peak memory >= 90% of the card (PyTorch TensorBoard profiler plugin; TraceML "high" at 80%);
- communication >= 10% of the window (TensorBoard plugin's distributed advice): on a GPU the
  collective kernels' *exposed* time (no computation under them: HTA's comm/compute overlap,
  TraceLens's exposed communication), and only when it is the largest reason the GPU is not
  computing; the fix follows the figures (``comm_remedy``). Else the "comm" phase (the host
  waiting on a collective: gloo, or any backend's ``wait()``) over the step, on a CPU run too;
- on a GPU, input- and sync-bound also read the GPU's idle time by cause (the host thread in a
  data wait or copy, or in a sync, while the GPU had nothing to run);
- a trace with no backward and no optimizer is inference: its answers speak of replicas,
  tensor parallel, batching, fixed shapes, CUDA graphs, torch.compile, TensorRT / ONNX Runtime;
  a CUDA-graph capture gets no step verdict;
- without a GPU timeline that measures the steps (no GPU events, or CUPTI's without timestamps),
  the busy share is NVML's utilization, the share of its sample periods in which any kernel ran:
  more than the kernels' own time (an H100 read 82% and 69% on a loop its trace read 49% busy).
  Past the GPU-bound line it decides only with the host's waits on the GPU
  (analysis/host_waits.py: a host that waited under 20% of its step was busy the rest itself);
- a *partial* GPU timeline (some GPU events without timestamps) is bounds, not a measure
  (analysis/gpu_bounds.py says which reading bounds which way): its busy share a lower bound,
  its idle causes and exposed collectives upper bounds, NVML inside the steps its ceiling (the
  run's NVML mean, start-up and a tick or two, bounds nothing). Under the GPU-bound line the
  verdict is read at both ends; one that holds at one end only says "undecided between X
  and Y" unless the host's waits decide (``_decide``);
- host-bound from the trace's own figures (ops per step, median op time, Python between ops;
  analysis/host.py) on a CPU run too: a loop of tiny ops is not helped by a GPU;
- each share read against its line (data wait and sync 20%, the data wait with the host's
  copies, the host's wait in collectives 10%, the loop thread on a core 50%) is read with its
  range (analysis/verdict_near_line.py): a range that, widened by what two runs of the code
  differ by, reaches the line decides as the line, said as near it, so two runs whose shares
  differ within that margin on either side of the line give one verdict;
- so is each line decided on the GPU (analysis/gpu_line_reading.py): the timeline's busy share
  (80%), exposed collectives (10%, its range alone), the GPU's idle time while the host waited
  for data or synced (20%), with their ranges over the profiled steps' GPU windows
  (``GpuTimeline.steps``); NVML's busy share and the peak memory (90%), read once, their point
  widened by what two runs differ by. A partial timeline's figures are bounds, read as points.
A phase that was not measured is never read as zero: the verdict says what it could not see.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.analysis.gpu_bounds import GpuBusyBounds, gpu_busy_bounds
from gpu_notebook.analysis.gpu_line_reading import gpu_line, point_line
from gpu_notebook.analysis.host import (
    HOST_BOUND_SHARE,
    host_bound,
    in_memory_host_bound,
    in_memory_overhead,
    outside_ops_share,
    overhead_near_line,
    overhead_reach,
)
from gpu_notebook.analysis.host_comm import HostComm, host_comm, traced_split
from gpu_notebook.analysis.host_waits import host_waits
from gpu_notebook.analysis.on_cpu import ON_CPU_COMPUTE, OnCpu
from gpu_notebook.analysis.own_wait_verdict import own_wait
from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.analysis.utilization import IN_STEPS_MIN_TICKS
from gpu_notebook.analysis.verdict_near_line import LineReading, line_reading
from gpu_notebook.records import (
    Analysis,
    BatchAtLine,
    Confidence,
    CoreWait,
    Environment,
    GpuTimeline,
    HostOverhead,
    Phase,
    PhaseBreakdown,
    Run,
    RunPhase,
    RunShape,
    UtilizationStats,
    Verdict,
    VerdictAnswer,
    VerdictCategory,
    VerdictLine,
)

# Environment.platform of a run rebuilt from a trace file (``gpucheck analyze``): the report
# then speaks of "this trace", and of nothing NVML or the step clock would have measured.
RECORDED_ELSEWHERE = "recorded elsewhere"

INPUT_CRITICAL = 0.20
SYNC_CRITICAL = 0.20
WARN = 0.10
GPU_BUSY = 0.80
MEMORY_FULL = 0.90
COMM = 0.10


def _verdict(
    category: VerdictCategory,
    answer: VerdictAnswer,
    lines: list[VerdictLine] | tuple[VerdictLine, ...],
    confidence: Confidence,
    *,
    data_as_host: float | None = None,
) -> Verdict:
    """A verdict with its figures, not yet worded (``words.verdict`` words it)."""
    return Verdict(
        category,
        "",
        "",
        (),
        confidence,
        data_as_host=data_as_host,
        answer=answer,
        lines=tuple(lines),
    )


def from_a_file(run: Run) -> bool:
    return run.env.platform == RECORDED_ELSEWHERE


def amdahl_bound(share: float) -> float:
    """The most a step can speed up when a phase taking ``share`` of it disappears."""
    return float("inf") if share >= 1 else 1.0 / (1.0 - share)


def _confidence(run: Run, analysis: Analysis) -> Confidence:
    phases = analysis.phases
    n = len(phases.steps) if phases is not None else 0
    if n >= 5 and analysis.step_stats.count >= 5:
        return "high"
    if n >= 2:
        return "medium"
    return "low"


# The fewest steps a run-wide data share must rest on to overrule the profiled window's.
RUN_DATA_MIN_STEPS = 20
# The window's steps waited this share of their time for a core: its split is read from what
# is left, and the run's data share overrules it either way.
WINDOW_WAITED = 0.5


def run_data_overrules(analysis: Analysis, window_share: float | None) -> RunPhase | None:
    """The step clock's run-wide data wait where it says the profiled window over-read it: the
    window's share lies above the run's whole 90% interval, over many more steps than the
    window holds (issue 26: a 3-step window early in a run read 25% and 'input-bound' where
    the run's 287 steps read 10%, 7%-12%), or, where the window's steps mostly waited for a
    core (``WINDOW_WAITED``), under it. None: the window's reading stands."""
    whole, phases = analysis.run_data, analysis.phases
    if whole is None or window_share is None or phases is None:
        return None
    if whole.steps < max(RUN_DATA_MIN_STEPS, 4 * len(phases.steps)):
        return None
    if window_share > whole.high_share > 0:
        return whole
    # A window whose steps mostly waited for a core read its split from the little time left
    # once the waits are out, and which phase a time slice hit is not read: on a loaded machine
    # three preempted steps read islice_loader's data wait at 11% (host-bound) where its 139
    # steps read 77% (74%-79%), and the next run at the same load 64% (input-bound). The run's
    # steps, each less its wait, decide below their range too then.
    below = phases.waited_share >= WINDOW_WAITED and window_share < whole.low_share
    return whole if below else None


def share_line(
    analysis: Analysis,
    phase: str | tuple[str, ...],
    share: float,
    level: float,
    *,
    widen: bool = True,
) -> LineReading:
    """``share`` of ``phase`` against ``level`` with its range (``verdict_near_line``): the
    run's steps' where the step clock overrules the window's data share, else the steps' of
    ``analysis``'s split (the caller's, stalls left out)."""
    from gpu_notebook.analysis.uncertainty import share_interval

    phases = analysis.phases
    assert phases is not None
    whole = run_data_overrules(analysis, phases.share("data")) if phase == "data" else None
    if whole is not None:
        span = (whole.low_share, whole.high_share) if whole.high_share > 0 else None
        return line_reading(share, level, span, whole.steps, widen=widen)
    span = share_interval(phases, phase)
    return line_reading(share, level, span, len(phases.steps), widen=widen)


def _within_uncertainty(analysis: Analysis, verdict: Verdict) -> Verdict:
    """Say both verdicts when the share that decides lies within its range of the threshold.

    Data wait and host syncs decide input- and sync-bound at their critical level; when the
    share's range (the steps', or the run's where the step clock decides the data wait), widened
    by what two runs of the code differ by (``verdict_near_line``), holds the level, the verdict
    across the line is possible in another run, and more steps would separate them. The verdict
    itself is the line's in every such run (``LineReading.reaches``).
    """
    stable, _ = without_stalls(analysis)
    phases = stable.phases
    if phases is None or phases.total_us <= 0 or verdict.category in ("unknown", "comm-bound"):
        return verdict
    checks: tuple[tuple[Literal["data", "sync"], float, VerdictCategory], ...] = (
        ("data", INPUT_CRITICAL, "input-bound"),
        ("sync", SYNC_CRITICAL, "sync-bound"),
    )
    for phase, level, category in checks:
        if phase == "data" and verdict.data_as_host is not None:
            continue  # the data wait is host work here: its line does not decide
        share = phases.share(phase)
        if share is None:
            continue
        whole = run_data_overrules(stable, share) if phase == "data" else None
        reading = share_line(stable, phase, share if whole is None else whole.share, level)
        if not reading.near or reading.low is None or reading.high is None:
            continue
        note = said.AcrossLine(
            phase,
            reading.share,
            reading.low,
            reading.high,
            reading.steps,
            level,
            verdict.category,
            None if verdict.category == category else category,
        )
        return dataclasses.replace(verdict, lines=(*verdict.lines, note), confidence="low")
    return verdict


def decide(
    run: Run,
    analysis: Analysis,
    *,
    data_in_memory: str | None = None,
    batch_at_line: BatchAtLine | None = None,
) -> Verdict:
    """The verdict (``_as_decided``), its steps' wait for a core said with the share of it a thread
    of this process held (``Analysis.side_threads``): that part is not other programs', and where
    it is most of the wait the verdict is the thread's (``analysis.own_wait_verdict``)."""
    verdict = _as_decided(run, analysis, data_in_memory=data_in_memory, batch_at_line=batch_at_line)
    return own_wait(verdict, analysis.side_threads)


def _as_decided(
    run: Run,
    analysis: Analysis,
    *,
    data_in_memory: str | None,
    batch_at_line: BatchAtLine | None,
) -> Verdict:
    """The verdict, preceded by a word on the profiled window when it does not represent the run.

    ``data_in_memory``: why the data wait is per-sample assembly of batches already in memory
    (rules.input_pipeline.data_in_memory), None when it is not known to be. On a loop of tiny
    ops such a wait is the same per-sample Python overhead as the ops: host-bound covers it
    (``Verdict.data_as_host``) whichever side of the input line its share falls, so the answer
    does not flip between runs of the same cell.

    Where the steps waited for a core (other programs held the CPU) half their time or more,
    the verdict says so, and names no bound where that wait moves the deciding share across its
    line (``analysis.too_busy``: "too busy to judge", worded by ``words.verdict``), or moves
    the batches across the in-memory line (``batch_at_line``) where that changes the verdict.
    """
    from gpu_notebook.analysis.elsewhere import children_train_note, children_verdict

    from_children = children_verdict(run)
    if from_children is not None:
        # No optimizer step here: this process's loop (an evaluation, a wait for the children)
        # is not the training, and its verdict would not be the training's.
        note = children_train_note(run)
        return dataclasses.replace(
            from_children, lines=(*from_children.lines, *((note,) if note else ()))
        )
    from gpu_notebook.analysis.too_busy import judged, without_phase

    as_read = _as_read(run, analysis, data_in_memory)
    at_line = _batch_at_line(run, analysis, as_read, data_in_memory, batch_at_line)
    if at_line is not None:
        return at_line
    verdict = judged(analysis, as_read)
    wait = verdict.core_wait
    if wait is None or wait.judged:
        at_compute = _compute_at_line(run, analysis, verdict)
        if at_compute is not None:
            return at_compute
    if wait is None or wait.judged or wait.other is not None:
        return verdict
    # Read over its line, the share's other side is what the rest of the step gives: the
    # verdict with that phase out of the split, named beside the one as read.
    under = _as_read(run, without_phase(analysis, wait.phase), data_in_memory)
    other = under.category if under.category not in ("unknown", wait.found) else None
    return dataclasses.replace(verdict, core_wait=dataclasses.replace(wait, other=other))


def _batch_at_line(
    run: Run,
    analysis: Analysis,
    as_read: Verdict,
    data_in_memory: str | None,
    at_line: BatchAtLine | None,
) -> Verdict | None:
    """Too busy to judge where the batches lie either side of the in-memory line with the steps'
    wait put anywhere (``rules.input_pipeline.batch_at_line``) and the other side of that line
    gives another verdict: the data wait counted as host work or read against its own line
    (a custom in-memory set of ~0.4 ms batches reads host-bound quiet; under load its batches
    read past the line and input-bound). None: the line does not decide here."""
    if at_line is None or as_read.category == "unknown":
        return None
    if data_in_memory is None and at_line.other is None:
        return None  # the other side's reason was not given
    across = _as_read(run, analysis, at_line.other if data_in_memory is None else None)
    if across.category in ("unknown", as_read.category):
        return None
    wait = CoreWait(
        wait_share=at_line.wait_share,
        steps=at_line.steps,
        phase="batch",
        share=at_line.batch_s,
        low=at_line.low_s,
        high=at_line.high_s,
        line=at_line.line_s,
        found=as_read.category,
        other=across.category,
        judged=False,
    )
    return no_bound(as_read, wait)


def no_bound(verdict: Verdict, wait: CoreWait) -> Verdict:
    """``verdict`` too busy to judge: the steps' wait for a core (``wait``) puts the share that
    decides it on either side of its line. Category "unknown" at low confidence, no data wait
    counted as host work, its headline worded by ``words.verdict`` from ``wait`` (no answer of
    its own); the evidence the shares as read gave kept."""
    return dataclasses.replace(
        verdict,
        category="unknown",
        headline="",
        more_gpus="",
        confidence="low",
        data_as_host=None,
        core_wait=wait,
        answer=None,
    )


def _steps_wait(analysis: Analysis) -> float:
    """The most of their wall time the steps the verdict rests on were read waiting for a core:
    the split's, the window's own marks', the run's steps' (0: none read)."""
    phases, host, whole = analysis.phases, analysis.host, analysis.run_data
    return max(
        phases.waited_share if phases is not None else 0.0,
        (host.core_wait_share or 0.0) if host is not None else 0.0,
        whole.wait_share if whole is not None else 0.0,
    )


def _compute_at_line(run: Run, analysis: Analysis, verdict: Verdict) -> Verdict | None:
    """Too busy to judge between cpu-only (compute) and host-bound where a CPU run's steps
    waited half their time or more and torch runs its ops on more than one thread: each
    parallel region ends when every thread's part is done, and a thread that waits for a core
    holds the loop thread in the op, a wait the loop thread's schedstat does not count. The op
    times (their call floors: ``host_bound``) and the loop thread's time on a core then move
    with the load: an in-memory MLP of 8-sample batches read its heaviest matmul at 17 us (ops
    too small: host-bound) and at 33 ms (cpu-only) in two runs at load 17-20 on 2 cores, both
    with 94% of the steps waiting. A host-bound read from the per-op overhead stands (such
    waits only lower it); one read from the time on a core, or cpu-only, is the machine's.
    None: the line does not decide here."""
    if verdict.category not in ("cpu-only", "host-bound") or verdict.data_as_host is not None:
        return None
    if _has_gpu(run.env) or (analysis.gpu is not None and analysis.gpu.window_us > 0):
        return None
    threads = run.env.torch_threads
    if threads is not None and threads <= 1:
        return None
    from gpu_notebook.analysis.too_busy import TOO_BUSY_WAIT

    waited = _steps_wait(analysis)
    phases = analysis.phases
    if waited < TOO_BUSY_WAIT or phases is None or phases.total_us <= 0:
        return None
    host = analysis.host
    if host_bound(host, analysis.top_ops, on_gpu=False):
        return None  # the overhead read over its line: the siblings' waits only lower it
    compute = _compute_evidence(run, phases)
    other: VerdictCategory
    if verdict.category == "cpu-only":
        reach = overhead_reach(host) if host is not None else None
        if reach is None:
            return None
        phase, share, line, other = "ops", reach, HOST_BOUND_SHARE, "host-bound"
    elif compute.waits and compute.on_cpu is not None:
        phase, share, line, other = "on_core", compute.on_cpu.computing, ON_CPU_COMPUTE, "cpu-only"
    else:
        return None  # the cell's own code outside the ops: no op holds it
    steps = len(phases.steps)
    wait = CoreWait(
        wait_share=waited,
        steps=steps,
        phase=phase,
        share=share,
        low=share,
        high=1.0,
        line=line,
        found=verdict.category,
        other=other,
        judged=False,
    )
    return no_bound(verdict, wait)  # data_as_host is None: the guard above


def _as_read(run: Run, analysis: Analysis, data_in_memory: str | None) -> Verdict:
    """The verdict the shares give as read, with what the window does not show said."""
    verdict = _within_uncertainty(analysis, _decide(run, analysis, data_in_memory))
    verdict = _training_elsewhere(run, verdict)
    verdict = _ended_in_warmup(run, analysis, verdict)
    shape = analysis.shape
    if shape is not None and shape.represents and shape.window_noisy:
        return _noisy_window(shape, verdict)
    if shape is not None and shape.window_undecided and shape.window_median_s is not None:
        return _undecided_window(shape, analysis, verdict)
    if shape is None or shape.represents is not False or shape.window_median_s is None:
        return verdict
    covers = shape.window_covers or 0.0
    phases = analysis.phases
    # A split with phases the hooks cannot see is the run's data wait + the window's rest.
    data_split = (
        phases is not None
        and phases.source == "hooks"
        and bool(set(phases.measured) - {"data", "forward", "backward", "optimizer", "other"})
    )
    # Hook timings without a trace cover the run when their steps hold most of its time.
    hooks_cover = (
        phases is not None
        and phases.source == "hooks"
        and phases.total_us / 1e6 * max(1, run.steps.decimation) >= 0.5 * shape.total_s
    )
    rests: Literal["data_split", "windows", "hooks", "none"] = (
        "data_split"
        if analysis.window_phases is not None and data_split
        else "windows"
        if analysis.window_phases is not None and phases is not None and phases.source == "trace"
        else "hooks"
        if analysis.window_phases is not None or hooks_cover
        else "none"
    )
    note = said.Unrepresentative(
        shape.window_median_s,
        shape.window_run_median_s,
        shape.window_own_time,
        covers,
        rests,
    )
    if analysis.window_phases is None and not hooks_cover:
        # Evidence the report itself calls unrepresentative never makes the verdict: say what
        # the window alone read, and what would measure the rest.
        assert verdict.answer is not None
        return _verdict(
            "unknown",
            said.NotRepresented(),
            (note, said.WindowAlone(verdict.category, verdict.answer), *verdict.lines),
            "low",
        )
    return dataclasses.replace(verdict, lines=(note, *verdict.lines))


def _ended_in_warmup(run: Run, analysis: Analysis, verdict: Verdict) -> Verdict:
    """A run that ended inside the profiler's warm-up (an HF Trainer with ``max_steps=2``, a
    short fine-tune): no step was profiled, and the verdict rests on the step clock's hook
    timings of its first steps alone, which carry one-time costs. Said first (words.verdict), at
    low confidence, with what would profile a step (issue 26: the report read "CPU-ONLY: a GPU would help this
    loop" from two warm-up steps, its window's line apart under the phases)."""
    if run.window.status != "not-reached" or analysis.phases is None:
        return verdict
    if verdict.category == "unknown" or not run.steps.step_count:
        return verdict
    ended = (run.steps.step_count, run.window.warmup_steps)
    return dataclasses.replace(verdict, warmup_only=ended, confidence="low")


def _noisy_window(shape: RunShape, verdict: Verdict) -> Verdict:
    """The verdict of a window whose neighbours the machine slowed (``RunShape.window_noisy``):
    the window's reading, its uncertainty said, and never more than medium confidence."""
    if shape.window_median_s is None:
        return verdict
    note = said.NoisyWindow(
        shape.window_median_s, shape.window_run_median_s, shape.window_noisy_recurs
    )
    confidence = "medium" if verdict.confidence == "high" else verdict.confidence
    return dataclasses.replace(verdict, lines=(*verdict.lines, note), confidence=confidence)


def _undecided_window(shape: RunShape, analysis: Analysis, verdict: Verdict) -> Verdict:
    """The verdict of a window that may or may not represent the run (``window_undecided``: a
    partial GPU timeline leaves the GPU's pace for its steps bounded below only): the window's
    reading, that it cannot tell said, never more than medium confidence."""
    gpu = analysis.gpu
    assert shape.window_median_s is not None and gpu is not None
    steps = len(analysis.phases.steps) if analysis.phases is not None else 0
    note = said.UndecidedWindow(
        shape.window_median_s,
        shape.window_run_median_s,
        gpu.window_us / max(1, steps) / 1e6,
        gpu.unclocked_tail,
    )
    confidence = "medium" if verdict.confidence == "high" else verdict.confidence
    return dataclasses.replace(verdict, lines=(note, *verdict.lines), confidence=confidence)


def _training_elsewhere(run: Run, verdict: Verdict) -> Verdict:
    """Say where the training ran when the source trains but this process's steps do not."""
    from gpu_notebook.analysis.elsewhere import (
        children_train_note,
        defined_not_run,
        scheduled_not_awaited,
        source_trains,
    )

    note = children_train_note(run)
    if note is not None:
        answer = verdict.answer
        if verdict.category == "unknown" and answer is not None:
            answer = said.TrainsInChildren(answer)
        return dataclasses.replace(verdict, answer=answer, lines=(note, *verdict.lines))
    defined = defined_not_run(run.cell_source) if verdict.category == "unknown" else ()
    if defined and not run.steps.step_count:
        # Nothing trained here: the cell only defines its training. Guessing "another process
        # or thread" would send the user looking for a process that never ran.
        return dataclasses.replace(
            verdict,
            answer=said.DefinedNotRun(defined),
            lines=(said.TrainingDefined(defined), *verdict.lines),
        )
    scheduled, scheduler = (
        scheduled_not_awaited(run.cell_source)
        if verdict.category == "unknown" and not run.steps.step_count
        else ((), None)
    )
    if scheduled:
        # The coroutine runs in the kernel's loop once the cell has ended (a task), or never
        # (a bare call): not in another process or thread.
        return dataclasses.replace(
            verdict,
            answer=said.ScheduledNotRun(scheduled, scheduler),
            lines=(said.TrainingScheduled(scheduled, scheduler), *verdict.lines),
        )
    if verdict.category == "unknown" and source_trains(run.cell_source):
        return dataclasses.replace(verdict, lines=(said.TrainedUnseen(), *verdict.lines))
    return verdict


_CONFIDENCE_RANK: dict[Confidence, int] = {"low": 0, "medium": 1, "high": 2}


@dataclasses.dataclass(frozen=True)
class _Reading:
    """The GPU's busy share one verdict reads: ``busy`` (None: not measured), whether the GPU
    timeline's idle causes decide (``timeline``), and ``bounds`` (the timeline's, where it has
    a clocked window): a partial timeline's causes are read at their least where ``least``."""

    busy: float | None
    timeline: bool
    bounds: GpuBusyBounds | None = None
    least: bool = False


def _as_measured(analysis: Analysis) -> _Reading:
    return _Reading(
        gpu_busy_reading(analysis), _timeline_measures(analysis), gpu_busy_bounds(analysis)
    )


def _decide(run: Run, analysis: Analysis, data_in_memory: str | None = None) -> Verdict:
    """The verdict on the GPU's busy share as measured; on a partial timeline under the GPU-bound
    line (its share a lower bound), the verdict at each end of its bounds
    (``analysis.gpu_bounds``): the timeline as clocked (its idle gaps at their most), and the GPU
    at its ceiling (NVML inside the steps, else up to 100%: its idle gaps at their least, or,
    past the line, the host's waits on the GPU deciding as they do without a timeline). Where
    both ends give one verdict it stands, said with its bounds; else the host's waits, read on
    the host alone, decide between them where they can (a host that waited on the GPU past its
    line: the GPU sets the pace; one that never waited: the host does); else "undecided between
    X and Y" (unknown, low). A partial timeline read as measured flipped the H100's autocast MLP
    (39% clocked, 84% on its whole timeline) to host-bound."""
    bounds = gpu_busy_bounds(analysis)
    if bounds is None or not bounds.partial or bounds.low >= GPU_BUSY:
        return _decide_read(run, analysis, data_in_memory, _as_measured(analysis))
    low = _decide_read(run, analysis, data_in_memory, _Reading(bounds.low, True, bounds))
    top = bounds.top
    high_reading = _Reading(top, top < GPU_BUSY, bounds, least=True)
    high = _decide_read(run, analysis, data_in_memory, high_reading)
    run_nvml = analysis.utilization.nvml_busy if bounds.high is None else None
    note = said.BusyBounds(bounds.low, bounds.high, bounds.unclocked_events, run_nvml)
    if low.category == high.category:
        # It holds at both ends, as sure as the less sure end reads it; the GPU's idle share,
        # where the headline says it, is the range between them.
        sure = min(low.confidence, high.confidence, key=_CONFIDENCE_RANK.__getitem__)
        answer = low.answer
        if isinstance(answer, said.GpuIdles) and answer.idle is not None:
            answer = dataclasses.replace(answer, idle_least=max(0.0, 1.0 - top))
        return dataclasses.replace(low, answer=answer, lines=(note, *low.lines), confidence=sure)
    ceiling = bounds.high is not None and bounds.high >= GPU_BUSY
    if ceiling and high.category == "gpu-bound" and low.category == "host-bound":
        # NVML inside the steps past the line: the host's waits, read on the host alone, decide
        # as they do without a timeline (not where nothing bounds the top: a 2%-clocked loop
        # whose window ran faster than its run would read gpu-bound on a guess).
        waits = host_waits(analysis)
        if waits.waited:
            assert isinstance(high.answer, said.GpuBound)
            answer = dataclasses.replace(
                high.answer, busy=bounds.low, busy_high=bounds.high, partial=True
            )
            return dataclasses.replace(high, answer=answer, lines=(note, *high.lines))
        if waits.never_waited:
            return dataclasses.replace(low, lines=(note, *low.lines, said.HostWaited(waits)))
    answer = said.Undecided(low.category, high.category, bounds.low, bounds.high)
    return _verdict("unknown", answer, (note, *low.lines), "low")


def _decide_read(
    run: Run, analysis: Analysis, data_in_memory: str | None, reading: _Reading
) -> Verdict:
    """Pick the primary verdict from the phase shares, the GPU timeline (as ``reading`` reads
    it) and the samples.

    Shares are those of the typical profiled step (stalled steps left out, as the rules do).
    """
    analysis, _ = without_stalls(analysis)
    phases = analysis.phases
    confidence = _confidence(run, analysis)
    if phases is None or phases.total_us <= 0:
        if from_a_file(run):
            return _verdict("unknown", said.NoStep(True), (said.NoHostThread(),), "low")
        seen = (said.StepsSeen(run.steps.step_count),)
        return _verdict("unknown", said.NoStep(False), seen, "low")
    evidence: list[VerdictLine] = []
    data = phases.share("data")
    sync = phases.share("sync")
    whole = run_data_overrules(analysis, data)
    if whole is not None:
        evidence.append(
            said.RunDataWait(
                whole.share,
                whole.steps,
                whole.low_share,
                whole.high_share,
                len(phases.steps),
                data,
            )
        )
        data = whole.share
    # Each line read with its share's range: a range that reaches it decides as the line.
    data_line = share_line(analysis, "data", data, INPUT_CRITICAL) if data is not None else None
    sync_line = share_line(analysis, "sync", sync, SYNC_CRITICAL) if sync is not None else None
    data_reaches = data_line is not None and data_line.reaches
    sync_reaches = sync_line is not None and sync_line.reaches
    warned: tuple[tuple[said.SharePhase, float | None], ...] = (
        ("data", data if whole is None else None),
        ("sync", sync),
        ("copy", phases.share("copy")),
    )
    for name, share in warned:
        if share is not None and share >= WARN:
            evidence.append(said.ShareOfStep(name, share))
    busy = reading.busy
    on_gpu = busy is not None or _has_gpu(run.env)
    # On a GPU the loop thread also sleeps on the device: the traced share stands there.
    comm = host_comm(run, analysis, clock=not on_gpu)
    not_measured = tuple(p for p in ("data", "copy", "sync") if p not in phases.measured)
    if comm is None and "comm" not in phases.measured and traced_split(analysis) is not None:
        # Only a window unlike the run waited in collectives: the typical steps' split cannot
        # see them, and the step clock did not read the loop thread's time off a core.
        not_measured = (*not_measured, "comm")
    if not_measured:
        why: Literal["unclocked", "no_gpu", "hooks", "no_trace"]
        if phases.source == "trace" and analysis.gpu is not None and analysis.gpu.unclocked_events:
            why = "unclocked"  # the trace's copies carry no timestamps
        elif phases.source == "trace":
            why = "no_gpu"  # no GPU to copy to
        elif analysis.window_phases is not None or run.window.recorded_steps:
            # The whole-run estimate comes from hook timings even though a window was profiled.
            why = "hooks"
        else:
            why = "no_trace"
        evidence.append(said.NotMeasured(why, not_measured))

    overhead = host_bound(analysis.host, analysis.top_ops, on_gpu=on_gpu)
    if analysis.host is not None and (overhead or not on_gpu):
        evidence.append(_host_evidence(analysis.host))
    # Batches assembled sample by sample from memory are per-op overhead too: with the model
    # side's own overhead near the half, leaving them out put the verdict on the side of the
    # host line the run's noise chose (host.in_memory_overhead).
    if not overhead and data_in_memory is not None and in_memory_host_bound(analysis.host, data):
        assert analysis.host is not None and data is not None
        overhead = True
        if on_gpu:
            evidence.append(_host_evidence(analysis.host))
        evidence.append(said.InMemoryOverhead(in_memory_overhead(analysis.host, data) or 0.0))
    host_comm_share = comm.share if comm is not None else phases.share("comm")
    # Waiting on peers is the verdict when it is the largest wait: a rank that waits 80% of its
    # step for data and 12% in the all-reduce is input-bound (and the others wait for it).
    if host_comm_share is not None and host_comm_share < max(data or 0.0, sync or 0.0):
        host_comm_share = None
    # The host's wait in collectives read from the split (not off the loop thread's clock) is
    # read with the steps' range of it.
    split_comm = comm is None or comm.off_core is None
    comm_reaches = host_comm_share is not None and (
        host_comm_share >= COMM
        or (split_comm and share_line(analysis, "comm", host_comm_share, COMM, widen=False).reaches)
    )
    if not on_gpu:
        if host_comm_share is not None and comm_reaches:
            return _comm_verdict(host_comm_share, comm, evidence, confidence)
        return _cpu_verdict(
            data,
            sync,
            evidence,
            confidence,
            host_bound=overhead,
            own_python_share=outside_ops_share(analysis),
            overhead_share=None if analysis.host is None else overhead_reach(analysis.host),
            outside_share=_outside_model_share(analysis),
            inference=phases.workload == "inference",
            data_in_memory=data_in_memory,
            compute=_compute_evidence(run, phases),
            loop_share=analysis.loop_python.share if analysis.loop_python is not None else None,
            data_reaches=data_reaches,
            sync_reaches=sync_reaches,
        )
    if busy is not None:
        evidence.insert(0, _nvml_evidence(busy, analysis.utilization))
    if analysis.gpu is not None and analysis.gpu.unclocked_events:
        nvml = not _timeline_measures(analysis) and busy is not None
        evidence.append(said.Unclocked(analysis.gpu.unclocked_events, nvml))

    util = analysis.utilization
    gpu = analysis.gpu
    inference = phases.workload == "inference"
    if gpu is not None and gpu.capture:
        return _capture_verdict(gpu)
    # With a GPU timeline, a data wait or a sync costs only the GPU time it leaves idle (the
    # causes below); a sync while kernels run costs nothing. Without one, the host's shares.
    timeline = reading.timeline
    busy_line = _busy_line(reading, gpu)
    if gpu is not None and timeline:
        if busy is not None:
            evidence[0] = _window_evidence(gpu)
        evidence += _gpu_evidence(gpu)
        causes = _gpu_idle_shares(gpu, reading.bounds if reading.least else None)
        exposed = gpu.comm_exposed_us / gpu.window_us
        if reading.least and reading.bounds is not None:
            exposed = reading.bounds.idle_least(exposed)  # unclocked compute may hide it
        # Only communication nothing overlaps delays the step, and only when it is the
        # largest reason the GPU is not computing (HTA's overlap; TraceLens's exposed comm).
        # Work queued behind another stream waits, in a job with collectives, on those
        # collectives (the compute stream waits for the communication stream's event).
        # Each GPU line is read with its range over the steps (analysis.gpu_line_reading).
        comm_wait = exposed + causes["other"]
        comm_line = gpu_line(gpu, "comm", exposed, COMM, widen=False)
        if comm_line.reaches and comm_wait >= max(causes["host"], causes["data"], causes["sync"]):
            comm_verdict = _gpu_comm_verdict(gpu, exposed, len(phases.steps), evidence, confidence)
            return _gpu_near(comm_verdict, comm_line, "comm")
        if busy_line is not None and not busy_line.reaches:
            data_line = gpu_line(gpu, "data", causes["data"], INPUT_CRITICAL)
            if data_line.reaches and not (
                overhead and not inference and _data_as_host(data, sync_reaches, data_in_memory)
            ):
                found = _input_verdict(causes["data"], evidence, confidence, inference=inference)
                return _gpu_near(found, data_line, "data")
            sync_cause = gpu_line(gpu, "sync", causes["sync"], SYNC_CRITICAL)
            if sync_cause.reaches:
                found = _sync_verdict(causes["sync"], evidence, confidence)
                return _gpu_near(found, sync_cause, "sync")
    if host_comm_share is not None and comm_reaches:
        return _comm_verdict(host_comm_share, comm, evidence, confidence)
    # Without a timeline, the busy share is NVML's (any time a kernel ran, more than the
    # kernels' own time): past the GPU-bound line it decides only with the host's waits on the
    # GPU (analysis.host_waits); a host that never waited puts it back under the line.
    waits = host_waits(analysis) if busy is not None and not timeline else None
    busy_reaches = busy_line is not None and busy_line.reaches
    paced = busy_reaches and not (waits is not None and waits.never_waited)
    if util.gpu_memory_peak_bytes and util.gpu_memory_total_bytes:
        mem = util.gpu_memory_peak_bytes / util.gpu_memory_total_bytes
        mem_line = point_line(mem, MEMORY_FULL)
        if mem_line.reaches and not paced:
            lines = (said.PeakMemory(mem), *evidence)
            found = _verdict("memory-bound", said.MemoryBound(mem), lines, confidence)
            return _gpu_near(found, mem_line, "memory")
    if busy is not None and busy_line is not None and paced:
        figure: Literal["busy", "nvml"] = "busy" if timeline else "nvml"
        if waits is None:
            found = _verdict("gpu-bound", said.GpuBound(busy, inference), evidence, confidence)
            return _gpu_near(found, busy_line, figure)
        # The host waited on the GPU (medium at most: the host's reading, not the GPU's), or
        # how long it waited was not read (low).
        capped: Confidence = "medium" if confidence == "high" else confidence
        lines = (*evidence, said.HostWaited(waits))
        answer = said.GpuBound(busy, inference)
        found = _verdict("gpu-bound", answer, lines, capped if waits.waited else "low")
        return _gpu_near(found, busy_line, figure)
    if not inference and overhead and _data_as_host(data, sync_reaches, data_in_memory):
        assert data is not None
        return _in_memory_host_verdict(data, data_in_memory, evidence, confidence)
    if not timeline and data is not None and data_reaches:
        return _input_verdict(data, evidence, confidence, inference=inference)
    # Moving the input is the data wait and the host's copies to the device, as the timeline's
    # idle causes count it: a step that copies pageable batches 72% of its time is input-bound.
    moving = (data or 0.0) + (phases.share("copy") or 0.0)
    moving_reaches = moving >= INPUT_CRITICAL or (
        data is not None
        and whole is None
        and share_line(analysis, ("data", "copy"), moving, INPUT_CRITICAL).reaches
    )
    if not timeline and on_gpu and data is not None and moving_reaches:
        return _input_verdict(moving, evidence, confidence, inference=inference, copies=True)
    if not timeline and sync is not None and sync_reaches:
        return _sync_verdict(sync, evidence, confidence)
    idle = 1.0 - busy if busy is not None else None
    if idle is None and not overhead:
        # Nothing measured the GPU's busy time and nothing measured the host's overhead: "the
        # host sets the pace" would be what is left, not what was seen.
        return _no_busy_reading_verdict(evidence)
    if waits is not None and busy is not None and busy_reaches:
        # NVML read the GPU busy past the line, and the host never waited on it: the host sets
        # the pace, how much of the rest the GPU idled was not measured (low).
        lines = (*evidence, said.HostWaited(waits))
        return _verdict("host-bound", said.HostPaced(busy, waits, inference), lines, "low")
    if waits is not None and waits.waited:
        # NVML read the GPU under the line, and the host waited on it past its own: NVML's mean
        # is a few samples, or the whole run's where too few fell inside the steps (a 0.4 s
        # bf16 run read 58% on two samples, its trace 84%), and the host says the GPU may have
        # set the pace (low).
        lines = (*evidence, said.HostWaited(waits))
        return _verdict("host-bound", _gpu_idles(idle, gpu, inference), lines, "low")
    return _verdict("host-bound", _gpu_idles(idle, gpu, inference), evidence, confidence)


def _busy_line(reading: _Reading, gpu: GpuTimeline | None) -> LineReading | None:
    """The busy share ``reading`` reads against the GPU-bound line, with its range: the
    timeline's steps' where it measures, NVML's point widened where it stands in for it; a
    partial timeline's bounds are read at both ends already (``_decide``): their point alone.
    None: no busy share."""
    busy = reading.busy
    if busy is None:
        return None
    if reading.bounds is not None and reading.bounds.partial:
        return line_reading(busy, GPU_BUSY, None, 0)
    if reading.timeline and gpu is not None:
        return gpu_line(gpu, "busy", busy, GPU_BUSY)
    return point_line(busy, GPU_BUSY)


def _gpu_near(
    verdict: Verdict,
    line: LineReading,
    figure: Literal["busy", "comm", "data", "sync", "nvml", "memory"],
) -> Verdict:
    """``verdict``, decided by ``line``, with the line said as near it (low confidence) where
    another run of the code may read its share on the other side (``LineReading.near``)."""
    if not line.near or line.low is None or line.high is None:
        return verdict
    note = said.GpuAcrossLine(
        figure,
        line.share,
        line.low,
        line.high,
        line.steps,
        line.margin,
        line.line,
        verdict.category,
    )
    return dataclasses.replace(verdict, lines=(*verdict.lines, note), confidence="low")


def _no_busy_reading_verdict(evidence: list[VerdictLine]) -> Verdict:
    lines = (said.BusyNotMeasured(), *evidence)
    return _verdict("unknown", said.NoBusyReading(), lines, "low")


def _host_evidence(host: HostOverhead) -> said.HostOps:
    """The evidence line: ops per step, median op time, Python between ops."""
    reach = overhead_reach(host) if overhead_near_line(host) else None
    return said.HostOps(host, reach, HOST_BOUND_SHARE)


def _window_evidence(gpu: GpuTimeline) -> said.GpuWindow:
    """The busy share and the window it describes; the GPU span beside it when they differ."""
    span, span_busy = gpu.span_us, gpu.span_busy_us
    differs = bool(
        gpu.window_source != "gpu_span"
        and span
        and span_busy is not None
        and abs(span_busy / span - gpu.busy_share) >= WINDOWS_DIFFER
    )
    return said.GpuWindow(gpu, differs, gpu.host_ahead_us > 0.1 * gpu.window_us)


def _gpu_idles(idle: float | None, gpu: GpuTimeline | None, inference: bool) -> said.GpuIdles:
    """How the headline names the idle time: by its largest cause, as measured."""
    if gpu is None or gpu.idle_us <= 0:
        return said.GpuIdles(idle, "host", 0.0, inference)
    if gpu.idle_other_us > gpu.idle_host_wait_us + gpu.idle_kernel_wait_us:
        return said.GpuIdles(idle, "queued", 0.0, inference)
    if gpu.idle_other_us + gpu.idle_data_wait_us + gpu.idle_sync_wait_us > 0.2 * gpu.idle_us:
        host = gpu.idle_host_wait_us / gpu.window_us
        return said.GpuIdles(idle, "partly_host", host, inference)
    return said.GpuIdles(idle, "host", 0.0, inference)


def _gpu_idle_shares(gpu: GpuTimeline, least: GpuBusyBounds | None = None) -> dict[str, float]:
    """Each cause of GPU idle time as a share of the window; with ``least`` (a partial
    timeline's bounds), each at the least it can be (``GpuBusyBounds.idle_least``)."""
    w = gpu.window_us
    shares = {
        "host": gpu.idle_host_wait_us / w,
        "data": gpu.idle_data_wait_us / w,
        "sync": gpu.idle_sync_wait_us / w,
        "other": gpu.idle_other_us / w,
    }
    if least is None:
        return shares
    return {cause: least.idle_least(share) for cause, share in shares.items()}


def _gpu_evidence(gpu: GpuTimeline) -> list[VerdictLine]:
    out: list[VerdictLine] = []
    w = gpu.window_us
    idle: tuple[tuple[Literal["host", "data", "sync", "kernel", "other"], float], ...] = (
        ("host", gpu.idle_host_wait_us),
        ("data", gpu.idle_data_wait_us),
        ("sync", gpu.idle_sync_wait_us),
        ("kernel", gpu.idle_kernel_wait_us),
        ("other", gpu.idle_other_us),
    )
    causes = [(name, us) for name, us in idle if us / w >= 0.01]
    if causes:
        out.append(
            said.GpuIdle(
                tuple((n, us / w) for n, us in sorted(causes, key=lambda c: -c[1])),
                at_most=gpu.partial,
            )
        )
    overlap = gpu.comm_overlap_share
    if overlap is not None:
        out.append(
            said.CommOverlap(gpu.comm_busy_us / w, overlap, gpu.comm_exposed_us / w, gpu.partial)
        )
    if gpu.graph_launches:
        out.append(said.GraphReplays(gpu.graph_launches, gpu.graph_us / 1e6))
    return out


def _gpu_comm_verdict(
    gpu: GpuTimeline,
    exposed: float,
    steps: int,
    evidence: list[VerdictLine],
    confidence: Confidence,
) -> Verdict:
    """Exposed collectives: the fix follows from how they sit against computation."""
    answer = said.ExposedComm(
        exposed,
        comm_remedy(gpu, steps),
        gpu.comm_overlap_share or 0.0,
        gpu.collectives / max(1, steps),
    )
    lines = (said.ExposedCollectives(exposed), *evidence)
    return _verdict("comm-bound", answer, lines, confidence)


CommRemedy = Literal["straggler", "overlap", "bucket", "accumulate"]
# A step with more collectives than this sends many small buckets (DDP's default 25 MiB
# buckets make a few dozen all-reduces even for a billion-parameter model).
MANY_COLLECTIVES_PER_STEP = 40
LOW_OVERLAP = 0.3
# Busy shares of two windows that differ by this much are both worth stating.
WINDOWS_DIFFER = 0.05


def comm_remedy(gpu: GpuTimeline, steps: int) -> CommRemedy:
    """Which fix exposed communication calls for, from the GPU timeline's figures alone."""
    if gpu.idle_other_us > gpu.comm_exposed_us:
        return "straggler"
    if (gpu.comm_overlap_share or 0.0) < LOW_OVERLAP:
        return "overlap"
    if gpu.collectives / max(1, steps) > MANY_COLLECTIVES_PER_STEP:
        return "bucket"
    return "accumulate"


def _capture_verdict(gpu: GpuTimeline) -> Verdict:
    lines = (said.CapturedLaunches(gpu.launches_without_work, gpu.kernel_launches),)
    return _verdict("unknown", said.GraphCapture(), lines, "low")


def _comm_verdict(
    share: float, comm: HostComm | None, evidence: list[VerdictLine], confidence: Confidence
) -> Verdict:
    """The host waits on collectives: for a slower peer (lockstep), or for the transfer; read
    on the loop thread's own clock where it was (``analysis.host_comm``)."""
    first: list[VerdictLine] = [said.ShareOfStep("comm", share)]
    if comm is not None and comm.off_core is not None:
        first = [said.CommClock(comm.off_core, comm.steps, comm.traced)]
    answer = said.HostComm(share, comm.in_backward if comm is not None else None)
    return _verdict("comm-bound", answer, (*first, *evidence), confidence)


def _has_gpu(env: Environment) -> bool:
    return env.cuda_available or bool(env.gpus)


def _timeline_measures(analysis: Analysis) -> bool:
    """Whether the trace's GPU timeline measures the GPU's busy share: it has clocked GPU events,
    and where some carry no timestamps (left out of it: its share is then a lower bound), it
    reads past the GPU-bound line, or NVML reads under it too. A timeline half of whose kernels
    CUPTI left unclocked read a GPU-bound loop 54% busy (NVML 100%) and host-bound."""
    gpu = analysis.gpu
    if gpu is None or gpu.window_us <= 0:
        return False
    if not gpu.unclocked_events or gpu.busy_share >= GPU_BUSY:
        return True
    nvml = analysis.utilization.nvml_busy
    return nvml is None or nvml < GPU_BUSY


def gpu_busy_reading(analysis: Analysis) -> float | None:
    """GPU busy share from the trace when its GPU timeline measures it, else from NVML
    utilization (the share of NVML's sample periods in which any kernel ran: more than the
    kernels' own time), inside the steps where enough ticks fell there (``nvml_busy``)."""
    if analysis.gpu is not None and _timeline_measures(analysis):
        return analysis.gpu.busy_share
    return analysis.utilization.nvml_busy


def _nvml_evidence(busy: float, utilization: UtilizationStats) -> said.GpuBusy:
    """NVML's busy share and what it covers: the steps, or the whole run and why."""
    steps = utilization.in_steps
    if steps is None:
        return said.GpuBusy(busy, "run", 0, IN_STEPS_MIN_TICKS, clocked=False)
    scope: Literal["steps", "run"] = (
        "steps" if steps.read and steps.gpu_util_mean_pct is not None else "run"
    )
    return said.GpuBusy(busy, scope, steps.ticks, steps.min_ticks)


def _input_verdict(
    data: float,
    evidence: list[VerdictLine],
    confidence: Confidence,
    *,
    on_cpu: bool = False,
    inference: bool = False,
    copies: bool = False,
) -> Verdict:
    answer = said.InputBound(data, amdahl_bound(data), on_cpu, inference, copies)
    return _verdict("input-bound", answer, evidence, confidence)


def _sync_verdict(
    sync: float, evidence: list[VerdictLine], confidence: Confidence, *, on_cpu: bool = False
) -> Verdict:
    # No device (on_cpu): the reads cost host time, nothing waits on a card; the words say
    # once, apart, what they would mean on one.
    answer = said.SyncBound(sync, amdahl_bound(sync), on_cpu)
    return _verdict("sync-bound", answer, evidence, confidence)


# Host time outside the model that decides the verdict's wording on its own: TraceML's step
# residual critical level (``diagnostics/step_time/policy.py``, 20%); a smaller share beside a
# host-bound step of tiny ops is not what sets its pace.
OUTSIDE_CRITICAL = 0.2


def _outside_model_share(analysis: Analysis) -> float | None:
    """The step's share in Python outside any operator and outside the model, the optimizer and
    the data wait: the trace's "unattributed" (the whole run's estimate or the window's). Not
    "other": that is operators outside the model (a frozen teacher's forward under no_grad,
    a validation pass), work a faster device does shorten. None from hook timings (they cannot
    tell the forward from host work before the backward)."""
    phases = analysis.phases
    if phases is None or phases.source != "trace" or phases.total_us <= 0:
        return None
    return phases.share("unattributed")


def _cpu_verdict(
    data: float | None,
    sync: float | None,
    evidence: list[VerdictLine],
    confidence: Confidence,
    *,
    host_bound: bool = False,
    own_python_share: float | None = None,
    overhead_share: float | None = None,
    outside_share: float | None = None,
    inference: bool = False,
    data_in_memory: str | None = None,
    compute: ComputeEvidence | None = None,
    loop_share: float | None = None,
    data_reaches: bool | None = None,
    sync_reaches: bool | None = None,
) -> Verdict:
    """The CPU run's verdict: a wait or host overhead at its line, else what the run's own
    evidence says the step's time is. "Compute" (a GPU would help) is said only when the loop
    thread was on a core for most of its steps' own time, or, where that was not read, when
    torch's operators hold most of the step; never as what is left when nothing else fired."""
    compute = compute if compute is not None else ComputeEvidence(None, None, None)
    # The lines read with the shares' ranges (``verdict_near_line``); the points without them.
    if data_reaches is None:
        data_reaches = data is not None and data >= INPUT_CRITICAL
    if sync_reaches is None:
        sync_reaches = sync is not None and sync >= SYNC_CRITICAL
    evidence.insert(0, said.NoCuda())
    # The loop body's own work before the model (analysis.python_work: tokenising strings, a
    # numpy augmentation, an EMA's update) as the largest host share: the cell's own Python
    # sets the pace, not the model's ops nor the batches' assembly (unseen round 19's tokenising
    # loop: 39% there, read as "per-operator overhead ... assembling each batch" at 3%).
    if (
        host_bound
        and not inference
        and loop_share is not None
        and loop_share >= max(OUTSIDE_CRITICAL, data or 0.0, sync or 0.0)
    ):
        return _verdict("host-bound", said.OwnPython(loop_share), evidence, confidence)
    if host_bound and not inference and _data_as_host(data, sync_reaches, data_in_memory):
        assert data is not None
        return _in_memory_host_verdict(data, data_in_memory, evidence, confidence, on_cpu=True)
    if data is not None and data_reaches:
        return _input_verdict(data, evidence, confidence, on_cpu=True)
    if sync is not None and sync_reaches:
        return _sync_verdict(sync, evidence, confidence, on_cpu=True)
    # The step's Python outside the model (``outside_share``: the phases' "unattributed", the
    # whole run's or the window's) as most of the overhead that makes it host-bound
    # (``overhead_share``: Python between operators and small operators) is the cell's own
    # host work too: a checkpoint saved every step read 42% outside the model of a 58%
    # overhead, and "the ops are too small" sent the user to torch.compile, which leaves the
    # save as it is (unseen round 8).
    if (
        outside_share is not None
        and overhead_share is not None
        and outside_share >= max(OUTSIDE_CRITICAL, overhead_share / 2)
    ):
        own_python_share = max(own_python_share or 0.0, outside_share)
        own_leads = True
    else:
        own_leads = own_python_share is not None and own_python_share >= HOST_BOUND_SHARE
    if host_bound and own_python_share is not None and own_leads:
        # Over the whole run, most of the step is the cell's own Python outside any operator
        # (not the operators' dispatch): bigger ops would not shorten it, nor would a GPU.
        return _verdict("host-bound", said.OwnPython(own_python_share), evidence, confidence)
    if host_bound:
        return _verdict("host-bound", said.TinyOps(), evidence, confidence)
    if compute.waits:
        return _waiting_verdict(compute, evidence, confidence)
    if compute.own_code:
        return _own_code_verdict(compute, evidence, confidence)
    if not compute.computes:
        return _no_compute_evidence_verdict(compute, evidence)
    evidence.insert(1, _compute_line(compute))
    confidence = _on_cpu_uncertainty(compute, True, evidence, confidence)
    return _verdict("cpu-only", said.CpuCompute(inference), evidence, confidence)


@dataclasses.dataclass(frozen=True)
class ComputeEvidence:
    """What the run says of whether the step's time is compute: the loop thread's time on a core
    (analysis/on_cpu, every read step of the run), and the phase split's operators' time and its
    time outside them (the cell's own code)."""

    on_cpu: OnCpu | None
    ops: float | None  # torch's operators (trace) or the model's hooks (no trace), share of step
    outside: float | None  # the cell's own code outside them, share of the step

    @property
    def on_core(self) -> LineReading | None:
        """The on-core share against its line, with the loop thread's range over the read steps
        where that share decides (``verdict_near_line``: a range reaching the line computes)."""
        on = self.on_cpu
        if on is None:
            return None
        span = (on.low, on.high) if on.computing == on.share else None
        return line_reading(on.computing, ON_CPU_COMPUTE, span, on.steps)

    @property
    def waits(self) -> bool:
        """Off a core for most of its own time: sleeping, blocked on I/O, a lock, a process."""
        line = self.on_core
        return line is not None and not line.reaches

    @property
    def own_code(self) -> bool:
        """Most of the step outside torch's operators, in the cell's own code."""
        return (
            self.outside is not None
            and self.outside >= HOST_BOUND_SHARE
            and (self.ops is None or self.ops < HOST_BOUND_SHARE)
        )

    @property
    def computes(self) -> bool:
        line = self.on_core
        if line is not None:
            return line.reaches
        return self.ops is not None and self.ops >= HOST_BOUND_SHARE


def _compute_evidence(run: Run, phases: PhaseBreakdown) -> ComputeEvidence:
    """The loop thread's on-core share over the run, and the split's operators' share: in a
    trace, every operator's time (forward, backward, optimizer, copies and other ops) against
    the Python between them ("unattributed"); from hooks alone, the model's forward, backward
    and optimizer against the rest of the step ("other")."""
    from gpu_notebook.analysis.on_cpu import on_cpu

    if phases.source == "trace":
        op_phases: tuple[Phase, ...] = ("forward", "backward", "optimizer", "copy", "other")
        outside_phase: Phase = "unattributed"
    else:
        op_phases, outside_phase = ("forward", "backward", "optimizer"), "other"
    measured = [phases.share(p) for p in op_phases]
    ops = (
        sum(x for x in measured if x is not None) if any(x is not None for x in measured) else None
    )
    return ComputeEvidence(
        on_cpu(run.steps.steps, run.steps.process_cpu), ops, phases.share(outside_phase)
    )


def _compute_line(compute: ComputeEvidence) -> said.ComputeLine:
    on = compute.on_cpu
    if on is not None and on.process is not None and on.process > on.share:
        return said.ComputeLine("process", on, compute.ops)
    if on is not None:
        return said.ComputeLine("loop", on, compute.ops)
    return said.ComputeLine("ops", None, compute.ops)


def _on_cpu_uncertainty(
    compute: ComputeEvidence,
    found_compute: bool,
    evidence: list[VerdictLine],
    confidence: Confidence,
) -> Confidence:
    """Say both answers when the on-core share's range straddles its line (``found_compute``:
    the verdict found is cpu-only (compute), else host-bound (waiting))."""
    on, line = compute.on_cpu, compute.on_core
    if on is None or line is None or not line.near:
        return confidence
    if on.process is not None and on.process >= ON_CPU_COMPUTE:
        return confidence  # the process's threads compute, whatever the loop thread's share
    evidence.append(said.OnCoreAcross(on.share, on.low, on.high, ON_CPU_COMPUTE, found_compute))
    return "low"


def _waiting_verdict(
    compute: ComputeEvidence, evidence: list[VerdictLine], confidence: Confidence
) -> Verdict:
    assert compute.on_cpu is not None
    evidence.insert(1, _compute_line(compute))
    confidence = _on_cpu_uncertainty(compute, False, evidence, confidence)
    return _verdict("host-bound", said.Waiting(compute.on_cpu.share), evidence, confidence)


def _own_code_verdict(
    compute: ComputeEvidence, evidence: list[VerdictLine], confidence: Confidence
) -> Verdict:
    share = compute.outside or 0.0
    evidence.insert(1, said.OutsideOps(share))
    if compute.on_cpu is not None:
        evidence.insert(2, _compute_line(compute))
    answer = said.OwnCode(share, compute.on_cpu is not None)
    return _verdict("host-bound", answer, evidence, confidence)


def _no_compute_evidence_verdict(compute: ComputeEvidence, evidence: list[VerdictLine]) -> Verdict:
    return _verdict("unknown", said.NoComputeEvidence(compute.ops), evidence, "low")


def _data_as_host(data: float | None, sync_reaches: bool, data_in_memory: str | None) -> bool:
    """Whether the step's data wait is per-sample assembly of batches already in memory, with no
    host sync at its critical level, read with its range (that verdict stands). Any measured
    share counts, not one past a line: the headline names the wait in every run of the cell,
    whatever its share."""
    if sync_reaches:
        return False
    return data_in_memory is not None and data is not None and data > 0


def _in_memory_host_verdict(
    data: float,
    why: str | None,
    evidence: list[VerdictLine],
    confidence: Confidence,
    *,
    on_cpu: bool = False,
) -> Verdict:
    """Tiny ops fed by tiny batches assembled from memory: one host overhead, not two verdicts.

    Indexing a TensorDataset one sample at a time and collating a batch of four is per-sample
    Python, like the ops it feeds; its share of the step sits near the input line and moves
    with the machine, so reading it as input starvation on one side of the line and host
    overhead on the other gave two answers to one cell. Workers would not help it (they add a
    handoff per batch); indexing whole batches and bigger ops would.
    """
    evidence.append(said.DataAsHost(data, why))
    answer = said.InMemoryHost(data, amdahl_bound(data), on_cpu)
    return _verdict("host-bound", answer, evidence, confidence, data_as_host=data)
