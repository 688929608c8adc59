"""The verdict's headline and its more-GPUs answer, worded from the answer's figures
(``analysis/verdict_said.py``: one record per answer, decided by ``analysis/verdict.py``)."""

from __future__ import annotations

from functools import singledispatch

from gpu_notebook.analysis import verdict_said as said
from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.records import VerdictAnswer

__all__ = ["answer_words"]


@singledispatch
def answer_words(answer: VerdictAnswer) -> tuple[str, str]:
    """(headline, more-GPUs answer) of ``answer``."""
    raise TypeError(f"no words for the verdict's answer {type(answer).__name__}")


@answer_words.register
def _(a: said.NoStep) -> tuple[str, str]:
    if a.from_a_file:
        return (
            "No training step was found in this trace.",
            "Unknown: this trace has no ProfilerStep ranges and no host operators to split "
            "into steps.",
        )
    return (
        "No training step was detected in this cell.",
        "Unknown: gpucheck counts steps at an optimizer's step, a DataLoader's batches or a "
        "backward pass (loss.backward(), torch.autograd.grad); this cell ran none of them.",
    )


@answer_words.register
def _(a: said.NotRepresented) -> tuple[str, str]:
    return (
        "No verdict for this run: the profiled window is unlike most of it, and no timing "
        "covers the rest.",
        "Unknown: profile the steps that hold most of the time (%%gpucheck -w N starts the "
        "window later; -s N records more steps), then ask again.",
    )


@answer_words.register
def _(a: said.TrainsInChildren) -> tuple[str, str]:
    _, more = answer_words(a.inner)
    return "No training step ran in this process: the cell trains in child processes.", more


@answer_words.register
def _(a: said.DefinedNotRun) -> tuple[str, str]:
    names = defined_names(a.names)
    return (
        f"No training step ran: this cell defines {names} and does not call it.",
        f"Unknown: nothing trained in this cell. Put %%gpucheck on the cell that calls {names}.",
    )


@answer_words.register
def _(a: said.ScheduledNotRun) -> tuple[str, str]:
    names = defined_names(a.names)
    if a.scheduler is None:
        return (
            f"No training step ran: this cell calls the coroutine {names} and never awaits it.",
            f"Unknown: nothing trained in this cell. Await it in the measured cell "
            f"(await {a.names[0]}(...)).",
        )
    return (
        f"No training step ran in this cell: {names} runs as an asyncio task after it ends.",
        "Unknown: nothing trained while the cell ran. Await the training in the measured cell "
        f"(await {a.names[0]}(...), or await the task at its end) to measure it.",
    )


def defined_names(names: tuple[str, ...]) -> str:
    return ", ".join(f"{n}()" for n in names)


@answer_words.register
def _(a: said.MemoryBound) -> tuple[str, str]:
    return (
        f"GPU memory peaks at {fmt_share(a.peak_share)} of the card while the GPU is not kept "
        "busy.",
        "A bigger card would let the batch grow; before buying, try activation checkpointing, "
        "gradient accumulation or mixed precision (about half the activations).",
    )


@answer_words.register
def _(a: said.GpuBound) -> tuple[str, str]:
    if a.inference:
        return (
            f"The GPU is busy {fmt_share(a.busy)} of the time serving this model (no backward, "
            "no optimizer: inference).",
            "Yes, as replicas: one copy of the model per GPU behind a load balancer multiplies "
            "requests served; tensor parallel only when one request's latency or the model's "
            "memory needs more than one GPU. Before buying: batch more requests per forward, "
            "keep shapes fixed, replay steps as CUDA graphs, torch.compile, or serve through "
            "TensorRT / ONNX Runtime.",
        )
    if a.partial:
        top = f"at most {fmt_share(a.busy_high)}" if a.busy_high is not None else "its top unknown"
        return (
            f"The GPU is busy at least {fmt_share(a.busy)} of the time ({top}: the trace's GPU "
            "timeline is partial), and the host waited on it: the code keeps it fed.",
            "Likely: the host's waits say the GPU sets the pace, so more GPUs (data parallel) or "
            "a faster one should help; a trace with every GPU event clocked would measure by how "
            "much. First check mixed precision and tensor-core use: often ~2x for free.",
        )
    return (
        f"The GPU is busy {fmt_share(a.busy)} of the time: the code keeps it fed.",
        "Yes: this work is limited by the GPU, so more GPUs (data parallel) or a faster one "
        "will help. First check mixed precision and tensor-core use: often ~2x for free.",
    )


_IDLE_CAUSES = {
    "host": " waiting for the host",
    "queued": ", mostly with its work queued behind another stream or event",
}


@answer_words.register
def _(a: said.GpuIdles) -> tuple[str, str]:
    cause = _IDLE_CAUSES.get(
        a.cause, f" ({fmt_share(a.host_share)} of it waiting for the host to launch work)"
    )
    if a.idle_least is not None and a.idle is not None:
        # A partial GPU timeline: the idle share between its bounds.
        span = (
            f"{fmt_share(a.idle_least)}-{fmt_share(a.idle)}"
            if a.idle_least > 0
            else f"up to {fmt_share(a.idle)}"
        )
        cause += f" (the trace's GPU timeline is partial: {span})"
    if a.inference:
        return (
            f"The GPU idles {fmt_share(a.idle)} of the time{cause} (inference: no backward, no "
            "optimizer)."
            if a.idle is not None
            else "The host (Python, kernel launches) sets the pace of this inference.",
            "No: replicas or tensor parallel would idle the same way. Batch more requests per "
            "forward, keep shapes fixed so kernels and graphs are reused, replay the step as a "
            "CUDA graph (one launch instead of one per kernel), torch.compile "
            "(mode='reduce-overhead'), or serve through TensorRT / ONNX Runtime.",
        )
    return (
        f"The GPU idles {fmt_share(a.idle)} of the time{cause}."
        if a.idle is not None
        else "The GPU is not kept busy: the host (Python, kernel launches) sets the pace.",
        "No: more GPUs would idle the same way. Give each launch more work (bigger batch), "
        "fuse small ops with torch.compile, or capture steps with CUDA graphs.",
    )


@answer_words.register
def _(a: said.HostPaced) -> tuple[str, str]:
    waited = fmt_share(a.waits.share or 0.0)
    head = (
        f"The host sets the pace: it waited on the GPU {waited} of the step. NVML read the GPU "
        f"busy {fmt_share(a.nvml_busy)}, but that counts any time a kernel ran, and this trace "
        "has no usable GPU timeline to measure the kernels' own time."
    )
    fix = (
        "Batch more requests per forward, keep shapes fixed, replay the step as a CUDA graph, "
        "or torch.compile (mode='reduce-overhead')."
        if a.inference
        else "Give each launch more work (bigger batch), fuse small ops with torch.compile, or "
        "capture steps with CUDA graphs."
    )
    return (
        head,
        "Probably not: a host that does not wait on its GPU would not wait on more of them. "
        f"{fix} A trace with GPU timestamps (run again) would measure how long the GPU idles.",
    )


@answer_words.register
def _(a: said.NoBusyReading) -> tuple[str, str]:
    return (
        "No verdict: the GPU's busy time was not measured (no kernels in a trace, no NVML "
        "reading), and no wait, sync or host overhead sets the pace.",
        "Unknown: gpu-bound (more GPUs would help) or host-bound (they would idle the same way). "
        "A reading of the GPU's busy time would separate them: profile a window of steps "
        "(its kernels), or run where NVML reads the GPU's utilization.",
    )


@answer_words.register
def _(a: said.ExposedComm) -> tuple[str, str]:
    fix = {
        "straggler": "the GPU mostly waits with its work queued behind other streams: the "
        "collectives wait for a slower peer. Find the straggler first (rank 0's job report, "
        "or `gpucheck analyze` on the ranks' traces), then overlap what remains.",
        "overlap": f"only {fmt_share(a.overlap)} of it runs under computation: overlap it. Let "
        "DDP launch bucket all-reduces during backward (no find_unused_parameters, no sync "
        "or .item() before the all-reduce, gradient_as_bucket_view=True), prefetch FSDP "
        "all-gathers.",
        "bucket": f"{a.per_step:.0f} collectives a step: too many small ones. Raise "
        "bucket_cap_mb (DDP) so fewer, larger all-reduces run, or fuse them.",
        "accumulate": f"it is already {fmt_share(a.overlap)} overlapped and still exposed: do "
        "fewer all-reduces (accumulate gradients over steps under no_sync()), or send fewer "
        "bytes (bf16 / PowerSGD communication hooks).",
    }[a.remedy]
    return (
        f"Communication nothing overlaps takes {fmt_share(a.exposed)} of the GPU window.",
        "Not more of the same: each added GPU adds communication. " + fix[0].upper() + fix[1:],
    )


@answer_words.register
def _(a: said.GraphCapture) -> tuple[str, str]:
    return (
        "This trace records a CUDA-graph capture, not a step: its launches were recorded into "
        "a graph, not run.",
        "Unknown from a capture: profile the steps that replay the graph to see how busy the "
        "GPU is.",
    )


@answer_words.register
def _(a: said.HostComm) -> tuple[str, str]:
    more = (
        "Not more of the same: each added rank adds communication and one more peer to wait "
        "for. If the ranks wait for one slow peer (a straggler), fix that rank first: rank 0's "
        "job report names it and its cause. "
    )
    own = None if a.in_backward is None else 1.0 - a.in_backward
    if own is not None and own >= 0.5:
        # Most of the wait is outside backward: the loop's own collectives, not the gradients'.
        where = f"{fmt_share(own)} of that wait outside backward, in the loop's own collectives"
        if a.in_backward:
            where += f", {fmt_share(a.in_backward)} in backward (the gradient exchange)"
        return (
            f"Waiting in collectives takes {fmt_share(a.share)} of every step ({where}): this "
            "rank waits for its peers, it does not compute.",
            more + "Otherwise run the loop's own collectives less often (only on the steps "
            "that log, under the same condition on every rank), or reduce a running sum every "
            "N steps.",
        )
    where = "" if a.in_backward is None else f" ({fmt_share(a.in_backward)} of it in backward)"
    return (
        f"Waiting in collectives (all-reduce...) takes {fmt_share(a.share)} of every step"
        f"{where}: this rank waits for its peers, it does not compute.",
        more + "Otherwise overlap the all-reduce with backward, or accumulate more steps per "
        "all-reduce.",
    )


@answer_words.register
def _(a: said.InputBound) -> tuple[str, str]:
    if a.inference and not a.on_cpu:
        more = (
            f"No: replicas would wait for their inputs the same way. Feed the model faster first "
            f"(gain from this alone: {fmt_gain(a.gain)}): batch requests, prepare "
            "inputs off the serving thread, copy from pinned memory with non_blocking=True."
        )
    elif a.on_cpu:
        # No device here: say once, apart, what the wait would mean on one.
        more = (
            f"No: the step waits for data, and a GPU only shortens compute. Fix the input "
            f"pipeline first (gain from this alone: {fmt_gain(a.gain)}); "
            f"on a GPU the same wait would leave the card idle."
        )
    else:
        more = (
            f"No: every added GPU would wait for data the same way. Fix the input pipeline first "
            f"(gain from this alone: {fmt_gain(a.gain)})."
        )
    what = (
        "Waiting for data and copying it to the GPU take" if a.copies else "Waiting for data takes"
    )
    return f"{what} {fmt_share(a.data)} of every step.", more


@answer_words.register
def _(a: said.SyncBound) -> tuple[str, str]:
    if a.on_cpu:
        # No device here: the reads cost host time, nothing waits on a card. Say once, apart,
        # what they would mean on one.
        return (
            f"Reading values on the host (.item(), .cpu(), printing tensors) takes "
            f"{fmt_share(a.sync)} of every step.",
            f"Not as it is: this time is host work, which a GPU does not shorten. Read values "
            f"less often first (gain: {fmt_gain(a.gain)}); on a GPU each such read "
            "would also make the host wait for every queued kernel.",
        )
    return (
        f"Host syncs (.item(), .cpu(), synchronize) take {fmt_share(a.sync)} of every step.",
        f"No: each sync stalls the pipeline, on every GPU alike. Remove per-step syncs first "
        f"(gain: {fmt_gain(a.gain)}).",
    )


@answer_words.register
def _(a: said.OwnPython) -> tuple[str, str]:
    return (
        f"The cell's own Python between operators takes {fmt_share(a.share)} of the run's step "
        "time: host work, not the model, sets the pace.",
        "No: a GPU does not run Python. Find the host work in the loop (the hot lines and the "
        "findings name it) and move it out of the step or do it less often.",
    )


@answer_words.register
def _(a: said.TinyOps) -> tuple[str, str]:
    return (
        "Python and per-operator overhead set the pace: the ops are too small to be the work.",
        "No: a GPU would not help as it is. Give each op more work first (bigger batch), or "
        "fuse them (torch.compile); on a GPU each of these ops would become a kernel "
        "shorter than its own launch, paced by the same Python.",
    )


@answer_words.register
def _(a: said.CpuCompute) -> tuple[str, str]:
    if a.inference:
        return (
            "No GPU is visible; this inference (no backward, no optimizer) spends its time "
            "computing on the CPU.",
            "A GPU would help this inference: its time goes to compute, not to waiting. On one, "
            "measure again before buying more: serve replicas for throughput (tensor parallel "
            "only for latency or a model too big for one card), and first batch requests, keep "
            "shapes fixed, use CUDA graphs, torch.compile or TensorRT / ONNX Runtime.",
        )
    return (
        "No GPU is visible; this loop spends its time computing on the CPU.",
        "A GPU would help this loop: its time goes to compute, not to waiting. Measure again "
        "on a GPU to see whether one card is kept busy before buying more.",
    )


@answer_words.register
def _(a: said.Waiting) -> tuple[str, str]:
    return (
        f"The loop's thread is on a core only {fmt_share(a.share)} of its steps' own time: the "
        "step waits on something outside torch (a sleep, I/O, a lock, another process); it "
        "does not compute.",
        "No: a GPU only shortens compute, and most of this step is not compute. Find what the "
        "loop waits on (the hot lines and the findings name it) and remove it, overlap it with "
        "the step, or do it less often.",
    )


@answer_words.register
def _(a: said.OwnCode) -> tuple[str, str]:
    how = (
        "it computes on the host"
        if a.on_core_read
        else "host work or a wait (the loop thread's time on a core was not read)"
    )
    return (
        f"The cell's own code outside torch's operators takes {fmt_share(a.share)} of the step: "
        f"{how}, not the model.",
        "No: a GPU runs torch's operators, not this code. Find it in the loop (the hot lines "
        "name it) and move it into tensor operations, out of the step, or do it less often.",
    )


@answer_words.register
def _(a: said.OwnThreadWait) -> tuple[str, str]:
    held = "all of it" if a.held >= 0.995 else f"about {fmt_share(a.held)} of it"
    return (
        f"Host-bound by this program's own thread `{a.function}`: the steps waited "
        f"{fmt_share(a.wait_share)} of their time for a core, {held} this thread's (it runs "
        "beside the loop and holds a core and the GIL the loop waits for), not the machine's.",
        f"No: the steps wait for this program's own thread `{a.function}` on the CPU, and more "
        "GPUs would wait the same. Make the thread sleep or block in its loop, or stop it (its "
        "finding below), then measure again to read the code's own split.",
    )


@answer_words.register
def _(a: said.NoComputeEvidence) -> tuple[str, str]:
    ops = fmt_share(a.ops) if a.ops is not None else "an unmeasured share"
    return (
        f"No verdict: no wait or host overhead sets the pace, yet torch's operators hold only "
        f"{ops} of the step and the loop thread's time on a core was not read.",
        "Unknown: compute (a GPU would help) or a wait outside torch (it would not). The loop "
        "thread's time on a core (Linux, steps of 0.5 ms or more) would separate them, or a "
        "profiled window of the steps that hold the time (%%gpucheck -w N, -s N).",
    )


@answer_words.register
def _(a: said.InMemoryHost) -> tuple[str, str]:
    gpu = (
        "on a GPU each of these ops would become a kernel shorter than its own launch, paced by "
        "the same Python."
        if a.on_cpu
        else "more GPUs would idle the same way."
    )
    if a.whole:
        return (
            "Python and per-operator overhead set the pace: the ops are too small to be the "
            f"work, and the loader's own work for each batch (the dataset already builds it in "
            f"one call) takes {fmt_share(a.data)} of the step.",
            "No: a GPU would not help as it is. Give each op more work (bigger batch) or fuse "
            "them (torch.compile); the batches are already indexed whole, and workers would "
            f"add their handoff to each; {gpu}",
        )
    return (
        "Python and per-operator overhead set the pace: the ops are too small to be the work, "
        f"and assembling each batch sample by sample from memory takes {fmt_share(a.data)} of "
        "the step.",
        f"No: a GPU would not help as it is. Index whole batches from memory (no workers: the "
        f"data is already there; gain from this alone: {fmt_gain(a.gain)}) and give "
        f"each op more work (bigger batch) or fuse them (torch.compile); {gpu}",
    )


@answer_words.register
def _(a: said.ChildrenInput) -> tuple[str, str]:
    return (
        f"The training ran in {a.processes} child process(es): its steps wait for data "
        f"({fmt_share(a.data)} of their time in the DataLoader).",
        "No: more GPUs would wait for the same loader; feed the children faster first "
        "(DataLoader workers in each child, pinned memory).",
    )


@answer_words.register
def _(a: said.ChildrenUnknown) -> tuple[str, str]:
    return (
        f"The training ran in {a.processes} child process(es): its steps go mostly to "
        f"{a.phase} ({fmt_share(a.share)}); not profiled, so GPU and host work are not told "
        "apart.",
        "Unknown: profile a child's steps (as a torchrun rank under `gpucheck run`) to "
        "tell GPU from host work.",
    )


@answer_words.register
def _(a: said.Undecided) -> tuple[str, str]:
    top = f"at most {fmt_share(a.high)}" if a.high is not None else "its top not bounded"
    return (
        f"Undecided between {a.at_low} and {a.at_high}: the trace's GPU timeline is partial "
        f"(GPU busy at least {fmt_share(a.low)}, {top}). Read as clocked it gives {a.at_low}; "
        f"with the GPU as busy as the evidence allows, {a.at_high}.",
        f"Unknown: {a.at_low} (more GPUs would idle the same way) or {a.at_high}. A trace whose "
        "GPU events all carry timestamps (profile again), or NVML read inside more steps "
        "(-s N), would separate them.",
    )
