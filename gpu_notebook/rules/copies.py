"""Host-to-device copy rules: pageable (unpinned) copies and blocking ``.to(device)`` in the loop.

Thresholds:
- any pageable asynchronous copy is flagged (Nsight Systems expert rule ``cuda_memcpy_async``:
  "use pinned memory"); severity by the host copy share with TraceML's H2D levels (warn 10%,
  critical 20%, ``diagnostics/step_time/policy.py``).
The gain bound is Amdahl over the host-side copy share ("copy" phase): pinned, non-blocking
copies overlap with compute, so at most that share disappears. On a CPU-only run there is no
copy to measure and these rules stay silent.
"""

from __future__ import annotations

from gpu_notebook.cell.facts import SourceFacts
from gpu_notebook.formatting import fmt_gain
from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    WARN,
    Check,
    copy_evidence,
    finding,
    gain_bound,
    loader_in_use,
    loader_setting,
    severity_of,
    share,
)

_SOURCE = (
    "Nsight Systems cuda_memcpy_async rule (pageable async copies: use pinned memory); TraceML "
    "step_time policy (H2D warn 10%, critical 20%)"
)


PAGEABLE = Check(
    "copies.pageable", "Copies to the GPU come from pageable (unpinned) memory", _SOURCE
)


def _fmt_mb(n: int | None) -> str:
    return "size not recorded" if n is None else f"{n / 1e6:.1f} MB"


def _pageable_to_device(kind: str) -> bool:
    """A copy kind of the GPU timeline that is host-to-device from pageable memory."""
    return "pageable" in kind.lower() and "htod" in kind.lower().replace(" ", "")


def pageable_copies(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Host-to-device copies from pageable memory (the DataLoader does not pin its batches)."""
    gpu = analysis.gpu
    if gpu is None:
        return None
    pageable = [c for c in gpu.copies if _pageable_to_device(c.kind)]
    if not pageable:
        return None
    count = sum(c.count for c in pageable)
    duration_us = sum(c.duration_us for c in pageable)
    sizes = [c.bytes for c in pageable]
    total_bytes = (
        sum(b for b in sizes if b is not None) if any(b is not None for b in sizes) else None
    )
    copy = share(analysis, "copy")
    severity = severity_of(copy, low=0.0) or "low"
    evidence = [
        f"{count} host-to-device copies from pageable memory in the window, "
        f"{duration_us / 1e3:.1f} ms on the GPU ({_fmt_mb(total_bytes)})",
    ]
    evidence.append(copy_evidence(copy))
    static, live = loader_in_use(facts)
    pinned = loader_setting(static, live, "pin_memory")
    bound = gain_bound(copy, analysis)
    evidence.append(f"gain if the copies overlap with compute: {fmt_gain(bound)}")
    if pinned:
        return PAGEABLE.found(
            severity,
            [
                *evidence,
                "the DataLoader already has pin_memory=True: these tensors come from elsewhere",
            ],
            "Pin the source tensors once (tensor.pin_memory()) and copy with non_blocking=True.",
            title="Copies to the GPU come from pageable memory although the DataLoader pins its "
            "batches",
            phase_share=copy,
            bound=bound,
        )
    return PAGEABLE.found(
        severity,
        evidence,
        "Set pin_memory=True on the DataLoader, then copy batches with .to(device, non_blocking=True).",
        phase_share=copy,
        bound=bound,
        line=static.line if static is not None else None,
        fix_id="dataloader_workers",
        # Keep the worker count as written: this finding is about pinning only.
        fix_params={"num_workers": None, "pin_memory": True, "persistent_workers": True},
    )


def blocking_copies(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Pinned batches copied with a blocking ``.to(device)``: Python waits for every copy."""
    copy = share(analysis, "copy")
    severity = severity_of(copy, low=WARN)
    per_step = facts.per_step(facts.blocking_copies)
    if copy is None or severity is None or not per_step or analysis.gpu is None:
        return None
    if any(_pageable_to_device(c.kind) for c in analysis.gpu.copies):
        return None  # non_blocking does nothing for pageable memory: pageable_copies speaks
    first = per_step[0]
    bound = gain_bound(copy, analysis)
    return finding(
        "copies.blocking",
        "Each batch copy to the GPU blocks Python until it is done",
        severity,
        [
            copy_evidence(copy),
            f"line {first.line}: `{first.text}` has no non_blocking=True"
            + (f" ({len(per_step)} such copies)" if len(per_step) > 1 else ""),
            f"gain if the copies overlap with compute: {fmt_gain(bound)}",
        ],
        "Copy with .to(device, non_blocking=True) from pinned memory.",
        _SOURCE,
        phase_share=copy,
        bound=bound,
        line=first.line,
        fix_id="non_blocking_copies",
    )


RULES = (pageable_copies, blocking_copies)
