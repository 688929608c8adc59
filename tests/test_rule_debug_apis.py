"""The anomaly detection rule (rules/debug_apis.py): its check, its fix, end to end on a cell."""

from __future__ import annotations

import pytest
import torch

from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.rules.debug_apis import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

CELL = """\
import torch
torch.autograd.set_detect_anomaly(True)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
anomaly = torch.is_anomaly_enabled()
torch.autograd.set_detect_anomaly(False)
"""
WITH_CELL = """\
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autograd.detect_anomaly():
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        anomaly = torch.is_anomaly_enabled()
"""


def _runs(source: str) -> bool:
    """Run a cell; whether anomaly detection was on in its loop (the global is put back)."""
    scope: dict[str, object] = {}
    try:
        exec(compile(source, "<cell>", "exec"), scope)
    finally:
        torch.autograd.set_detect_anomaly(False)
    assert isinstance(scope["loss"], torch.Tensor)
    return bool(scope["anomaly"])


@pytest.mark.parametrize("cell", [CELL, WITH_CELL], ids=["statement", "with"])
def test_anomaly_detection_on_for_the_loop_is_found_and_turned_off(cell):
    f = only(rules_for(syn.make_run(cell), syn.make_analysis()), "debug.anomaly_detection")
    # The %%gpucheck line is line 1 of the notebook cell.
    assert f.line in (3, 5) and f.severity == "medium" and f.gain_bound is None
    assert f.fix_id == FIX.fix_id
    # Nothing this run measured bounds its gain: offered as something to measure, not more.
    assert f.fix.startswith("Unmeasured: nothing this run measured bounds what it gains")
    (fixed,) = attach_fixes([f], cell)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "torch.autograd.set_detect_anomaly(False)" in after and "(True)" not in after
    # The original loop ran with it on; the patched one runs, and without it.
    assert _runs(cell) and not _runs(after)


@pytest.mark.parametrize(
    "cell",
    [
        CELL.replace("set_detect_anomaly(True)", "set_detect_anomaly(False)"),
        CELL.replace("    loss.backward()\n", ""),  # nothing trains
        # On for one debugging step outside the loop only.
        CELL.replace("torch.autograd.set_detect_anomaly(True)\n", "")
        + "with torch.autograd.detect_anomaly():\n    model(torch.randn(8, 4)).sum().backward()\n",
    ],
    ids=["off", "no-training", "outside-the-loop"],
)
def test_no_finding_where_the_training_steps_run_without_it(cell):
    assert "debug.anomaly_detection" not in ids(rules_for(syn.make_run(cell), syn.make_analysis()))
    assert not isinstance(apply_fix(FIX, cell), Patch)


STEP_FN_CELL = """\
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def train_step(model, x):
    with torch.autograd.detect_anomaly():
        loss = model(x).pow(2).mean()
        loss.backward()
        on = torch.is_anomaly_enabled()
    opt.step()
    opt.zero_grad()
    return loss, on
for step in range(3):
    loss, anomaly = train_step(model, torch.randn(8, 4))
"""


def test_anomaly_detection_in_the_step_function_the_loop_calls_is_found_and_turned_off():
    # The cause lives in another function: on main the loop had no .backward() of its own, so
    # the cell had no step loop and the switch inside train_step went unseen.
    f = only(rules_for(syn.make_run(STEP_FN_CELL), syn.make_analysis()), "debug.anomaly_detection")
    assert f.line == 6  # the with in train_step (the %%gpucheck line is line 1)
    (fixed,) = attach_fixes([f], STEP_FN_CELL)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "with torch.autograd.set_detect_anomaly(False):" in after
    assert _runs(STEP_FN_CELL) and not _runs(after)


def test_a_function_with_backward_that_no_loop_calls_is_not_a_step():
    once = STEP_FN_CELL.replace(
        "for step in range(3):\n    loss, anomaly = train_step(model, torch.randn(8, 4))\n",
        "loss, anomaly = train_step(model, torch.randn(8, 4))\n",
    )
    assert "debug.anomaly_detection" not in ids(rules_for(syn.make_run(once), syn.make_analysis()))
