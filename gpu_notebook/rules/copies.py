"""Host-to-device copy rules: pageable (unpinned) copies and blocking ``.to(device)`` in the loop.

Thresholds:
- any pageable asynchronous copy is flagged (Nsight Systems expert rule ``cuda_memcpy_async``:
  "use pinned memory"); severity by the host copy share with TraceML's H2D levels (warn 10%,
  critical 20%, ``diagnostics/step_time/policy.py``).
The gain bound is Amdahl over the host-side copy share ("copy" phase): pinned, non-blocking
copies overlap with compute, so at most that share disappears; the share is the copies' time
over an unprofiled step where that reads more (``rules.common.lean_share``: the profiler
lengthens the small operators around a big copy, not the copy). Where the copies fill most of
what the step clock's forward span holds in the traced steps (the copies and the model's
forward: large batches, a cheap model), the upper end is that span's share of the run's
unprofiled steps (``copy_span``): a few traced copies are no measure of the run's, and the
model's small operators shrink most without the profiler (the H100 kit's 48 MB pageable copies:
7.3-8.0 ms in the 3 traced steps, 72% of the unprofiled step; the span 9.2 ms of 10.6, 86%;
pinned, non-blocking copies measured 6.98x against "up to 3.58x"). On a CPU-only run there is
no copy to measure and these rules stay silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_notebook.analysis.level_range import Level
from gpu_notebook.cell.facts import SourceFacts, SourceLine
from gpu_notebook.records import Analysis, Finding, Run, Said, Severity
from gpu_notebook.rules.common import (
    WARN,
    found,
    gain_bound,
    gain_bound_low,
    lean_share,
    level_in,
    loader_in_use,
    share,
)


@dataclass(frozen=True)
class PageableCopies(Said):
    count: int  # host-to-device copies from pageable memory in the window
    duration_us: float  # their time on the GPU
    total_bytes: int | None  # None: size not recorded
    copy: float | None  # the host's copy share of the step
    bound: float | None
    pinned: bool  # the DataLoader already pins its batches: they come from elsewhere
    lean: float | None = None  # the copies' time over an unprofiled step (the bound's share)
    span: float | None = None  # the run's forward span holding them (``copy_span``)


@dataclass(frozen=True)
class BlockingCopies(Said):
    copy: float  # the host's copy share of the step
    where: SourceLine  # the first blocking copy in the step loop (cell.calls: maybe elsewhere)
    count: int  # such copies
    bound: float | None
    lean: float | None = None  # the copies' time over an unprofiled step (the bound's share)
    span: float | None = None  # the run's forward span holding them (``copy_span``)


# The copies fill at least this share of the traced steps' copies and model forward: the step
# clock's forward span, which holds both, is then mostly copies and bounds them.
SPAN_FILLED = 0.5


def copy_span(analysis: Analysis) -> float | None:
    """The step clock's forward span's share of the run's unprofiled steps, where the traced
    copies fill most (``SPAN_FILLED``) of what the span holds in the traced steps: the most the
    copies can be of an unprofiled step. None: not so (no copy, a model forward as long as the
    copies, the span not timed over the run)."""
    window = analysis.window_phases or analysis.phases
    whole = analysis.run_forward
    if window is None or whole is None:
        return None
    copy = window.phase_total_us.get("copy", 0.0)
    forward = window.phase_total_us.get("forward", 0.0)
    if copy <= 0 or copy < SPAN_FILLED * (copy + forward):
        return None
    return whole.share


def _bound_share(analysis: Analysis) -> tuple[float | None, float | None, float | None]:
    """(lean share, span share, the larger: the share the bound rests on)."""
    lean, span = lean_share(analysis, "copy"), copy_span(analysis)
    shares = [x for x in (lean, span) if x is not None]
    return lean, span, max(shares) if shares else None


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
    severity: Level | Severity = level_in(analysis, "copy", copy, low=0.0) or "low"
    loader = loader_in_use(facts)
    pinned = bool(loader.setting("pin_memory"))
    lean, span, most = _bound_share(analysis)
    bound = gain_bound(most, analysis)
    said = PageableCopies(count, duration_us, total_bytes, copy, bound, pinned, lean, span)
    if pinned:
        return found("copies.pageable", severity, said, phase_share=copy, bound=bound)
    return found("copies.pageable", severity, said, phase_share=copy, bound=bound,
                 line=loader.line, fix_id="dataloader_workers",
                 bound_low=gain_bound_low(analysis, "copy"),
                 # Keep the worker count as written: this finding is about pinning only.
                 fix_params={"num_workers": None, "pin_memory": True, "persistent_workers": True})  # fmt: skip


def blocking_copies(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Pinned batches copied with a blocking ``.to(device)``: Python waits for every copy."""
    copy = share(analysis, "copy")
    severity = level_in(analysis, "copy", copy, low=WARN)
    per_step = facts.per_step(facts.blocking_copies)
    if copy is None or severity is None or not per_step or analysis.gpu is None:
        return None
    if any(_pageable_to_device(c.kind) for c in analysis.gpu.copies):
        return None  # non_blocking does nothing for pageable memory: pageable_copies speaks
    first = per_step[0]
    lean, span, most = _bound_share(analysis)
    bound = gain_bound(most, analysis)
    said = BlockingCopies(copy, first, len(per_step), bound, lean, span)
    return found("copies.blocking", severity, said, phase_share=copy, bound=bound,
                 line=first.cell_line, fix_id="non_blocking_copies",
                 bound_low=gain_bound_low(analysis, "copy"))  # fmt: skip


TIE = 20  # where its findings tie: the verdict table's order (rules._families)
RULES = (pageable_copies, blocking_copies)
