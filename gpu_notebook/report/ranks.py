"""The job report as text: per-rank table, communication, the straggler and the job's what-if."""

from __future__ import annotations

import statistics

from gpu_notebook.formatting import fmt_bytes, fmt_ms, fmt_seconds, fmt_share
from gpu_notebook.records import JobReport, RankFacts, Straggler
from gpu_notebook.report.job import STRAGGLER_THRESHOLD


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
        waits = f"; {_ranks(s.waiting_ranks)} wait {fmt_seconds(s.wait_s)} a step in collectives"
    else:
        waits = "; its median step is the slowest, more than 10% above the median rank"
    return f"rank {s.rank}{cause}{waits}"


def _row(r: RankFacts, role: str) -> str:
    comm = r.comm_s / r.step_s if r.comm_s is not None and r.step_s else None
    return (
        f"  {r.rank:<5} {r.host[:14]:<14} {r.steps:>5} {fmt_ms(r.step_s):>12} "
        f"{fmt_seconds(r.comm_s):>10} {fmt_share(comm):>5}  {role}"
    )


def render_job(job: JobReport) -> str:
    hosts = sorted({r.host for r in job.ranks if r.host})
    arrived = len(job.ranks)
    lines = [
        f"gpucheck job report: {job.world_size} rank(s) on {len(hosts) or '?'} host(s)"
        + (f", {arrived} reported" if job.missing else "")
        + (" (from traces)" if job.source == "traces" else ""),
        f"Across {arrived} ranks:",
        f"  {'rank':<5} {'host':<14} {'steps':>5} {'median step':>12} {'comm/step':>10} {'comm':>5}  role",
    ]
    lines += [_row(r, job.roles.get(str(r.rank), r.verdict)) for r in job.ranks]
    steps = [r.step_s for r in job.ranks if r.step_s]
    if steps:
        center = statistics.median(steps)
        spread = (max(steps) - min(steps)) / center if center else None
        lines.append(
            f"  step time: median {fmt_ms(center)}, spread {fmt_share(spread, decimals=1)} (slowest vs "
            "fastest; lockstep ranks hide a straggler here, their waits do not)"
        )
    lines.append(
        f"  communication: {fmt_share(job.comm_share)} of the step on average "
        "(time waiting in collectives: gloo ranges on the host, NCCL/RCCL kernels on the GPU)"
    )
    if job.straggler is not None:
        lines.append(f"  straggler: {describe_straggler(job.straggler)}")
        if job.straggler.hot_line:
            lines.append(f"    its top line: {job.straggler.hot_line}")
    elif arrived > 1:
        lines.append(
            f"  no straggler (waits within {fmt_share(STRAGGLER_THRESHOLD)} of the step of each other, "
            f"every rank's step within {fmt_share(STRAGGLER_THRESHOLD)} of the median)"
        )
    if job.missing:
        lines.append(
            f"  missing: {_ranks(job.missing)} sent no summary in time (died, hung or slower to "
            "finish): read their own report files, or run `gpucheck analyze DIR` over the traces"
        )
    lines += [f"  note: {n}" for n in job.notes]
    if job.whatif is not None:
        from gpu_notebook.analysis.whatif import render_whatif

        grads = [r.grad_bytes for r in job.ranks if r.grad_bytes]
        size = f"gradients {fmt_bytes(grads[0])} a step" if grads else "gradient bytes not known"
        body = render_whatif(job.whatif).splitlines()[1:]
        lines += ["", f"What if, for the job ({job.world_size} rank(s) today, {size}):", *body]
    return "\n".join(lines)
