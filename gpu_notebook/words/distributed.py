"""Words of the multi-GPU rules (rules/distributed.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.distributed import Communication, DataParallel
from gpu_notebook.words.common import Words, worder, words


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
    return words(
        f"Collectives nothing overlaps take {fmt_share(s.share)} of the GPU window",
        [
            f"collective kernels: {s.busy_us / 1e3:.1f} ms of a {s.window_us / 1e3:.1f} ms "
            f"window, {fmt_share(s.overlapped)} of it overlapped by computation: "
            f"exposed {s.exposed_us / 1e3:.1f} ms ({fmt_share(s.share)})",
            f"gain if all communication overlapped with compute: {fmt_gain(s.bound)} (upper bound)",
            "more GPUs of the same kind add communication: check scaling efficiency before buying",
        ],
        "Overlap the all-reduce with backward (DDP buckets, gradient_as_bucket_view=True), "
        "accumulate several micro-batches per all-reduce (no_sync()), or compress gradients "
        "(PowerSGD / fp16 hooks).",
        "PyTorch TensorBoard profiler plugin (communication > 10% of step); TraceML (critical 20%)",
    )
