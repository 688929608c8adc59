"""Words of the multi-GPU rules (rules/distributed.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.distributed import Communication, DataParallel, OwnCollectives
from gpu_notebook.words.common import Words, unclocked_clause, worder, words


@worder(DataParallel)
def data_parallel(s: DataParallel) -> Words:
    evidence = [f"line {s.line}: `{s.text}`"] if s.line is not None else []
    evidence += [f"`{name}` is an nn.DataParallel ({kind})" for name, kind in s.live]
    evidence.append(f"{s.gpus} GPU(s) visible")
    evidence.append(
        "no gain bound: DataParallel's per-step replicate/scatter/gather is not separated in the trace"
    )
    return words(
        "nn.DataParallel drives every GPU from one Python thread",
        evidence,
        "Use DistributedDataParallel (one process per GPU, started with torchrun); it overlaps the "
        "gradient exchange with backward.",
        "PyTorch docs (DataParallel: 'use DistributedDataParallel instead')",
    )


@worder(Communication)
def communication(s: Communication) -> Words:
    share = (
        f"{fmt_share(s.share_low)}-{fmt_share(s.share_high)}"
        if s.unclocked_events
        else fmt_share(s.share)
    )
    return words(
        f"Collectives nothing overlaps take {share} of the GPU window",
        [
            f"collective kernels: {s.busy_us / 1e3:.1f} ms of a {s.window_us / 1e3:.1f} ms "
            f"window, {fmt_share(s.overlapped)} of it overlapped by computation: "
            f"exposed {s.exposed_us / 1e3:.1f} ms ({fmt_share(s.share)})"
            + (
                f"; {unclocked_clause(s.unclocked_events)}, which may be computation hiding the "
                "collectives or collectives nothing hides: exposed "
                f"{fmt_share(s.share_low)}-{fmt_share(s.share_high)}, not measured"
                if s.unclocked_events
                else ""
            ),
            f"gain if all communication overlapped with compute: {fmt_gain(s.bound)} (upper bound)",
            "more GPUs of the same kind add communication: check scaling efficiency before buying",
        ],
        "Overlap the all-reduce with backward (DDP buckets, gradient_as_bucket_view=True), "
        "accumulate several micro-batches per all-reduce (no_sync()), or compress gradients "
        "(PowerSGD / fp16 hooks).",
        "PyTorch TensorBoard profiler plugin (communication > 10% of step); TraceML (critical 20%)",
    )


@worder(OwnCollectives)
def own_collectives(s: OwnCollectives) -> Words:
    first = s.calls[0]
    evidence = [f"line {line}: `{text}` runs every step" for line, text, _ in s.calls]
    evidence.append(_own_share(s))
    if s.clock_steps is not None and s.traced is not None:
        evidence.append(
            f"read on the loop thread's own clock over {s.clock_steps} steps (off a core, not "
            "waiting for one, less the machine's load); the profiled steps' trace puts that "
            f"wait in collectives and read {fmt_share(s.traced)} of their wall time"
        )
    evidence.append(
        f"upper bound {fmt_gain(s.bound)}: all of the collectives' time gone, any gradient "
        "exchange's (which stays) included"
    )
    return words(
        f"The step loop runs a collective of its own every step (line {first[0]})",
        evidence,
        "Each collective waits for every rank. "
        "Where it serves a log or a metric, run it only on the steps that log, under the same "
        "condition on every rank (`if step % 20 == 0:` around the reduce and the print), or keep "
        "a local running sum and reduce it every N steps.",
        "PyTorch distributed docs (collectives are blocking for all ranks of the group)",
    )


def _own_share(s: OwnCollectives) -> str:
    """What the share holds, as far as the measurement told the loop's collectives apart."""
    if s.on_gpu and s.unclocked_events:
        return (
            f"collectives take {fmt_share(s.share)}-{fmt_share(s.share_high)} of the GPU window, "
            f"not overlapped ({unclocked_clause(s.unclocked_events)}: they may be computation "
            "hiding the collectives or collectives nothing hides; yours and any DDP gradient "
            "all-reduce together)"
        )
    if s.on_gpu:
        return (
            f"collectives take {fmt_share(s.share)} of the GPU window, not overlapped (yours "
            "and any DDP gradient all-reduce together; the kernels do not tell them apart)"
        )
    if s.in_backward is None:
        return (
            f"collectives take {fmt_share(s.share)} of the step (yours and any gradient "
            "exchange together: the trace did not tell them apart)"
        )
    if not s.in_backward:
        return (
            f"the host waits in collectives {fmt_share(s.share)} of the step, all of it "
            "outside backward (the loop's own)"
        )
    return (
        f"the host waits in collectives {fmt_share(s.share)} of the step: "
        f"{fmt_share(1.0 - s.in_backward)} of that wait outside backward (the loop's own), "
        f"{fmt_share(s.in_backward)} in backward (the gradient exchange: ranks in lockstep "
        "wait at whichever collective a peer reaches late, so without yours that wait moves "
        "there)"
    )
