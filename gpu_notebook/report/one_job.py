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


@dataclass(frozen=True)
class WorldSizesDiffer:
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class RankTwice:
    """A rank found in several traces (the first such rank; ``more_ranks`` others like it)."""

    rank: int
    traces: tuple[str, ...]
    more_ranks: int


@dataclass(frozen=True)
class MoreTracesThanRanks:
    traces: int
    world_size: int


@dataclass(frozen=True)
class NoneDistributed:
    """No trace is a rank of a distributed job (``hosts``: distinct hosts named)."""

    traces: int
    hosts: int


@dataclass(frozen=True)
class StartedApart:
    seconds: float


Doubt = WorldSizesDiffer | RankTwice | MoreTracesThanRanks | NoneDistributed | StartedApart


def not_one_job(traces: Sequence[TraceFacts]) -> list[Doubt]:
    """One record per reason these traces look like more than one job; empty when they fit
    (``views/wording.doubt_sentence`` words each)."""
    if len(traces) < 2:
        return []
    reasons: list[Doubt] = []
    worlds = sorted({t.world_size for t in traces if t.world_size is not None})
    if len(worlds) > 1:
        reasons.append(WorldSizesDiffer(tuple(worlds)))
    by_rank: dict[int, list[str]] = {}
    for t in traces:
        if t.rank is not None:
            by_rank.setdefault(t.rank, []).append(t.name)
    twice = {r: names for r, names in sorted(by_rank.items()) if len(names) > 1}
    if twice:
        r, names = next(iter(twice.items()))
        reasons.append(RankTwice(r, tuple(names), len(twice) - 1))
    if worlds and len(traces) > max(worlds):
        reasons.append(MoreTracesThanRanks(len(traces), max(worlds)))
    distributed = [t for t in traces if t.world_size is not None and t.world_size > 1]
    if not distributed:
        reasons.append(NoneDistributed(len(traces), len({t.host for t in traces if t.host})))
    starts = sorted(t.start_s for t in traces if t.start_s is not None)
    if len(starts) > 1 and starts[-1] - starts[0] > SAME_JOB_START_SPREAD_S:
        reasons.append(StartedApart(starts[-1] - starts[0]))
    return reasons


__all__ = [
    "SAME_JOB_START_SPREAD_S",
    "Doubt",
    "MoreTracesThanRanks",
    "NoneDistributed",
    "RankTwice",
    "StartedApart",
    "TraceFacts",
    "WorldSizesDiffer",
    "not_one_job",
]
