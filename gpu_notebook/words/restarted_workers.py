"""Words of rules/restarted_workers: one loader's workers started again at every pass over it."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.restarted_workers import RestartedWorkers
from gpu_notebook.words.common import Words, worder, words
from gpu_notebook.words.restart_range import ran_clock_clause


@worder(RestartedWorkers)
def restarted_workers(s: RestartedWorkers) -> Words:
    b = s.bursts
    where = (
        f"the DataLoader on line {s.line}"
        if s.line is not None
        else "the Trainer's DataLoader"
        if s.hf
        else "the loader the steps read"
    )
    per_start = b.excess_s / max(1, b.starts) * 1000
    evidence = [
        f"{where} has {s.workers} worker process(es) and no persistent_workers: it is iterated "
        f"again at each pass (epoch), and each new pass starts its workers again",
        f"over {b.starts} passes, each pass's first {b.burst_steps} step(s) took "
        f"{per_start:.1f} ms more than the same loader's steady step "
        f"({b.steady_median_s * 1000:.2f} ms, its median): {fmt_share(b.share)} of the run's "
        f"step time{ran_clock_clause(b)} (from {fmt_share(b.share_low)} to "
        f"{fmt_share(b.share_high)}, its 90% interval on either clock); gain if the start-ups go: {fmt_gain(s.bound, s.low)} (Amdahl over those "
        "shares)",
    ]
    knob = (
        "dataloader_persistent_workers=True in TrainingArguments"
        if s.hf
        else ("persistent_workers=True on the DataLoader")
    )
    return words(
        f"The loader's {s.workers} workers start again at every epoch",
        evidence,
        f"Pass {knob}: the same loader keeps its workers between passes (or num_workers=0 "
        "where the data is already in memory and the workers only hand batches over).",
        "PyTorch DataLoader docs (persistent_workers)",
    )
