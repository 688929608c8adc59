"""Whether a folder of traces is one job: ``gpucheck analyze DIR`` says so when it is not.

A folder of unrelated traces (several runs of one script, traces from other machines, a
download folder) would otherwise be read as the ranks of one job, spread and stragglers
included, without a word. What one job's traces share: one world size, each rank once, no
more traces than ranks, start times close together (ranks in lockstep profile the same steps),
and, when they are not ranks of a distributed job at all, a single trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Ranks of one job start their profiler windows within seconds (they run in lockstep); runs
# that started this far apart are different runs.
SAME_JOB_START_SPREAD_S = 300.0


@dataclass(frozen=True)
class TraceFacts:
    """What one trace says about the job it came from (None: the trace does not say)."""

    name: str
    rank: int | None
    world_size: int | None
    host: str = ""
    start_s: float | None = None  # epoch seconds of its first event


def not_one_job(traces: Sequence[TraceFacts]) -> list[str]:
    """One line per reason these traces look like more than one job; empty when they fit."""
    if len(traces) < 2:
        return []
    reasons: list[str] = []
    worlds = sorted({t.world_size for t in traces if t.world_size is not None})
    if len(worlds) > 1:
        reasons.append(f"world sizes differ: {', '.join(map(str, worlds))}")
    by_rank: dict[int, list[str]] = {}
    for t in traces:
        if t.rank is not None:
            by_rank.setdefault(t.rank, []).append(t.name)
    twice = {r: names for r, names in sorted(by_rank.items()) if len(names) > 1}
    if twice:
        r, names = next(iter(twice.items()))
        more = f" (and {len(twice) - 1} more rank(s))" if len(twice) > 1 else ""
        reasons.append(f"rank {r} appears in {len(names)} traces: {', '.join(names[:3])}{more}")
    if worlds and len(traces) > max(worlds):
        reasons.append(f"{len(traces)} traces for a world size of {max(worlds)}")
    distributed = [t for t in traces if t.world_size is not None and t.world_size > 1]
    if not distributed:
        hosts = sorted({t.host for t in traces if t.host})
        where = f" on {len(hosts)} hosts" if len(hosts) > 1 else ""
        reasons.append(
            f"none of the {len(traces)} traces is a rank of a distributed job "
            f"(no distributedInfo with a world size above 1){where}"
        )
    starts = sorted(t.start_s for t in traces if t.start_s is not None)
    if len(starts) > 1 and starts[-1] - starts[0] > SAME_JOB_START_SPREAD_S:
        reasons.append(f"they started {_span(starts[-1] - starts[0])} apart")
    return reasons


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f} hours"
    return f"{seconds / 60:.0f} minutes"


__all__ = ["SAME_JOB_START_SPREAD_S", "TraceFacts", "not_one_job"]
