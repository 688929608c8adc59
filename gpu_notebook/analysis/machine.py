"""The machine the run shared: other processes' load, steal, other GPU processes, our threads.

Figures only (the rules word them): what the sampler saw of the rest of the machine over the
whole run, and how many threads this process asked of the cores it may use.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook.analysis.interference import others_cores, sample_series, usable_cores
from gpu_notebook.analysis.on_cpu import process_cores
from gpu_notebook.analysis.steps import steady_steps
from gpu_notebook.records import MachineFacts, Run

__all__ = ["MachineFacts", "machine_facts"]


def machine_facts(run: Run) -> MachineFacts:
    """What the sampler saw of the rest of the machine over the run (``Analysis.machine``)."""
    _, others = sample_series(run)
    samples = run.samples.samples
    steal = [s.steal_pct for s in samples if s.steal_pct is not None]
    gpu_others = [
        g.other_processes for s in samples for g in s.gpus if g.other_processes is not None
    ]
    workers = max((s.children for s in samples if s.children is not None), default=0)
    # A sample that listed a worker it did not read has no figure (not the workers at 0).
    ours = [pct / 100.0 for pct in (s.ours_cpu_pct() for s in samples) if pct is not None]
    loop = _loop_figures(run)
    return MachineFacts(
        cores=usable_cores(run),
        others_median_cores=float(np.median(others)) if len(others) else None,
        others_p90_cores=float(np.percentile(others, 90)) if len(others) else None,
        steal_pct=float(np.mean(steal)) if steal else None,
        gpu_other_processes=max(gpu_others) if gpu_others else None,
        torch_threads=run.env.torch_threads,
        workers=int(workers),
        ours_median_cores=float(np.median(ours)) if ours else None,
        loop_ours_cores=loop[0],
        loop_others_cores=loop[1],
        loop_run_wait=loop[2],
        loop_process_cores=process_cores(
            steady_steps(run.steps, run.window.warmup_steps), run.steps.process_cpu
        ),
    )


# Fewer samples than this while the steady steps ran: no figures of the loop (one second at
# the default interval).
LOOP_SAMPLES = 4


def _loop_figures(run: Run) -> tuple[float | None, float | None, float | None]:
    """(ours, others' cores, the loop thread's wait share): medians over the samples taken
    while the steady steps ran (a sample reads the interval before it), so that the imports
    and set-up before the loop (one core busy) do not count as the loop's CPU use."""
    steps = steady_steps(run.steps, run.window.warmup_steps)
    if not steps:
        return None, None, None
    t0, t1 = steps[0].start_s, steps[-1].start_s + steps[-1].duration_s
    cores = run.env.cpu_count
    inside = [s for s in run.samples.samples if t0 < s.t_s <= t1]
    ours = [pct / 100.0 for pct in (s.ours_cpu_pct() for s in inside) if pct is not None]
    others = [x for x in (others_cores(s, cores) for s in inside) if x is not None]
    waits = [s.run_wait_pct / 100.0 for s in inside if s.run_wait_pct is not None]
    return (
        float(np.median(ours)) if len(ours) >= LOOP_SAMPLES else None,
        float(np.median(others)) if len(others) >= LOOP_SAMPLES else None,
        float(np.median(waits)) if len(waits) >= LOOP_SAMPLES else None,
    )
