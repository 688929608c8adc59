"""Words of the respawned-workers rule (rules/loader_respawn.py)."""

from __future__ import annotations

from gpu_notebook.formatting import fmt_gain, fmt_share
from gpu_notebook.rules.loader_respawn import RespawnedWorkers
from gpu_notebook.words.common import Words, worder, words


@worder(RespawnedWorkers)
def respawned_workers(s: RespawnedWorkers) -> Words:
    period = (
        f"every {s.stalls.period_steps} steps"
        if s.stalls.period_steps
        else f"{s.stalls.count} times over the run"
    )
    evidence = [
        f"line {s.line}: `{s.text}` runs in the loop of line {s.epoch_line}: a new loader and "
        f"{s.workers} new worker process(es) each time, whose first batches wait for the workers "
        "to start",
        f"the run stalls {period} ({s.stalls.count} step(s), {fmt_share(s.stalls.share)} of the "
        f"run's time), {fmt_share(s.stalls.phase_share or 0.0)} of their extra time in the data "
        "wait",
        f"gain if the workers start once: {fmt_gain(s.bound)}",
    ]
    fix = (
        "Build the DataLoader once, above the epoch loop, with persistent_workers=True: its "
        "workers start once and serve every epoch (shuffle=True still reshuffles each epoch)."
    )
    if not s.movable:
        fix += (
            f" Its arguments read a name the loop of line {s.epoch_line} sets, so no patch: make "
            "the loader outside the loop where the data allows it."
        )
    return words(
        "The DataLoader's workers start again every epoch",
        evidence,
        fix,
        "PyTorch DataLoader docs (persistent_workers: keep the workers alive across epochs)",
    )
