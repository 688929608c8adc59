"""The job report as text: per-rank table, communication, the straggler, each rank's run over
time with what the ranks share or do not, and the job's what-if.

``report/job.py`` builds the ``JobReport`` record (figures, roles, patterns); this view words it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpu_notebook.analysis.run_trend import MIN_STEPS
from gpu_notebook.escapes import printable_record
from gpu_notebook.formatting import fmt_bytes, fmt_ms, fmt_seconds, fmt_share
from gpu_notebook.records import (
    JobReport,
    JobShape,
    RankFacts,
    RankShape,
    SaturatedHost,
    Straggler,
)
from gpu_notebook.report.job import (
    STRAGGLER_THRESHOLD,
    drift_factor,
    jitters,
    memory_creeps,
    stalls_matter,
)


def _ranks(ranks: tuple[int, ...]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def describe_straggler(s: Straggler) -> str:
    """One line: who is late, on what, and who waits for it."""
    cause = ""
    if s.phase is not None:
        cause = f": {s.phase} {fmt_share(s.phase_share)} of its step"
        if s.phase_s is not None and s.others_phase_s is not None:
            cause += f" ({fmt_seconds(s.phase_s)} a step vs {fmt_seconds(s.others_phase_s)} on the others)"
    if s.reason == "waits-least" and s.waiting_ranks and s.wait_s is not None:
        wait = fmt_seconds(s.wait_s)
        if s.wait_low_s is not None and s.wait_low_s != s.wait_s:
            wait = f"{fmt_seconds(s.wait_low_s)} to {wait} (partial GPU timelines)"
        waits = f"; {_ranks(s.waiting_ranks)} wait {wait} a step in collectives"
    else:
        waits = "; its median step is the slowest, more than 10% above the median rank"
    return f"rank {s.rank}{cause}{waits}"


def _run_steps(ranks: Sequence[RankFacts]) -> bool:
    """Every timed rank has its median step over the run: the column and the spread read those
    (the steps the straggler is judged on), not some ranks' profiled window beside others' run
    (seen, unseen round 14: rank 0's three profiled steps 26.35 ms, its run's 3.5 ms, beside
    rank 1's 3.7 ms: "spread 151%" for 4%)."""
    timed = [r for r in ranks if r.step_s]
    return bool(timed) and all(r.run_step_s for r in timed)


def _row(r: RankFacts, role: str, over_run: bool) -> str:
    comm = r.comm_s / r.step_s if r.comm_s is not None and r.step_s else None
    step = r.run_step_s if over_run and r.step_s else r.step_s
    return (
        f"  {r.rank:<5} {r.host[:14]:<14} {r.steps:>5} {fmt_ms(step):>12} "
        f"{('<=' if r.comm_low_s is not None else '') + fmt_seconds(r.comm_s):>10} "
        f"{fmt_share(comm):>5}  {role}"
    )


def render_job(job: JobReport) -> str:
    job = printable_record(job)  # host names, hot lines, files: one safe line each
    hosts = sorted({r.host for r in job.ranks if r.host})
    arrived = len(job.ranks)
    lines = [
        f"gpucheck job report: {job.world_size} rank(s) on {len(hosts) or '?'} host(s)"
        + (f", {arrived} reported" if job.missing else "")
        + (" (from traces)" if job.source == "traces" else ""),
        f"Across {arrived} ranks:",
        f"  {'rank':<5} {'host':<14} {'steps':>5} {'median step':>12} {'comm/step':>10} {'comm':>5}  role",
    ]
    over_run = _run_steps(job.ranks)
    lines += [_row(r, job.roles.get(str(r.rank), r.verdict), over_run) for r in job.ranks]
    steps = [(r.run_step_s if over_run else r.step_s) or 0.0 for r in job.ranks if r.step_s]
    if steps:
        center = statistics.median(steps)
        spread = (max(steps) - min(steps)) / center if center else None
        lines.append(
            f"  step time: median {fmt_ms(center)}, spread {fmt_share(spread, decimals=1)} (slowest vs "
            "fastest; lockstep ranks hide a straggler here, their waits do not)"
        )
    share = fmt_share(job.comm_share)
    if job.comm_share_low is not None:
        share = f"{fmt_share(job.comm_share_low)} to {share}"
    lines.append(
        f"  communication: {share} of the step on average "
        "(time waiting in collectives: gloo ranges on the host, NCCL/RCCL kernels on the GPU)"
    )
    if job.comm_share_low is not None:
        lines.append(
            "    some ranks' GPU timelines are partial (kernels without timestamps): their exposed "
            "collectives are an upper bound, '<=' in the table"
        )
    if job.straggler_undecided is not None:
        lines.append(
            f"  straggler: cannot tell: rank {job.straggler_undecided} at one end of the partial "
            "GPU timelines' comm waits, no straggler or another at the other"
        )
    elif job.straggler is not None:
        lines.append(f"  straggler: {describe_straggler(job.straggler)}")
        if job.straggler.hot_line:
            lines.append(f"    its top line: {job.straggler.hot_line}")
    elif arrived > 1:
        lines.append(
            f"  no straggler (no rank waits less or steps slower than the others by "
            f"{fmt_share(STRAGGLER_THRESHOLD)} of the step and beyond the ranks' own step-to-step "
            "spread, with its own work above theirs over the run's steps)"
        )
    if job.missing:
        lines.append(
            f"  missing: {_ranks(job.missing)} sent no summary in time (died, hung or slower to "
            "finish): read their own report files, or run `gpucheck analyze DIR` over the traces"
        )
    lines += [f"  note: {n}" for n in job.notes]
    lines += [f"  note: {saturated_host_note(h)}" for h in job.saturated_hosts]
    lines += _over_the_run(job)
    if job.whatif is not None:
        from gpu_notebook.views.wording import render_whatif

        grads = [r.grad_bytes for r in job.ranks if r.grad_bytes]
        size = f"gradients {fmt_bytes(grads[0])} a step" if grads else "gradient bytes not known"
        body = render_whatif(job.whatif).splitlines()[1:]
        lines += ["", f"What if, for the job ({job.world_size} rank(s) today, {size}):", *body]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ over the run


def _over_the_run(job: JobReport) -> list[str]:
    """Each rank's run over time (step clock, every step), then the patterns across the ranks."""
    if not any(r.shape is not None for r in job.ranks):
        return []
    lines = [
        "",
        "Over the run (every step, from each rank's step clock; median step of the first fifth "
        "-> the last):",
    ]
    lines += [f"  rank {r.rank}: {_shape_row(r.shape)}" for r in job.ranks]
    facts = {r.rank: r.shape for r in job.ranks if r.shape is not None}
    lines += [f"  {_pattern(p, facts)}" for p in job.shapes]
    return lines


def _shape_row(s: RankShape | None) -> str:
    if s is None:
        return f"not measured (a run's shape needs {MIN_STEPS} steps after the warm-up)"
    marks = "; ".join(_shape_marks(s)) or "steady"
    pace = f"{fmt_seconds(s.first_s)} -> {fmt_seconds(s.last_s)} a step"
    return f"{pace}, p90/median {s.jitter:.1f}: {marks}"


def _shape_marks(s: RankShape) -> list[str]:
    """What the single-rank findings would say of this rank's run, a few words each."""
    marks = []
    factor = drift_factor(s)
    if factor is not None:
        marks.append(f"slows {factor:.1f}x")
    if stalls_matter(s):
        where = f", in {s.stall_phase}" if s.stall_phase else ""
        marks.append(f"{_stalls(s)} ({fmt_share(s.stall_share)} of its run's time{where})")
    if jitters(s):
        marks.append("uneven steps")
    if s.gpu_bytes_per_step is not None:
        marks.append(f"GPU memory +{_per_100(s.gpu_bytes_per_step)}/100 steps")
    if s.rss_bytes_per_step is not None:
        marks.append(f"RSS +{_per_100(s.rss_bytes_per_step)}/100 steps")
    if s.full_at_step is not None and memory_creeps(s):
        marks.append(f"{_holder(s)} full at step {s.full_at_step:,}")
    if s.represents is False:
        marks.append("profiled window unlike the run")
    return marks


def _stalls(s: RankShape) -> str:
    if s.stall_period_steps:
        return f"stalls every {s.stall_period_steps} steps"
    return f"{s.stalls} stalled steps"


def _per_100(bytes_per_step: float) -> str:
    return fmt_bytes(int(bytes_per_step * 100))


def _holder(s: RankShape) -> str:
    """What fills up: the card when the GPU's memory creeps (the rule reports it first)."""
    return "card" if s.gpu_bytes_per_step is not None else "machine"


def _pattern(p: JobShape, facts: dict[int, RankShape]) -> str:
    every = len(p.ranks) == p.of_ranks
    if p.kind == "drift":
        return _drift_line(p, facts, every)
    if p.kind == "stall":
        return _stall_line(p, facts, every)
    return _memory_line(p, facts, every)


def _of(ranks: tuple[int, ...], noun: str) -> str:
    """Whose noun: "rank 2's steps", "the steps of ranks 1, 2"."""
    return f"{_ranks(ranks)}'s {noun}" if len(ranks) == 1 else f"the {noun} of {_ranks(ranks)}"


def _drift_line(p: JobShape, facts: dict[int, RankShape], every: bool) -> str:
    paces = ", ".join(
        f"{fmt_seconds(facts[r].first_s)} -> {fmt_seconds(facts[r].last_s)} a step"
        + ("" if len(p.ranks) == 1 else f" on rank {r}")
        for r in p.ranks
    )
    if every:
        return (
            f"every rank's steps slow down over the run ({paces}): ranks in lockstep slow "
            "together, so one rank's growing work is enough; each rank's own report names the "
            "phase that grew"
        )
    own = "its own report names" if len(p.ranks) == 1 else "their own reports name"
    return (
        f"{_of(p.ranks, 'steps')} slow down over the run: {paces}; the other ranks' do not. "
        f"In lockstep the whole job slows with it: {own} the phase that grew"
    )


def _stall_line(p: JobShape, facts: dict[int, RankShape], every: bool) -> str:
    low, high = (fmt_share(f(facts[r].stall_share for r in p.ranks)) for f in (min, max))
    cost = low if low == high else f"{low}-{high}"
    when = f"every {p.period_steps} steps" if p.period_steps else "at no shared period"
    what = f"what runs every {p.period_steps} steps" if p.period_steps else "what runs now and then"
    if every and p.origin:
        return (
            f"every rank stalls {when} ({cost} of the run's time): it starts on "
            f"{_ranks(p.origin)}, whose stalled time goes to its own work while the others' goes "
            f"to backward (waiting in the gradient all-reduce): look at {what} on "
            f"{_ranks(p.origin)} only, e.g. a checkpoint or a log"
        )
    if every:
        hint = (
            "e.g. validation or checkpoints on all ranks"
            if p.period_steps
            else "stalls at random are often the machine (other processes on its cores)"
        )
        return f"every rank stalls {when} ({cost} of the run's time): look at {what}, {hint}"
    return (
        f"{_ranks(p.ranks)} {'stalls' if len(p.ranks) == 1 else 'stall'} {when} ({cost} of "
        f"the run's time), the other ranks do not: look at {what} on {_ranks(p.ranks)} only "
        "(a checkpoint or a log one rank writes); ranks that sync every step would all wait "
        "through it"
    )


def _memory_line(p: JobShape, facts: dict[int, RankShape], every: bool) -> str:
    growth = ", ".join(
        _growth(facts[r]) + ("" if len(p.ranks) == 1 else f" on rank {r}") for r in p.ranks
    )
    at = _fills_first(p.ranks, facts)
    if every:
        return (
            f"every rank's memory grows step after step ({growth}){at}: the training loop "
            "keeps something every step (tensors with their graphs, e.g. history.append(loss)): "
            "each rank's own report names the line"
        )
    return (
        f"{_of(p.ranks, 'memory')} grows step after step ({growth}), the other ranks' does "
        f"not{at}: look at what only {_ranks(p.ranks)} keeps (metrics or losses as tensors, "
        "a cache)"
    )


def _fills_first(ranks: tuple[int, ...], facts: dict[int, RankShape]) -> str:
    """The rank whose card or machine fills first at its rate of growth, when one is known."""
    full: list[tuple[int, int]] = []
    for r in ranks:
        step = facts[r].full_at_step
        if step is not None:
            full.append((step, r))
    if not full:
        return ""
    step, rank = min(full)
    return f"; at this rate rank {rank}'s {_holder(facts[rank])} is full at step {step:,}"


def _growth(s: RankShape) -> str:
    if s.gpu_bytes_per_step is not None:
        return f"GPU memory +{_per_100(s.gpu_bytes_per_step)} every 100 steps"
    return f"RSS +{_per_100(s.rss_bytes_per_step or 0.0)} every 100 steps"


def saturated_host_note(h: SaturatedHost) -> str:
    """Ranks that shared a saturated machine: their differences may be the machine's."""
    names = ", ".join(str(r) for r in h.ranks)
    return (
        f"ranks {names} share host {h.host or '(unnamed)'}, whose CPUs were "
        f"{h.busy_share:.0%} busy over the run: differences between these ranks "
        "may be the machine's, not the code's (a straggler is named only beyond the ranks' "
        "own step-to-step spread, less its extra wait for a core)"
    )
