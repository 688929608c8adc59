"""The machine the run shared: other processes' load, steal, other GPU processes, our threads.

Figures only (the rules word them): what the sampler saw of the rest of the machine over the
whole run, and how many threads this process asked of the cores it may use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu_notebook.analysis.interference import sample_series, usable_cores
from gpu_notebook.records import Run

__all__ = ["MachineFacts", "machine_facts"]


@dataclass(frozen=True)
class MachineFacts:
    """Interference over one run (analysis.machine)."""

    cores: int  # cores this process may use
    others_median_cores: float | None  # other processes' load, cores
    others_p90_cores: float | None
    steal_pct: float | None  # mean hypervisor steal over the cores
    gpu_other_processes: int | None  # the most other compute processes seen on a GPU
    torch_threads: int | None
    workers: int  # the most child processes seen (DataLoader workers)
    ours_median_cores: float | None  # this process and its children, cores

    @property
    def threads_wanted(self) -> int | None:
        """Runnable threads this process asks for: torch's intra-op pool plus its workers."""
        if self.torch_threads is None:
            return None
        return self.torch_threads + self.workers

    @property
    def free_cores(self) -> float:
        """Cores left for us by the others (their median load), at least 1."""
        return max(1.0, self.cores - (self.others_median_cores or 0.0))


def machine_facts(run: Run) -> MachineFacts:
    _, others = sample_series(run)
    samples = run.samples.samples
    steal = [s.steal_pct for s in samples if s.steal_pct is not None]
    gpu_others = [
        g.other_processes for s in samples for g in s.gpus if g.other_processes is not None
    ]
    workers = max((s.children for s in samples if s.children is not None), default=0)
    ours = [
        (s.process_cpu_pct + (s.children_cpu_pct or 0.0)) / 100.0
        for s in samples
        if s.process_cpu_pct is not None
    ]
    return MachineFacts(
        cores=usable_cores(run),
        others_median_cores=float(np.median(others)) if len(others) else None,
        others_p90_cores=float(np.percentile(others, 90)) if len(others) else None,
        steal_pct=float(np.mean(steal)) if steal else None,
        gpu_other_processes=max(gpu_others) if gpu_others else None,
        torch_threads=run.env.torch_threads,
        workers=int(workers),
        ours_median_cores=float(np.median(ours)) if ours else None,
    )
