"""Too busy to judge: the share that decides a verdict, read from steps that mostly waited for a
core, lies on both sides of its line wherever that wait is put.

Each step's wait for a core is read (schedstat run_delay: ready to run while other programs held
the CPU) and the phases are read from each step less it (``interference.own_time_phases``,
``steps.run_phase``). Which phase a time slice hit is not read: the split takes the wait where
the steps ran long (past each phase's least over the steps). Spread over the phases as their
wall times hold it, the same wait gives the wall split; where the window's steps were read
waiting at its marks but the split did not take it out, it is still in some phase. When the
steps waited at least ``TOO_BUSY_WAIT`` of their time, the wait is more than the work, and a
share that reads on one side of its line as read and on the other with the wait put elsewhere
(or over the steps' 90% range, or over a fifth of the run's steps) is not the code's: the verdict names no bound (issue 26: an
unseen CPU loop read host-bound in one run and input-bound in the next at load 3-7x the cores).
A share that stays on one side wherever the wait goes keeps its verdict, the wait said beside.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.steady import without_stalls
from gpu_notebook.analysis.uncertainty import share_interval
from gpu_notebook.analysis.verdict import (
    INPUT_CRITICAL,
    RUN_DATA_MIN_STEPS,
    SYNC_CRITICAL,
    no_bound,
    run_data_overrules,
)
from gpu_notebook.records import (
    Analysis,
    CoreWait,
    PhaseBreakdown,
    RunPhase,
    Verdict,
    VerdictCategory,
)

__all__ = ["TOO_BUSY_WAIT", "core_wait", "data_time_range", "judged", "without_phase"]

# The steps' wait for a core over their wall time from which where it fell can decide: at half
# the step the machine held each step longer than the code ran in it, so a phase's share of
# the own time can move by more than itself. Under it, a share across its line keeps the
# verdict at low confidence with both answers said (``verdict._within_uncertainty``).
TOO_BUSY_WAIT = 0.5

# The lines a phase's share decides at, in the order the verdict reads them.
LINES: tuple[tuple[str, float, VerdictCategory], ...] = (
    ("data", INPUT_CRITICAL, "input-bound"),
    ("sync", SYNC_CRITICAL, "sync-bound"),
)


@dataclasses.dataclass(frozen=True)
class _Reading:
    share: float
    low: float
    high: float
    wait: float
    steps: int


def judged(analysis: Analysis, verdict: Verdict) -> Verdict:
    """``verdict`` with the steps' wait for a core said where they waited ``TOO_BUSY_WAIT`` of
    their time or more (``Verdict.core_wait``); where that wait moves the deciding share across
    its line, no bound: category "unknown", low confidence, its headline worded by
    ``words.verdict``, the evidence the shares as read gave kept."""
    wait = core_wait(analysis, verdict)
    if wait is None:
        return verdict
    if wait.judged:
        return dataclasses.replace(verdict, core_wait=wait)
    return no_bound(verdict, wait)


def core_wait(analysis: Analysis, verdict: Verdict) -> CoreWait | None:
    """The steps' wait for a core and the share nearest its line, read with the wait put
    elsewhere; None where the verdict does not rest on a phase's share against its line (no
    split, a GPU timeline decides, comm-bound, unknown), or the steps waited under
    ``TOO_BUSY_WAIT`` of their time."""
    stable, _ = without_stalls(analysis)
    phases = stable.phases
    if phases is None or phases.total_us <= 0 or analysis.phases is None:
        return None
    if verdict.category in ("unknown", "comm-bound", "gpu-bound", "memory-bound"):
        return None
    if analysis.gpu is not None and analysis.gpu.window_us > 0:
        return None  # the GPU's idle time by cause decides on a GPU, not the host's shares
    nearest: tuple[str, float, VerdictCategory, _Reading] | None = None
    for phase, line, category in LINES:
        if phase == "data" and verdict.data_as_host is not None:
            continue  # counted as host work whichever side of the line it falls
        reading = _reading(analysis, phases, phase)
        if reading is None:
            continue
        across = reading.low < line <= reading.high
        if reading.wait < TOO_BUSY_WAIT:
            if across:
                return None  # the steps mostly ran: the range is the code's (low confidence)
        elif across:
            return _said(phase, line, category, reading, verdict, judged=False)
        elif nearest is None or _distance(reading, line) < _distance(nearest[3], nearest[1]):
            nearest = (phase, line, category, reading)
        if reading.low >= line:
            break  # this line decides wherever the wait went; the later ones are not read
    if nearest is None:
        return None
    phase, line, category, reading = nearest
    return _said(phase, line, category, reading, verdict, judged=True)


def data_time_range(analysis: Analysis) -> tuple[float, float, float, float, int] | None:
    """A step's data wait (s) as read (each step less its wait: the run's steps where the step
    clock timed it, else the split's), the least and the most it reads with the steps' wait all
    in it or none of it, the steps' wait for a core over their wall time, and the steps: None
    where they waited under ``TOO_BUSY_WAIT`` of it, or the wall time was not kept."""
    whole = analysis.run_data
    if whole is not None:
        if whole.wall_share is None or whole.wait_share < TOO_BUSY_WAIT or whole.wait_share >= 1:
            return None
        wall_step_s = whole.step_s / (1.0 - whole.wait_share)
        data_s = whole.wall_share * wall_step_s
        wait_s = whole.wait_share * wall_step_s
        return whole.phase_s, max(0.0, data_s - wait_s), data_s, whole.wait_share, whole.steps
    phases = analysis.phases
    if phases is None or not phases.steps or phases.waited_share < TOO_BUSY_WAIT:
        return None
    if (
        phases.wall_phase_total_us is None
        or not phases.wall_total_us
        or "data" not in phases.measured
    ):
        return None
    n = len(phases.steps)
    data_s = phases.wall_phase_total_us.get("data", 0.0) / n / 1e6
    wait_s = (phases.wall_total_us - phases.total_us) / n / 1e6
    read_s = phases.phase_total_us.get("data", 0.0) / n / 1e6
    return read_s, max(0.0, data_s - wait_s), data_s, phases.waited_share, n


def without_phase(analysis: Analysis, phase: str) -> Analysis:
    """``analysis`` with ``phase``'s time out of the split (each step less it, the run's data
    wait unread): what the rest of the step reads, the verdict across the phase's line."""
    phases = analysis.phases
    if phases is None:
        return analysis
    steps = tuple(
        dataclasses.replace(
            s,
            duration_us=max(0.0, s.duration_us - s.phase_us.get(phase, 0.0)),
            phase_us={k: v for k, v in s.phase_us.items() if k != phase} | {phase: 0.0},
        )
        for s in phases.steps
    )
    spent = phases.phase_total_us.get(phase, 0.0)
    rest = dataclasses.replace(
        phases,
        steps=steps,
        total_us=max(0.0, phases.total_us - spent),
        phase_total_us={k: v for k, v in phases.phase_total_us.items() if k != phase}
        | {phase: 0.0},
    )
    run_data = None if phase == "data" else analysis.run_data
    return dataclasses.replace(analysis, phases=rest, run_data=run_data)


def _distance(reading: _Reading, line: float) -> float:
    return min(abs(reading.low - line), abs(reading.high - line))


def _said(
    phase: str,
    line: float,
    category: VerdictCategory,
    reading: _Reading,
    verdict: Verdict,
    *,
    judged: bool,
) -> CoreWait:
    return CoreWait(
        wait_share=reading.wait,
        steps=reading.steps,
        phase=phase,
        share=reading.share,
        low=reading.low,
        high=reading.high,
        line=line,
        found=verdict.category,
        other=category if verdict.category != category else None,
        judged=judged,
    )


def _reading(analysis: Analysis, stable: PhaseBreakdown, phase: str) -> _Reading | None:
    """``phase``'s share as the verdict read it (the run's data wait where it overrules the
    window, ``verdict.run_data_overrules``), the steps' wait for a core, and the least and
    most the share reads with that wait put elsewhere or over the steps' 90% range."""
    share = stable.share(phase)
    if share is None:
        return None
    whole = analysis.run_data if phase == "data" else None
    if whole is not None and run_data_overrules(analysis, share) is whole:
        spread = _run_spread(whole)
        if whole.wall_share is not None:
            spread += _anywhere(whole.wall_share, whole.wait_share)
        return _Reading(whole.share, min(spread), max(spread), whole.wait_share, whole.steps)
    phases = analysis.phases
    assert phases is not None
    spread = [share]
    steps, run_wait = len(stable.steps), 0.0
    if whole is not None and whole.steps >= RUN_DATA_MIN_STEPS:
        # The run's steps read the same data wait over many more steps: a window of three
        # steps clear of the line while the run's range holds it (17%, 10%-17%, against the
        # run's 21%, 16%-26%, at load 24 on 2 cores) is not clear of it.
        spread += _run_spread(whole)
        if whole.wall_share is not None:
            spread += _anywhere(whole.wall_share, whole.wait_share)
        steps, run_wait = max(steps, whole.steps), whole.wait_share
    for other in (phases.share(phase), phases.wall_share(phase)):
        if other is not None:
            spread.append(other)
    span = share_interval(stable, phase)
    if span is not None:
        spread.extend(span)
    wait = phases.waited_share
    wall = phases.wall_share(phase)
    if wall is not None:
        spread += _anywhere(wall, wait)
    # The window's steps read waiting at its own marks, more than the split took out (the step
    # clock's readings fall a step off the trace's, or were not read for short steps): the
    # rest of the wait is still in some phase of the split, this one or the others.
    host = analysis.host
    marked = host.core_wait_share if host is not None and phases.source == "trace" else None
    if marked is not None and marked > wait and analysis.window_phases is None:
        spread += _left_in(share, wait, marked)
        wait = marked
    # The same where the run's steps, as the step clock read each one, waited more than the
    # split took out (a whole-run split from hook timings is their wall time): the bundled
    # input-bound example's run at load 20 on 2 cores read its data wait at 14% of a hook split
    # (host-bound) with no wait said, where its steps had waited most of their time.
    if whole is not None and whole.wait_share >= TOO_BUSY_WAIT and whole.wait_share > wait:
        spread += _left_in(share, wait, whole.wait_share)
        run_wait = whole.wait_share
    return _Reading(share, min(spread), max(spread), max(wait, run_wait), steps)


def _left_in(share: float, taken: float, waited: float) -> list[float]:
    """The least and most ``share`` (of a split with ``taken`` of its wall time out as the
    wait for a core) reads where the steps waited ``waited`` of it: the rest of the wait is
    still in some phase, all in this one or none of it."""
    left = (waited - taken) / max(1e-12, 1.0 - taken)  # of the split's own time
    if left >= 1.0:
        return [0.0, 1.0]
    return [max(0.0, (share - left) / (1.0 - left)), min(1.0, share / (1.0 - left))]


def _anywhere(wall: float, wait: float) -> list[float]:
    """The share a phase holding ``wall`` of the steps' wall time reads with a wait of ``wait``
    of it (both over the wall time) all in that phase, or none of it: where a time slice fell
    is not read, and spreading the wait over the phases as their wall times hold it is no
    bound. A loader that sleeps waits for no core while the model's ops do; a loader that
    computes waits as they do. The bundled input-bound example (a 60 ms sleep a batch, 85% of
    its steps' own time over the run) read its window's data wait at 22% (21%-22% as spread)
    with 77% of the steps waiting at load 16 on 2 cores, and host-bound at more. Only where the
    steps waited ``TOO_BUSY_WAIT`` or more (under it a share across its line is said with both
    answers, ``verdict._within_uncertainty``)."""
    if wait < TOO_BUSY_WAIT:
        return []
    if wait >= 1.0:
        return [0.0, 1.0]
    return [max(0.0, wall - wait) / (1.0 - wait), min(1.0, wall / (1.0 - wait))]


def _run_spread(whole: RunPhase) -> list[float]:
    """The run's data share as read, over its steps' 90% range, with the wait spread over the
    phases, and over each fifth of its steps: a load that came and went moves the share from
    one stretch of the run to the next more than resampling its steps shows (at load 22-24 on
    2 cores the augment line loop's runs read 14% (9%-19%) and 27% (22%-33%) over 55 steps;
    their fifths 9%-26% and 19%-34%)."""
    out = [whole.share, whole.low_share, whole.high_share]
    out += [x for x in (whole.wall_share, whole.fifths_low, whole.fifths_high) if x is not None]
    return out
