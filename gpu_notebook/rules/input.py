"""Input pipeline rules: the step waits for the DataLoader (too few workers, slow dataset, busy CPUs).

Thresholds:
- data wait > 5% of the step suggests workers (PyTorch TensorBoard profiler plugin,
  ``profiler/data.py``); 10% warn, 20% critical (TraceML ``diagnostics/step_time/policy.py``);
- workers between 70% and 200% of the CPU cores (SageMaker Debugger ``Dataloader`` rule);
- CPU bottleneck: GPU < 10% while CPU > 90% in more than half of the samples (SageMaker
  Debugger ``CPUBottleneck``).
The gain bound is Amdahl over the data-wait share: workers can hide the wait, not remove more.
"""

from __future__ import annotations

import math

from gpu_notebook.records import Analysis, Finding, Run
from gpu_notebook.rules.common import (
    SUGGEST,
    WARN,
    fmt_bound,
    finding,
    gain_bound,
    has_gpu,
    pct,
    phase_source,
    severity_of,
    share,
    loader_in_use,
)
from gpu_notebook.rules.source_scan import SourceFacts

WORKERS_MIN_SHARE_OF_CORES = 0.70  # SageMaker Debugger Dataloader rule: 70%..200% of cores
# Each worker holds a copy of the dataset object and prefetches 2 batches; past ~16 the memory
# grows faster than the wait shrinks on typical notebook machines (our choice, not a published rule).
WORKERS_CAP = 16
CPU_BUSY_PCT = 90.0  # SageMaker Debugger CPUBottleneck: CPU > 90%
GPU_IDLE_PCT = 10.0  # ... while GPU < 10%
BOTTLENECK_SAMPLE_SHARE = 0.5  # ... for more than 50% of the run

_SOURCE_WORKERS = (
    "TensorBoard profiler plugin profiler/data.py (data > 5% of step: add workers); TraceML "
    "step_time policy (warn 10%, critical 20%); SageMaker Debugger Dataloader rule (workers "
    "70-200% of cores)"
)


def suggested_workers(cpu_count: int) -> int:
    """70% of the cores, rounded up (SageMaker's lower bound), at least 1, at most 16."""
    return max(1, min(WORKERS_CAP, math.ceil(WORKERS_MIN_SHARE_OF_CORES * cpu_count)))


def loader_workers(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The step waits for data and the DataLoader has no (or too few) worker processes."""
    data = share(analysis, "data")
    severity = severity_of(data, low=SUGGEST)
    if data is None or severity is None:
        return None
    cores = run.env.cpu_count
    wanted = suggested_workers(cores)
    static, live = loader_in_use(facts)
    evidence = [f"waiting for the next batch: {pct(data)} of the step ({phase_source(analysis)})"]
    line: int | None = None
    if static is not None:
        workers = static.num_workers
        line = static.line
        where = f"DataLoader on line {static.line}"
        if static.name:
            where += f" (`{static.name}`)"
    elif live is not None:
        workers = live.num_workers
        where = (
            f"`{live.name}`, a DataLoader built in an earlier cell over {live.dataset_type}"
            + (f" ({live.dataset_len} items)" if live.dataset_len is not None else "")
            + f", batch_size={live.batch_size}"
        )
    else:
        workers = None
        where = "the DataLoader (not built in this cell and not found in the namespace)"
    if workers is not None and workers >= wanted:
        return None  # enough workers: slow_dataset explains the wait
    if workers is None:
        evidence.append(f"{where}: its num_workers is not known")
    else:
        evidence.append(f"{where}: num_workers={workers}, {cores} CPU core(s) on this machine")
    if live is not None and not live.pin_memory and has_gpu(run):
        evidence.append(f"`{live.name}` does not pin memory (pin_memory=False)")
    bound = gain_bound(data, analysis)
    evidence.append(f"gain if the wait is hidden by workers: {fmt_bound(bound)} (Amdahl over the data share)")
    title = (
        "The step waits for data: the DataLoader loads batches in the main process"
        if workers == 0
        else f"The step waits for data: {workers} DataLoader worker(s) for {cores} cores"
        if workers is not None
        else "The step waits for data"
    )
    return finding(
        "input.loader_workers",
        title,
        severity,
        evidence,
        f"Use num_workers={wanted} (70% of {cores} cores), persistent_workers=True"
        + (", pin_memory=True" if has_gpu(run) else "")
        + "; workers prepare the next batches while the model trains.",
        _SOURCE_WORKERS,
        phase_share=data,
        bound=bound,
        line=line,
        fix_id="dataloader_workers",
        fix_params={"num_workers": wanted, "pin_memory": has_gpu(run), "persistent_workers": True},
    )


def slow_dataset(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """Enough workers, and the step still waits: the dataset's __getitem__ or transform is slow."""
    data = share(analysis, "data")
    severity = severity_of(data, low=WARN)
    if data is None or severity is None:
        return None
    cores = run.env.cpu_count
    static, live = loader_in_use(facts)
    workers = static.num_workers if static is not None else live.num_workers if live is not None else None
    if workers is None or workers < suggested_workers(cores):
        return None  # loader_workers speaks first
    persistent = (
        static.persistent_workers if static is not None else live.persistent_workers if live else None
    )
    evidence = [
        f"waiting for the next batch: {pct(data)} of the step ({phase_source(analysis)})",
        f"already {workers} worker(s) for {cores} core(s): adding more would compete for the same cores",
    ]
    if live is not None:
        evidence.append(f"dataset: {live.dataset_type}, batch_size={live.batch_size}")
    fix = (
        "Make each sample cheaper: cache decoded/transformed samples that are the same every "
        "epoch, pre-serialize or memory-map the data, move augmentation to the GPU."
    )
    if persistent is False:
        fix += " Set persistent_workers=True so workers are not restarted every epoch."
    bound = gain_bound(data, analysis)
    return finding(
        "input.slow_dataset",
        "The step waits for data although the DataLoader has workers: the dataset is slow",
        severity,
        evidence,
        fix,
        "TraceML step_time policy (input wait warn 10%, critical 20%); SageMaker Debugger "
        "Dataloader rule (70-200% of cores); seed articles (cache transforms, mmap: 14x in one case)",
        phase_share=data,
        bound=bound,
        line=static.line if static is not None else None,
    )


def cpu_saturated(run: Run, analysis: Analysis, facts: SourceFacts) -> Finding | None:
    """The CPUs are saturated (preprocessing) while the GPU idles."""
    samples = [s for s in run.samples.samples if s.system_cpu_pct is not None and s.gpus]
    paired = [
        (s.system_cpu_pct, max((g.utilization_pct or 0.0) for g in s.gpus))
        for s in samples
        if any(g.utilization_pct is not None for g in s.gpus)
    ]
    if len(paired) < 4:
        return None  # too few samples to speak of "most of the run"
    starved = sum(1 for cpu, gpu in paired if cpu is not None and cpu > CPU_BUSY_PCT and gpu < GPU_IDLE_PCT)
    fraction = starved / len(paired)
    if fraction <= BOTTLENECK_SAMPLE_SHARE:
        return None
    util = analysis.utilization
    data = share(analysis, "data")
    evidence = [
        f"in {pct(fraction)} of {len(paired)} samples the CPUs were > {CPU_BUSY_PCT:.0f}% busy "
        f"while the GPU was < {GPU_IDLE_PCT:.0f}% utilized",
    ]
    if util.children_cpu_mean_pct is not None:
        evidence.append(f"DataLoader workers (child processes) used {util.children_cpu_mean_pct:.0f}% CPU on average (100% = one core)")
    if data is not None:
        evidence.append(f"waiting for the next batch: {pct(data)} of the step")
    else:
        evidence.append("data wait: not measured")
    bound = gain_bound(data, analysis)
    return finding(
        "input.cpu_saturated",
        "The CPUs are saturated preparing data while the GPU idles",
        "high" if data is not None and data >= 0.20 else "medium",
        evidence,
        "Move augmentation to the GPU, cache preprocessed samples, or use a machine with more "
        "CPU cores per GPU; more GPUs would idle the same way.",
        "SageMaker Debugger CPUBottleneck rule (GPU < 10% while CPU > 90% for > 50% of the run)",
        phase_share=data,
        bound=bound,
    )


RULES = (loader_workers, slow_dataset, cpu_saturated)
