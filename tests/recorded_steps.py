"""A real run's step clock kept as JSON (tests/data/loaded_*_steps.json), read back as a Run.

Each file holds what a ``%%gpucheck`` run of a loaded machine recorded: per step its index,
start, wall time, wait for a core (None: not read) and our own work's time, the profiler
window, and the steps the stack sampler followed the window with (``followed``: marked as ours,
since the run's stacks are not kept). The phases are split 40/40/20 of each step: the tests
that read these files read step times and waits, never phases.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from gpu_notebook.records import ProfileWindow, Run, StepClockRecord, StepTiming
from tests.scenarios import synthetic as syn


def recorded_run(name: str) -> Run:
    """The run kept in ``tests/data/<name>``."""
    doc = json.loads((Path(__file__).parent / "data" / name).read_text())
    followed = set(doc["followed"])
    rows = tuple(
        StepTiming(
            i,
            t,
            d,
            0.0,
            d * 0.4,
            d * 0.4,
            d * 0.2,
            1,
            1,
            64,
            timed=i < 5,
            ours_s=o or (1e-6 if i in followed else 0.0),
            wait_s=w,
        )
        for i, t, d, w, o in doc["steps"]
    )
    first, n = doc["window"]
    window = ProfileWindow("recorded", doc["warmup_steps"], n, first_step=first, recorded_steps=n)
    run = syn.make_run(steps=StepClockRecord("optimizer", len(rows), rows))
    return dataclasses.replace(run, window=window)
