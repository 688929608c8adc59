"""The machine the run shared: other processes' load, steal, other GPU processes, our threads.

Figures only (the rules word them): what the sampler saw of the rest of the machine over the
whole run, and how many threads this process asked of the cores it may use.
"""

from __future__ import annotations

import numpy as np

from gpu_notebook.analysis.interference import sample_series, usable_cores
from gpu_notebook.analysis.on_cpu import process_cores
from gpu_notebook.analysis.steps import steady_steps
from gpu_notebook.records import InSteps, MachineFacts, Run

__all__ = ["MachineFacts", "machine_facts"]


def machine_facts(run: Run, steps: InSteps | None) -> MachineFacts:
    """What the sampler saw of the rest of the machine over the run (``Analysis.machine``);
    the loop's figures are those of the ticks inside the steps (``steps``:
    ``UtilizationStats.in_steps``, read once), where enough ticks fell there."""
    _, others = sample_series(run)
    samples = run.samples.samples
    steal = [s.steal_pct for s in samples if s.steal_pct is not None]
    gpu_others = [
        g.other_processes for s in samples for g in s.gpus if g.other_processes is not None
    ]
    workers = max((s.children for s in samples if s.children is not None), default=0)
    # A sample that listed a worker it did not read has no figure (not the workers at 0).
    ours = [pct / 100.0 for pct in (s.ours_cpu_pct() for s in samples) if pct is not None]
    loop = steps if steps is not None and steps.read else None
    return MachineFacts(
        cores=usable_cores(run),
        others_median_cores=float(np.median(others)) if len(others) else None,
        others_p90_cores=float(np.percentile(others, 90)) if len(others) else None,
        steal_pct=float(np.mean(steal)) if steal else None,
        gpu_other_processes=max(gpu_others) if gpu_others else None,
        torch_threads=run.env.torch_threads,
        workers=int(workers),
        ours_median_cores=float(np.median(ours)) if ours else None,
        loop_ours_cores=None if loop is None else loop.ours_cores,
        loop_others_cores=None if loop is None else loop.others_cores,
        loop_run_wait=None if loop is None else loop.run_wait,
        loop_process_cores=process_cores(
            steady_steps(run.steps, run.window.warmup_steps), run.steps.process_cpu
        ),
    )
