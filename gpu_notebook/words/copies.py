"""Words of the host-to-device copy rules (rules/copies.py, rules/host_tensors.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain
from gpu_notebook.rules.copies import BlockingCopies, PageableCopies
from gpu_notebook.rules.host_tensors import HostMade
from gpu_notebook.words.common import Words, at, copy_evidence, worder, words

_SOURCE = (
    "Nsight Systems cuda_memcpy_async rule (pageable async copies: use pinned memory); TraceML "
    "step_time policy (H2D warn 10%, critical 20%)"
)


def _fmt_mb(n: int | None) -> str:
    return "size not recorded" if n is None else f"{n / 1e6:.1f} MB"


@worder(PageableCopies)
def pageable_copies(s: PageableCopies) -> Words:
    on_gpu = (
        f"{s.duration_us / 1e3:.1f} ms on the GPU"
        if s.duration_us > 0
        else "their time not recorded (the trace's copies carry no timestamps)"
    )
    evidence = [
        f"{s.count} host-to-device copies from pageable memory in the window, "
        f"{on_gpu} ({_fmt_mb(s.total_bytes)})",
        copy_evidence(s.copy, s.lean, s.span),
        f"gain if the copies overlap with compute: {fmt_gain(s.bound)}",
    ]
    if s.pinned:
        return words(
            "Copies to the GPU come from pageable memory although the DataLoader pins its batches",
            [
                *evidence,
                "the DataLoader already has pin_memory=True: these tensors come from elsewhere",
            ],
            "Pin the source tensors once (tensor.pin_memory()) and copy with non_blocking=True.",
            _SOURCE,
        )
    return words(
        "Copies to the GPU come from pageable (unpinned) memory",
        evidence,
        "Set pin_memory=True on the DataLoader, then copy batches with .to(device, non_blocking=True).",
        _SOURCE,
    )


@worder(BlockingCopies)
def blocking_copies(s: BlockingCopies) -> Words:
    return words(
        "Each batch copy to the GPU blocks Python until it is done",
        [
            copy_evidence(s.copy, s.lean, s.span),
            f"{at(s.where)}: `{s.where.text}` has no non_blocking=True"
            + (f" ({s.count} such copies)" if s.count > 1 else ""),
            f"gain if the copies overlap with compute: {fmt_gain(s.bound)}",
        ],
        "Copy with .to(device, non_blocking=True) from pinned memory.",
        _SOURCE,
    )


@worder(HostMade)
def host_made(s: HostMade) -> Words:
    return words(
        "Tensors are made on the host and copied to the GPU every step",
        [
            f"{at(s.where)}: `{s.where.text}` builds the tensor in host memory, then copies it"
            + (f" ({s.count} such calls)" if s.count > 1 else ""),
            copy_evidence(s.copy),
            f"gain if the copies go: {fmt_gain(s.bound)}",
        ],
        "Make the tensor on the GPU: torch.zeros(n, device=device) instead of .to(device).",
        "PyTorch performance tuning guide: create tensors directly on the target device; TraceML "
        "step_time policy (H2D warn 10%, critical 20%)",
    )
