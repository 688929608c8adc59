"""The verdict: one category, the numbers behind it, and "will more GPUs help?".

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
- host-bound from the trace's own figures (ops per step, median op time, Python between ops;
  analysis/host.py) on a CPU run too: a loop of tiny ops is not helped by a GPU.
A phase that was not measured is never read as zero: the verdict says what it could not see.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from gpu_notebook.analysis.host import (
    HOST_BOUND_SHARE,
    host_bound,
    in_memory_host_bound,
    in_memory_overhead,
    outside_ops_share,
    overhead_near_line,
    overhead_reach,
)
from gpu_notebook.analysis.on_cpu import ON_CPU_COMPUTE, OnCpu
from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.formatting import fmt_gain, fmt_share
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
    Verdict,
    VerdictCategory,
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


def _within_uncertainty(analysis: Analysis, verdict: Verdict) -> Verdict:
    """Say both verdicts when the share that decides lies within its range of the threshold.

    Data wait and host syncs decide input- and sync-bound at their critical level; when the
    steps' range of that share (analysis.uncertainty) straddles the level, the verdict found
    and the one across the line are both possible, and more steps would separate them.
    """
    from gpu_notebook.analysis.uncertainty import share_interval

    stable, _ = without_stalls(analysis)
    phases = stable.phases
    if phases is None or phases.total_us <= 0 or verdict.category in ("unknown", "comm-bound"):
        return verdict
    for phase, level, name, category in (
        ("data", INPUT_CRITICAL, "data wait", "input-bound"),
        ("sync", SYNC_CRITICAL, "host sync", "sync-bound"),
    ):
        if phase == "data" and verdict.data_as_host is not None:
            continue  # the data wait is host work here: its line does not decide
        if phase == "data" and run_data_overrules(analysis, phases.share("data")) is not None:
            continue  # the run's steps decided, not the window's range
        span = share_interval(phases, phase)
        share = phases.share(phase)
        if span is None or share is None:
            continue
        low, high = span
        if not low < level <= high:
            continue
        other = "another verdict" if verdict.category == category else category
        note = (
            f"{name} {fmt_share(share)} of the step (range {fmt_share(low)}-{fmt_share(high)} "
            f"over {len(phases.steps)} steps) lies across the {fmt_share(level)} line: "
            f"{verdict.category} or {other} within the uncertainty; more steps (-s), a later "
            "window or a quieter machine would separate them"
        )
        return dataclasses.replace(verdict, evidence=(*verdict.evidence, note), confidence="low")
    return verdict


def decide(
    run: Run,
    analysis: Analysis,
    *,
    data_in_memory: str | None = None,
    batch_at_line: BatchAtLine | None = None,
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
            from_children, evidence=(*from_children.evidence, *((note,) if note else ()))
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
    counted as host work, its headline worded by ``words.verdict`` from ``wait``; the evidence
    the shares as read gave kept."""
    return dataclasses.replace(
        verdict,
        category="unknown",
        headline="",
        more_gpus="",
        confidence="low",
        data_as_host=None,
        core_wait=wait,
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
    if shape is None or shape.represents is not False or shape.window_median_s is None:
        return verdict
    from gpu_notebook.formatting import fmt_seconds

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
    rests = (
        "the run decides: the verdict rests on the data wait of every step, the rest of the "
        "step split as in the window"
        if analysis.window_phases is not None and data_split
        else "the run decides: the verdict rests on every profiled window, each weighted by the "
        "time it stands for"
        if analysis.window_phases is not None and phases is not None and phases.source == "trace"
        else "the run decides: the verdict rests on hook timings of every step, weighted by "
        "their time"
        if analysis.window_phases is not None or hooks_cover
        else "no phase timing covers the rest of the run"
    )
    own_time = " (each step's own time, less its wait for a core)" if shape.window_own_time else ""
    note = (
        f"the profiled window does not represent this run: its steps take "
        f"{fmt_seconds(shape.window_median_s)}, the run's median is "
        f"{fmt_seconds(shape.window_run_median_s)}{own_time} "
        f"(steps like the window's hold {fmt_share(covers)} of the run's time); {rests}"
    )
    if analysis.window_phases is None and not hooks_cover:
        # Evidence the report itself calls unrepresentative never makes the verdict: say what
        # the window alone read, and what would measure the rest.
        return Verdict(
            "unknown",
            "No verdict for this run: the profiled window is unlike most of it, and no timing "
            "covers the rest.",
            "Unknown: profile the steps that hold most of the time (%%gpucheck -w N starts the "
            "window later; -s N records more steps), then ask again.",
            (
                note,
                f"the window alone reads {verdict.category}: {verdict.headline}",
                *verdict.evidence,
            ),
            "low",
        )
    return dataclasses.replace(verdict, evidence=(note, *verdict.evidence))


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
    from gpu_notebook.formatting import fmt_seconds

    if shape.window_median_s is None:
        return verdict
    note = (
        f"the steps next to the profiled window took {fmt_seconds(shape.window_median_s)} "
        f"against the run's median {fmt_seconds(shape.window_run_median_s)}, their fastest at "
        "the run's pace: read as steps the machine preempted, the window taken to stand for "
        "the run (a quieter machine or a later window, %%gpucheck -w N, would confirm it)"
    )
    confidence = "medium" if verdict.confidence == "high" else verdict.confidence
    return dataclasses.replace(verdict, evidence=(*verdict.evidence, note), confidence=confidence)


def _training_elsewhere(run: Run, verdict: Verdict) -> Verdict:
    """Say where the training ran when the source trains but this process's steps do not."""
    from gpu_notebook.analysis.elsewhere import (
        children_train_note,
        defined_not_run,
        source_trains,
    )

    note = children_train_note(run)
    if note is not None:
        headline = verdict.headline
        if verdict.category == "unknown":
            headline = "No training step ran in this process: the cell trains in child processes."
        return dataclasses.replace(verdict, headline=headline, evidence=(note, *verdict.evidence))
    defined = defined_not_run(run.cell_source) if verdict.category == "unknown" else ()
    if defined and not run.steps.step_count:
        # Nothing trained here: the cell only defines its training. Guessing "another process
        # or thread" would send the user looking for a process that never ran.
        names = ", ".join(f"{n}()" for n in defined)
        return dataclasses.replace(
            verdict,
            headline=f"No training step ran: this cell defines {names} and does not call it.",
            more_gpus="Unknown: nothing trained in this cell. Put %%gpucheck on the cell that "
            f"calls {names}.",
            evidence=(
                f"the training is in {names}, which this cell defines and never calls, hands "
                "on or decorates with: put %%gpucheck on the cell that calls it",
                *verdict.evidence,
            ),
        )
    if verdict.category == "unknown" and source_trains(run.cell_source):
        return dataclasses.replace(
            verdict,
            evidence=(
                "the source calls backward() but no step was seen here: the training ran "
                "where the step clock does not follow it (another process, or a thread beside "
                "one that already trains)",
                *verdict.evidence,
            ),
        )
    return verdict


def _decide(run: Run, analysis: Analysis, data_in_memory: str | None = None) -> Verdict:
    """Pick the primary verdict from the phase shares, the GPU timeline and the samples.

    Shares are those of the typical profiled step (stalled steps left out, as the rules do).
    """
    analysis, _ = without_stalls(analysis)
    phases = analysis.phases
    confidence = _confidence(run, analysis)
    if phases is None or phases.total_us <= 0:
        if from_a_file(run):
            return Verdict(
                category="unknown",
                headline="No training step was found in this trace.",
                more_gpus="Unknown: this trace has no ProfilerStep ranges and no host operators "
                "to split into steps.",
                evidence=("no host thread with operators in the trace",),
                confidence="low",
            )
        return Verdict(
            category="unknown",
            headline="No training step was detected in this cell.",
            more_gpus="Unknown: gpucheck counts steps at an optimizer's step, a DataLoader's "
            "batches or a backward pass (loss.backward(), torch.autograd.grad); this cell ran "
            "none of them.",
            evidence=(f"{run.steps.step_count} step(s) seen by the step clock",),
            confidence="low",
        )
    evidence: list[str] = []
    data = phases.share("data")
    sync = phases.share("sync")
    whole = run_data_overrules(analysis, data)
    if whole is not None:
        evidence.append(
            f"data wait {fmt_share(whole.share)} of the step over {whole.steps} steps (step "
            f"clock, 90% interval {fmt_share(whole.low_share)}-{fmt_share(whole.high_share)}); "
            f"the {len(phases.steps)} profiled step(s) read {fmt_share(data)}"
        )
        data = whole.share
    for name, share in (
        ("data wait", data if whole is None else None),
        ("host sync", sync),
        ("host-to-device copy", phases.share("copy")),
    ):
        if share is not None and share >= WARN:
            evidence.append(f"{name}: {fmt_share(share)} of step time")
    not_measured = [p for p in ("data", "copy", "sync") if p not in phases.measured]
    if not_measured:
        if phases.source == "trace" and analysis.gpu is not None and analysis.gpu.unclocked_events:
            why = "the trace's copies carry no timestamps"
        elif phases.source == "trace":
            why = "no GPU to copy to"
        elif analysis.window_phases is not None or run.window.recorded_steps:
            # The whole-run estimate comes from hook timings even though a window was profiled.
            why = "the whole-run split is from hook timings"
        else:
            why = "no profiler trace"
        evidence.append(f"not measured ({why}): {', '.join(not_measured)}")

    busy = _gpu_busy_share(analysis)
    on_gpu = busy is not None or _has_gpu(run.env)
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
        evidence.append(
            f"with the batches' assembly from memory counted as overhead: "
            f"{fmt_share(in_memory_overhead(analysis.host, data) or 0.0)} of the step"
        )
    host_comm = phases.share("comm")
    # Waiting on peers is the verdict when it is the largest wait: a rank that waits 80% of its
    # step for data and 12% in the all-reduce is input-bound (and the others wait for it).
    if host_comm is not None and host_comm < max(data or 0.0, sync or 0.0):
        host_comm = None
    if not on_gpu:
        if host_comm is not None and host_comm >= COMM:
            return _comm_verdict(host_comm, "waiting in collectives (host)", evidence, confidence)
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
        )
    if busy is not None:
        evidence.insert(0, f"GPU busy {fmt_share(busy)} of the window")
    if analysis.gpu is not None and analysis.gpu.unclocked_events:
        evidence.append(
            f"{analysis.gpu.unclocked_events} GPU event(s) of the trace carry no timestamps "
            "(CUPTI wrote 0): left out of the GPU timeline"
            + ("; GPU busy from NVML" if analysis.gpu.window_us <= 0 and busy is not None else "")
        )

    util = analysis.utilization
    gpu = analysis.gpu
    inference = phases.workload == "inference"
    if gpu is not None and gpu.capture:
        return _capture_verdict(gpu)
    if gpu is not None and gpu.window_us > 0:
        if busy is not None:
            evidence[0] = _window_evidence(gpu)
        evidence += _gpu_evidence(gpu)
        causes = _gpu_idle_shares(gpu)
        exposed = gpu.comm_exposed_us / gpu.window_us
        # Only communication nothing overlaps delays the step, and only when it is the
        # largest reason the GPU is not computing (HTA's overlap; TraceLens's exposed comm).
        # Work queued behind another stream waits, in a job with collectives, on those
        # collectives (the compute stream waits for the communication stream's event).
        comm_wait = exposed + causes["other"]
        if exposed >= COMM and comm_wait >= max(causes["host"], causes["data"], causes["sync"]):
            return _gpu_comm_verdict(gpu, exposed, len(phases.steps), evidence, confidence)
        if busy is not None and busy < GPU_BUSY:
            if causes["data"] >= INPUT_CRITICAL and not (
                overhead and not inference and _data_as_host(data, sync, data_in_memory)
            ):
                return _input_verdict(causes["data"], evidence, confidence, inference=inference)
            if causes["sync"] >= SYNC_CRITICAL:
                return _sync_verdict(causes["sync"], evidence, confidence)
    if host_comm is not None and host_comm >= COMM:
        return _comm_verdict(host_comm, "waiting in collectives (host)", evidence, confidence)
    if util.gpu_memory_peak_bytes and util.gpu_memory_total_bytes:
        mem = util.gpu_memory_peak_bytes / util.gpu_memory_total_bytes
        if mem >= MEMORY_FULL and (busy is None or busy < GPU_BUSY):
            return Verdict(
                "memory-bound",
                f"GPU memory peaks at {fmt_share(mem)} of the card while the GPU is not kept busy.",
                "A bigger card would let the batch grow; before buying, try activation "
                "checkpointing, gradient accumulation or mixed precision (about half the activations).",
                (f"peak GPU memory {fmt_share(mem)} of the card", *evidence),
                confidence,
            )
    if busy is not None and busy >= GPU_BUSY and inference:
        return Verdict(
            "gpu-bound",
            f"The GPU is busy {fmt_share(busy)} of the time serving this model (no backward, "
            "no optimizer: inference).",
            "Yes, as replicas: one copy of the model per GPU behind a load balancer multiplies "
            "requests served; tensor parallel only when one request's latency or the model's "
            "memory needs more than one GPU. Before buying: batch more requests per forward, "
            "keep shapes fixed, replay steps as CUDA graphs, torch.compile, or serve through "
            "TensorRT / ONNX Runtime.",
            tuple(evidence),
            confidence,
        )
    if busy is not None and busy >= GPU_BUSY:
        return Verdict(
            "gpu-bound",
            f"The GPU is busy {fmt_share(busy)} of the time: the code keeps it fed.",
            "Yes: this work is limited by the GPU, so more GPUs (data parallel) or a faster one "
            "will help. First check mixed precision and tensor-core use: often ~2x for free.",
            tuple(evidence),
            confidence,
        )
    # With a GPU timeline, a data wait or a sync costs only the GPU time it leaves idle (the
    # causes above); a sync while kernels run costs nothing. Without one, the host's shares.
    timeline = gpu is not None and gpu.window_us > 0
    if not inference and overhead and _data_as_host(data, sync, data_in_memory):
        assert data is not None
        return _in_memory_host_verdict(data, data_in_memory, evidence, confidence)
    if not timeline and data is not None and data >= INPUT_CRITICAL:
        return _input_verdict(data, evidence, confidence, inference=inference)
    # Moving the input is the data wait and the host's copies to the device, as the timeline's
    # idle causes count it: a step that copies pageable batches 72% of its time is input-bound.
    moving = (data or 0.0) + (phases.share("copy") or 0.0)
    if not timeline and on_gpu and data is not None and moving >= INPUT_CRITICAL:
        return _input_verdict(moving, evidence, confidence, inference=inference, copies=True)
    if not timeline and sync is not None and sync >= SYNC_CRITICAL:
        return _sync_verdict(sync, evidence, confidence)
    idle = 1.0 - busy if busy is not None else None
    if idle is None and not overhead:
        # Nothing measured the GPU's busy time and nothing measured the host's overhead: "the
        # host sets the pace" would be what is left, not what was seen.
        return _no_busy_reading_verdict(evidence)
    if inference:
        return Verdict(
            "host-bound",
            (
                f"The GPU idles {fmt_share(idle)} of the time{_idle_cause(gpu)} (inference: "
                "no backward, no optimizer)."
                if idle is not None
                else "The host (Python, kernel launches) sets the pace of this inference."
            ),
            "No: replicas or tensor parallel would idle the same way. Batch more requests per "
            "forward, keep shapes fixed so kernels and graphs are reused, replay the step as a "
            "CUDA graph (one launch instead of one per kernel), torch.compile "
            "(mode='reduce-overhead'), or serve through TensorRT / ONNX Runtime.",
            tuple(evidence),
            confidence,
        )
    head = (
        f"The GPU idles {fmt_share(idle)} of the time{_idle_cause(gpu)}."
        if idle is not None
        else "The GPU is not kept busy: the host (Python, kernel launches) sets the pace."
    )
    return Verdict(
        "host-bound",
        head,
        "No: more GPUs would idle the same way. Give each launch more work (bigger batch), "
        "fuse small ops with torch.compile, or capture steps with CUDA graphs.",
        tuple(evidence),
        confidence,
    )


def _no_busy_reading_verdict(evidence: list[str]) -> Verdict:
    return Verdict(
        "unknown",
        "No verdict: the GPU's busy time was not measured (no kernels in a trace, no NVML "
        "reading), and no wait, sync or host overhead sets the pace.",
        "Unknown: gpu-bound (more GPUs would help) or host-bound (they would idle the same way). "
        "A reading of the GPU's busy time would separate them: profile a window of steps "
        "(its kernels), or run where NVML reads the GPU's utilization.",
        ("GPU busy: not measured", *evidence),
        "low",
    )


def _host_evidence(host: HostOverhead) -> str:
    """The evidence line: ops per step, median op time, Python between ops."""
    return (
        f"{host.ops_per_step:.0f} host operators a step, median {host.median_op_us:.0f} us each; "
        f"Python between operators {100 * host.between_ops_share:.0f}% of the step, operators "
        f"under {host.small_op_us:.0f} us another {100 * host.small_op_share:.0f}%"
        + (
            f" (up to {100 * overhead_reach(host):.0f}% in a traced step: near the "
            f"{100 * HOST_BOUND_SHARE:.0f}% line, read as reaching it)"
            if overhead_near_line(host)
            else ""
        )
    )


def _window_evidence(gpu: GpuTimeline) -> str:
    """The busy share and the window it describes; the GPU span beside it when they differ."""
    from gpu_notebook.formatting import fmt_seconds

    what = {
        "steps": "the profiled steps",
        "gpu_span": "the GPU span (first to last kernel)",
        "caller": "the window",
    }[gpu.window_source]
    text = f"GPU busy {fmt_share(gpu.busy_share)} of {what} ({fmt_seconds(gpu.window_us / 1e6)})"
    span, span_busy = gpu.span_us, gpu.span_busy_us
    if (
        gpu.window_source != "gpu_span"
        and span
        and span_busy is not None
        and abs(span_busy / span - gpu.busy_share) >= WINDOWS_DIFFER
    ):
        outside = max(0.0, gpu.window_us - span)
        text += (
            f"; {fmt_share(span_busy / span)} from its first to its last kernel "
            f"({fmt_seconds(span / 1e6)}, the window HTA and TraceLens use): "
            f"{fmt_seconds(outside / 1e6)} of the window has no GPU work"
        )
    if gpu.host_ahead_us > 0.1 * gpu.window_us:
        text += (
            f"; the host ran ahead: the GPU finished the steps' work "
            f"{fmt_seconds(gpu.host_ahead_us / 1e6)} after the host had issued it, so the window "
            "runs on to there"
        )
        if gpu.queued_before_trace_us > 0:
            text += (
                f"; it opens when the GPU had spent {fmt_seconds(gpu.queued_before_trace_us / 1e6)} "
                "on work launched before the profiler started"
            )
    return text


def _idle_cause(gpu: GpuTimeline | None) -> str:
    """How the headline names the idle time: by its largest cause, as measured."""
    if gpu is None or gpu.idle_us <= 0:
        return " waiting for the host"
    if gpu.idle_other_us > gpu.idle_host_wait_us + gpu.idle_kernel_wait_us:
        return ", mostly with its work queued behind another stream or event"
    if gpu.idle_other_us + gpu.idle_data_wait_us + gpu.idle_sync_wait_us > 0.2 * gpu.idle_us:
        host = gpu.idle_host_wait_us / gpu.window_us
        return f" ({fmt_share(host)} of it waiting for the host to launch work)"
    return " waiting for the host"


def _gpu_idle_shares(gpu: GpuTimeline) -> dict[str, float]:
    """Each cause of GPU idle time as a share of the window."""
    w = gpu.window_us
    return {
        "host": gpu.idle_host_wait_us / w,
        "data": gpu.idle_data_wait_us / w,
        "sync": gpu.idle_sync_wait_us / w,
        "other": gpu.idle_other_us / w,
    }


def _gpu_evidence(gpu: GpuTimeline) -> list[str]:
    from gpu_notebook.formatting import fmt_seconds

    out = []
    w = gpu.window_us
    causes = [
        (name, us)
        for name, us in (
            ("waiting for the host to launch", gpu.idle_host_wait_us),
            ("while the host waits for data or copies", gpu.idle_data_wait_us),
            ("while the host syncs", gpu.idle_sync_wait_us),
            ("between back-to-back kernels", gpu.idle_kernel_wait_us),
            ("with work queued behind another stream or event", gpu.idle_other_us),
        )
        if us / w >= 0.01
    ]
    if causes:
        out.append(
            "GPU idle: "
            + ", ".join(
                f"{fmt_share(us / w)} {name}" for name, us in sorted(causes, key=lambda c: -c[1])
            )
        )
    overlap = gpu.comm_overlap_share
    if overlap is not None:
        out.append(
            f"collective kernels {fmt_share(gpu.comm_busy_us / w)} of the window, "
            f"{fmt_share(overlap)} of it overlapped by computation: exposed "
            f"{fmt_share(gpu.comm_exposed_us / w)}"
        )
    if gpu.graph_launches:
        out.append(
            f"CUDA-graph replays: {gpu.graph_launches} launch(es) ran "
            f"{fmt_seconds(gpu.graph_us / 1e6)} of GPU work (counted busy; one launch each)"
        )
    return out


def _gpu_comm_verdict(
    gpu: GpuTimeline, exposed: float, steps: int, evidence: list[str], confidence: Confidence
) -> Verdict:
    """Exposed collectives: the fix follows from how they sit against computation."""
    remedy = comm_remedy(gpu, steps)
    overlap = gpu.comm_overlap_share or 0.0
    fix = {
        "straggler": "the GPU mostly waits with its work queued behind other streams: the "
        "collectives wait for a slower peer. Find the straggler first (rank 0's job report, "
        "or `gpucheck analyze` on the ranks' traces), then overlap what remains.",
        "overlap": f"only {fmt_share(overlap)} of it runs under computation: overlap it. Let "
        "DDP launch bucket all-reduces during backward (no find_unused_parameters, no sync "
        "or .item() before the all-reduce, gradient_as_bucket_view=True), prefetch FSDP "
        "all-gathers.",
        "bucket": f"{gpu.collectives / max(1, steps):.0f} collectives a step: too many small "
        "ones. Raise bucket_cap_mb (DDP) so fewer, larger all-reduces run, or fuse them.",
        "accumulate": f"it is already {fmt_share(overlap)} overlapped and still exposed: do "
        "fewer all-reduces (accumulate gradients over steps under no_sync()), or send fewer "
        "bytes (bf16 / PowerSGD communication hooks).",
    }[remedy]
    return Verdict(
        "comm-bound",
        f"Communication nothing overlaps takes {fmt_share(exposed)} of the GPU window.",
        "Not more of the same: each added GPU adds communication. " + fix[0].upper() + fix[1:],
        (f"exposed collectives: {fmt_share(exposed)} of the window", *evidence),
        confidence,
    )


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
    return Verdict(
        "unknown",
        "This trace records a CUDA-graph capture, not a step: its launches were recorded into "
        "a graph, not run.",
        "Unknown from a capture: profile the steps that replay the graph to see how busy the "
        "GPU is.",
        (
            f"{gpu.launches_without_work} of {gpu.kernel_launches} kernel launches ran no kernel "
            "(captured into a graph)",
        ),
        "low",
    )


def _comm_verdict(share: float, what: str, evidence: list[str], confidence: Confidence) -> Verdict:
    """The host waits on collectives: for a slower peer (lockstep), or for the transfer."""
    return Verdict(
        "comm-bound",
        f"Waiting in collectives (all-reduce...) takes {fmt_share(share)} of every step: "
        "this rank waits for its peers, it does not compute.",
        "Not more of the same: each added rank adds communication and one more peer to wait "
        "for. If the ranks wait for one slow peer (a straggler), fix that rank first: rank 0's "
        "job report names it and its cause. Otherwise overlap the all-reduce with backward, or "
        "accumulate more steps per all-reduce.",
        (f"{what}: {fmt_share(share)} of step time", *evidence),
        confidence,
    )


def _has_gpu(env: Environment) -> bool:
    return env.cuda_available or bool(env.gpus)


def _gpu_busy_share(analysis: Analysis) -> float | None:
    """GPU busy share from the trace when it has GPU events, else from NVML utilization."""
    if analysis.gpu is not None and analysis.gpu.window_us > 0:
        return analysis.gpu.busy_share
    mean = analysis.utilization.gpu_util_mean_pct
    return mean / 100.0 if mean is not None else None


def _input_verdict(
    data: float,
    evidence: list[str],
    confidence: Confidence,
    *,
    on_cpu: bool = False,
    inference: bool = False,
    copies: bool = False,
) -> Verdict:
    if inference and not on_cpu:
        more = (
            f"No: replicas would wait for their inputs the same way. Feed the model faster first "
            f"(gain from this alone: {fmt_gain(amdahl_bound(data))}): batch requests, prepare "
            "inputs off the serving thread, copy from pinned memory with non_blocking=True."
        )
    elif on_cpu:
        # No device here: say once, apart, what the wait would mean on one.
        more = (
            f"No: the step waits for data, and a GPU only shortens compute. Fix the input "
            f"pipeline first (gain from this alone: {fmt_gain(amdahl_bound(data))}); "
            f"on a GPU the same wait would leave the card idle."
        )
    else:
        more = (
            f"No: every added GPU would wait for data the same way. Fix the input pipeline first "
            f"(gain from this alone: {fmt_gain(amdahl_bound(data))})."
        )
    what = "Waiting for data and copying it to the GPU take" if copies else "Waiting for data takes"
    return Verdict(
        "input-bound",
        f"{what} {fmt_share(data)} of every step.",
        more,
        tuple(evidence),
        confidence,
    )


def _sync_verdict(
    sync: float, evidence: list[str], confidence: Confidence, *, on_cpu: bool = False
) -> Verdict:
    if on_cpu:
        # No device here: the reads cost host time, nothing waits on a card. Say once, apart,
        # what they would mean on one.
        return Verdict(
            "sync-bound",
            f"Reading values on the host (.item(), .cpu(), printing tensors) takes {fmt_share(sync)} "
            "of every step.",
            f"Not as it is: this time is host work, which a GPU does not shorten. Read values "
            f"less often first (gain: {fmt_gain(amdahl_bound(sync))}); on a GPU each such read "
            "would also make the host wait for every queued kernel.",
            tuple(evidence),
            confidence,
        )
    return Verdict(
        "sync-bound",
        f"Host syncs (.item(), .cpu(), synchronize) take {fmt_share(sync)} of every step.",
        f"No: each sync stalls the pipeline, on every GPU alike. Remove per-step syncs first "
        f"(gain: {fmt_gain(amdahl_bound(sync))}).",
        tuple(evidence),
        confidence,
    )


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
    evidence: list[str],
    confidence: Confidence,
    *,
    host_bound: bool = False,
    own_python_share: float | None = None,
    overhead_share: float | None = None,
    outside_share: float | None = None,
    inference: bool = False,
    data_in_memory: str | None = None,
    compute: ComputeEvidence | None = None,
) -> Verdict:
    """The CPU run's verdict: a wait or host overhead at its line, else what the run's own
    evidence says the step's time is. "Compute" (a GPU would help) is said only when the loop
    thread was on a core for most of its steps' own time, or, where that was not read, when
    torch's operators hold most of the step; never as what is left when nothing else fired."""
    compute = compute if compute is not None else ComputeEvidence(None, None, None)
    evidence.insert(0, "no CUDA device visible: phases measured on the CPU")
    if host_bound and not inference and _data_as_host(data, sync, data_in_memory):
        assert data is not None
        return _in_memory_host_verdict(data, data_in_memory, evidence, confidence, on_cpu=True)
    if data is not None and data >= INPUT_CRITICAL:
        return _input_verdict(data, evidence, confidence, on_cpu=True)
    if sync is not None and sync >= SYNC_CRITICAL:
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
        return Verdict(
            "host-bound",
            f"The cell's own Python between operators takes {fmt_share(own_python_share)} of "
            "the run's step time: host work, not the model, sets the pace.",
            "No: a GPU does not run Python. Find the host work in the loop (the hot lines and "
            "the findings name it) and move it out of the step or do it less often.",
            tuple(evidence),
            confidence,
        )
    if host_bound:
        return Verdict(
            "host-bound",
            "Python and per-operator overhead set the pace: the ops are too small to be the work.",
            "No: a GPU would not help as it is. Give each op more work first (bigger batch), or "
            "fuse them (torch.compile); on a GPU each of these ops would become a kernel "
            "shorter than its own launch, paced by the same Python.",
            tuple(evidence),
            confidence,
        )
    if compute.waits:
        return _waiting_verdict(compute, evidence, confidence)
    if compute.own_code:
        return _own_code_verdict(compute, evidence, confidence)
    if not compute.computes:
        return _no_compute_evidence_verdict(compute, evidence)
    evidence.insert(1, _compute_line(compute))
    confidence = _on_cpu_uncertainty(compute, "cpu-only (compute)", evidence, confidence)
    if inference:
        return Verdict(
            "cpu-only",
            "No GPU is visible; this inference (no backward, no optimizer) spends its time "
            "computing on the CPU.",
            "A GPU would help this inference: its time goes to compute, not to waiting. On one, "
            "measure again before buying more: serve replicas for throughput (tensor parallel "
            "only for latency or a model too big for one card), and first batch requests, keep "
            "shapes fixed, use CUDA graphs, torch.compile or TensorRT / ONNX Runtime.",
            tuple(evidence),
            confidence,
        )
    return Verdict(
        "cpu-only",
        "No GPU is visible; this loop spends its time computing on the CPU.",
        "A GPU would help this loop: its time goes to compute, not to waiting. Measure again "
        "on a GPU to see whether one card is kept busy before buying more.",
        tuple(evidence),
        confidence,
    )


@dataclasses.dataclass(frozen=True)
class ComputeEvidence:
    """What the run says of whether the step's time is compute: the loop thread's time on a core
    (analysis/on_cpu, every read step of the run), and the phase split's operators' time and its
    time outside them (the cell's own code)."""

    on_cpu: OnCpu | None
    ops: float | None  # torch's operators (trace) or the model's hooks (no trace), share of step
    outside: float | None  # the cell's own code outside them, share of the step

    @property
    def waits(self) -> bool:
        """Off a core for most of its own time: sleeping, blocked on I/O, a lock, a process."""
        return self.on_cpu is not None and self.on_cpu.computing < ON_CPU_COMPUTE

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
        if self.on_cpu is not None:
            return self.on_cpu.computing >= ON_CPU_COMPUTE
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


def _compute_line(compute: ComputeEvidence) -> str:
    on = compute.on_cpu
    if on is not None and on.process is not None and on.process > on.share:
        return (
            f"this process's threads on a core {on.process:.2f} core(s) per second of the "
            f"steps' own time (the loop thread {fmt_share(on.share)}: it waits for torch's "
            "other threads at each parallel region's end)"
        )
    if on is not None:
        return (
            f"loop thread on a core {fmt_share(on.share)} of its own step time (range "
            f"{fmt_share(on.low)}-{fmt_share(on.high)} over {on.steps} steps; wall time less "
            "its wait for a core, schedstat)"
        )
    return (
        f"torch operators {fmt_share(compute.ops or 0.0)} of the step (the loop thread's time "
        "on a core was not read)"
    )


def _on_cpu_uncertainty(
    compute: ComputeEvidence, found: str, evidence: list[str], confidence: Confidence
) -> Confidence:
    """Say both answers when the on-core share's range straddles its line."""
    on = compute.on_cpu
    if on is None or not on.low < ON_CPU_COMPUTE <= on.high:
        return confidence
    if on.process is not None and on.process >= ON_CPU_COMPUTE:
        return confidence  # the process's threads compute, whatever the loop thread's share
    other = "host-bound (waiting)" if found.startswith("cpu-only") else "cpu-only (compute)"
    evidence.append(
        f"loop thread on a core {fmt_share(on.share)} (range {fmt_share(on.low)}-"
        f"{fmt_share(on.high)}) lies across the {fmt_share(ON_CPU_COMPUTE)} line: {found} or "
        f"{other} within the uncertainty; more steps (-s) or a quieter machine would separate them"
    )
    return "low"


def _waiting_verdict(
    compute: ComputeEvidence, evidence: list[str], confidence: Confidence
) -> Verdict:
    assert compute.on_cpu is not None
    evidence.insert(1, _compute_line(compute))
    confidence = _on_cpu_uncertainty(compute, "host-bound (waiting)", evidence, confidence)
    return Verdict(
        "host-bound",
        f"The loop's thread is on a core only {fmt_share(compute.on_cpu.share)} of its steps' "
        "own time: the step waits on something outside torch (a sleep, I/O, a lock, another "
        "process); it does not compute.",
        "No: a GPU only shortens compute, and most of this step is not compute. Find what the "
        "loop waits on (the hot lines and the findings name it) and remove it, overlap it with "
        "the step, or do it less often.",
        tuple(evidence),
        confidence,
    )


def _own_code_verdict(
    compute: ComputeEvidence, evidence: list[str], confidence: Confidence
) -> Verdict:
    share = compute.outside or 0.0
    evidence.insert(1, f"outside torch operators: {fmt_share(share)} of the step")
    if compute.on_cpu is not None:
        evidence.insert(2, _compute_line(compute))
    how = (
        "it computes on the host"
        if compute.on_cpu is not None
        else "host work or a wait (the loop thread's time on a core was not read)"
    )
    return Verdict(
        "host-bound",
        f"The cell's own code outside torch's operators takes {fmt_share(share)} of the step: "
        f"{how}, not the model.",
        "No: a GPU runs torch's operators, not this code. Find it in the loop (the hot lines "
        "name it) and move it into tensor operations, out of the step, or do it less often.",
        tuple(evidence),
        confidence,
    )


def _no_compute_evidence_verdict(compute: ComputeEvidence, evidence: list[str]) -> Verdict:
    ops = fmt_share(compute.ops) if compute.ops is not None else "an unmeasured share"
    return Verdict(
        "unknown",
        f"No verdict: no wait or host overhead sets the pace, yet torch's operators hold only "
        f"{ops} of the step and the loop thread's time on a core was not read.",
        "Unknown: compute (a GPU would help) or a wait outside torch (it would not). The loop "
        "thread's time on a core (Linux, steps of 0.5 ms or more) would separate them, or a "
        "profiled window of the steps that hold the time (%%gpucheck -w N, -s N).",
        tuple(evidence),
        "low",
    )


def _data_as_host(data: float | None, sync: float | None, data_in_memory: str | None) -> bool:
    """Whether the step's data wait is per-sample assembly of batches already in memory, with no
    host sync at its critical level (that verdict stands). Any measured share counts, not one
    past a line: the headline names the wait in every run of the cell, whatever its share."""
    if sync is not None and sync >= SYNC_CRITICAL:
        return False
    return data_in_memory is not None and data is not None and data > 0


def _in_memory_host_verdict(
    data: float,
    why: str | None,
    evidence: list[str],
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
    evidence.append(
        f"data wait {fmt_share(data)} of step time counted as host work, not input starvation: "
        f"{why or 'the batches are already in memory'}"
    )
    gpu = (
        "on a GPU each of these ops would become a kernel shorter than its own launch, paced by "
        "the same Python."
        if on_cpu
        else "more GPUs would idle the same way."
    )
    return Verdict(
        "host-bound",
        "Python and per-operator overhead set the pace: the ops are too small to be the work, "
        f"and assembling each batch sample by sample from memory takes {fmt_share(data)} of "
        "the step.",
        f"No: a GPU would not help as it is. Index whole batches from memory (no workers: the "
        f"data is already there; gain from this alone: {fmt_gain(amdahl_bound(data))}) and give "
        f"each op more work (bigger batch) or fuse them (torch.compile); {gpu}",
        tuple(evidence),
        confidence,
        data_as_host=data,
    )
