"""Across the ranks of one job: step time spread, stragglers and communication share."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpu_notebook.records import Report

# A rank whose median step is this much slower than the median rank is called a straggler.
# HTA reports the spread without a cut-off; 10% is where a synchronous job loses a tenth of
# every step on all ranks waiting for one, which is worth a line in a report.
STRAGGLER_THRESHOLD = 0.10


@dataclass(frozen=True)
class RankRow:
    label: str
    rank: int | None
    steps: int
    median_step_s: float | None
    gpu_busy_share: float | None
    comm_share: float | None
    verdict: str


@dataclass(frozen=True)
class RankSummary:
    rows: tuple[RankRow, ...]
    median_step_s: float | None  # the median of the ranks' medians
    spread: float | None  # (slowest - fastest) / median
    stragglers: tuple[RankRow, ...]
    comm_share_mean: float | None


def rank_summary(reports: Sequence[tuple[Report, int | None, str]]) -> RankSummary:
    rows = []
    for report, rank, label in reports:
        gpu = report.analysis.gpu
        comm = gpu.comm_us / gpu.window_us if gpu is not None and gpu.window_us > 0 else None
        rows.append(
            RankRow(
                label=label,
                rank=rank,
                steps=report.analysis.step_stats.count,
                median_step_s=report.analysis.step_stats.median_s,
                gpu_busy_share=gpu.busy_share if gpu is not None else None,
                comm_share=comm,
                verdict=report.verdict.category,
            )
        )
    rows.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.label))
    medians = [r.median_step_s for r in rows if r.median_step_s]
    center = statistics.median(medians) if medians else None
    spread = (max(medians) - min(medians)) / center if center else None
    stragglers = tuple(
        r for r in rows
        if center and r.median_step_s and r.median_step_s > center * (1 + STRAGGLER_THRESHOLD)
    )
    comms = [r.comm_share for r in rows if r.comm_share is not None]
    return RankSummary(
        rows=tuple(rows),
        median_step_s=center,
        spread=spread,
        stragglers=stragglers,
        comm_share_mean=statistics.fmean(comms) if comms else None,
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.2f} ms"


def render_rank_summary(s: RankSummary) -> str:
    lines = [f"Across {len(s.rows)} ranks:"]
    lines.append(f"  {'rank':<8} {'steps':>5} {'median step':>12} {'GPU busy':>9} {'comm':>7}  verdict")
    for r in s.rows:
        label = str(r.rank) if r.rank is not None else r.label
        lines.append(
            f"  {label:<8} {r.steps:>5} {_ms(r.median_step_s):>12} {_pct(r.gpu_busy_share):>9} "
            f"{_pct(r.comm_share):>7}  {r.verdict}"
        )
    lines.append(f"  step time: median {_ms(s.median_step_s)}, spread {_pct(s.spread)} (slowest vs fastest)")
    if s.stragglers:
        names = ", ".join(str(r.rank if r.rank is not None else r.label) for r in s.stragglers)
        lines.append(f"  stragglers (> {100 * STRAGGLER_THRESHOLD:.0f}% slower than the median rank): {names}")
    else:
        lines.append(f"  no straggler (every rank within {100 * STRAGGLER_THRESHOLD:.0f}% of the median)")
    lines.append(f"  communication: {_pct(s.comm_share_mean)} of the GPU window on average")
    return "\n".join(lines)
