"""A profiler window that recorded parts of a step (``within-step``): the capture hands up what it
covered as figures (``records.WithinStep``), and the report words the window's note from them
(``words/window.py``), as it words the findings. tests/test_magic.py and tests/test_cell_time.py
read the worded note of real LBFGS and evaluation-before-training cells."""

from __future__ import annotations

import dataclasses

from gpu_notebook.records import ProfileWindow, Run, WithinStep
from gpu_notebook.report.build import build_report
from gpu_notebook.words.window import worded_windows
from tests.scenarios import synthetic as syn


def _within(covered: WithinStep, message: str | None = None) -> Run:
    window = ProfileWindow("within-step", 2, 3, recorded_steps=0, within_step=covered)
    return dataclasses.replace(syn.make_run(), window=dataclasses.replace(window, message=message))


def test_the_report_words_what_a_within_step_window_covered():
    run = build_report(_within(WithinStep(1, "backward", "optimizer")), with_fixes=False).run
    assert run.window.message is not None
    assert run.window.message.startswith(
        "the window recorded 1 step counted at backward before the first step counted at "
        "optimizer ended"
    )


def test_each_kind_of_covered_steps_has_its_own_words():
    before = worded_windows(_within(WithinStep(3, "dataloader", "backward", trained=False)))
    assert "3 steps counted at dataloader that ran no backward" in (before.window.message or "")
    assert "before training" in (before.window.message or "")
    parts = worded_windows(_within(WithinStep(2, regrouped=True)))
    assert "cycle of optimizer steps was learnt" in (parts.window.message or "")


def test_a_window_worded_already_or_not_within_a_step_is_kept_as_it_is():
    kept = _within(WithinStep(1, "backward", "optimizer"), message="an older record's note")
    assert worded_windows(kept) is kept
    plain = syn.make_run()
    assert worded_windows(plain) is plain
