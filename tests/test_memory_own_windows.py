"""Process memory that steps up across our own profiler windows is not the loop's creep.

Seen (issue 26, unseen round 6): a conv net trained by a Trainer whose ``fit()`` yields floats,
keeping nothing. Its RSS, read every 16 steps, stayed at 396-400 MiB up to step 64, stepped to
413 MiB across the second profiled window (steps 66-68: Kineto's buffers and the events we keep
until the report), then 418-423 MiB. A straight line through it (R^2 0.86) read "[medium] Memory
grows every step" with "Keep values, not tensors with their graphs". The jump across a window
is ours; the loop's own growth is the rest.
"""

from __future__ import annotations

import dataclasses

from gpu_notebook.analysis.run_trend import run_shape
from gpu_notebook.records import ProfileWindow, StepMemory
from gpu_notebook.report.build import build_report
from tests.test_machine import _run

MIB = 2**20
# (step, RSS bytes) as recorded
RSS = [(0, 381489152), (16, 399896576), (32, 395706368), (48, 399360000), (64, 399343616),
       (80, 412987392), (96, 418488320), (112, 421720064), (128, 421740544),
       (144, 422563840)]  # fmt: skip


def _with_memory(points: list[tuple[int, int]]):
    run = _run([0.1] * 150, lambda t: 0.0, threads=1)
    memory = tuple(StepMemory(i, rss) for i, rss in points)
    second = ProfileWindow("recorded", 2, 3, first_step=66, recorded_steps=3)
    return dataclasses.replace(
        run, steps=dataclasses.replace(run.steps, memory=memory), more_windows=(second,)
    )


def _creeps(run) -> bool:
    return any(f.rule_id == "run.memory_creep" for f in build_report(run).findings)


def test_a_step_up_across_our_profiler_window_is_not_a_creep():
    run = _with_memory(RSS)
    shape = run_shape(run)
    assert shape is not None
    assert not _creeps(run)


def test_a_leak_across_the_same_windows_stays_a_creep():
    # 250 KB a step kept by the loop, read at the same steps, and the same jump at the window.
    leak = [(i, 380 * MIB + 250_000 * i + (14 * MIB if i > 66 else 0)) for i, _ in RSS]
    assert _creeps(_with_memory(leak))


def test_two_readings_at_one_step_are_no_gap_to_divide_by():
    # A real HF Trainer run (logging_steps=5, tests/test_periodic_cost) recorded two readings
    # at one step: the cell raised ZeroDivisionError from our report.
    twice = [*RSS[:5], (64, 399343616), *RSS[5:]]
    assert not _creeps(_with_memory(twice))
