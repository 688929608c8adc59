"""The anomaly detection rule (rules/debug_apis.py): its check, its fix, end to end on a cell."""

from __future__ import annotations

import dataclasses

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


# ---- on while the loop ran, set outside the measured cell (issue 26): read live by the clock

HELPER_CELL = """\
import torch
an_model = torch.nn.Linear(4, 1)
an_opt = torch.optim.SGD(an_model.parameters(), lr=0.1)
def an_train_step(x):
    loss = an_model(x).pow(2).mean()
    with torch.autograd.detect_anomaly():
        loss.backward()
    an_opt.step()
    an_opt.zero_grad()
"""
HELPER_LOOP = "for _ in range(40):\n    an_train_step(torch.randn(8, 4))\n"
PLAIN_LOOP = """\
for _ in range(40):
    loss = an_model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    an_opt.step()
    an_opt.zero_grad()
"""


def _measured(ip, body: str):
    import gc

    ip.user_ns.pop("rep", None)
    gc.collect()
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _outside_finding(rep):
    from gpu_notebook.views.text import render_text

    found = [f for f in rep.findings if f.rule_id == "debug.anomaly_detection"]
    assert len(found) == 1, render_text(rep)
    f = found[0]
    # No line of this cell to edit, no patch: the card says where to act.
    assert f.line is None and f.fix_id is None
    assert "set outside this cell" in " ".join(f.evidence)
    return f


def test_anomaly_detection_in_a_helper_of_an_earlier_cell_is_found_from_the_live_state(ip):
    assert ip.run_cell(HELPER_CELL).success
    rep = _measured(ip, HELPER_LOOP)
    assert rep.run.steps.anomaly_backwards and rep.run.steps.anomaly_backwards > 0
    f = _outside_finding(rep)
    assert "an_train_step" in " ".join(f.evidence)  # the function that turned it on for backward
    assert not torch.is_anomaly_enabled()  # reading it changed nothing


def test_anomaly_detection_turned_on_in_an_earlier_cell_is_found_from_the_live_state(ip):
    assert ip.run_cell(HELPER_CELL).success
    assert ip.run_cell("torch.autograd.set_detect_anomaly(True)").success
    try:
        rep = _measured(ip, PLAIN_LOOP)
        assert torch.is_anomaly_enabled()  # theirs: left as the cell found it
    finally:
        torch.autograd.set_detect_anomaly(False)
    f = _outside_finding(rep)
    assert rep.run.steps.anomaly_backwards and rep.run.steps.anomaly_backwards > 0
    assert f.severity == "medium"


def test_a_loop_without_anomaly_detection_reads_it_off_and_has_no_finding(ip):
    assert ip.run_cell(HELPER_CELL).success
    rep = _measured(ip, PLAIN_LOOP)
    assert rep.run.steps.anomaly_backwards == 0
    assert "debug.anomaly_detection" not in [f.rule_id for f in rep.findings]


def test_the_in_cell_switch_keeps_its_source_finding_and_fix_when_the_clock_also_saw_it():
    steps = dataclasses.replace(syn.steps_record(), anomaly_backwards=5, anomaly_backward_reads=5)
    f = only(
        rules_for(syn.make_run(CELL, steps=steps), syn.make_analysis()),
        "debug.anomaly_detection",
    )
    assert f.line == 3 and f.fix_id == FIX.fix_id


def _live(on: int, read: int, caller: str | None = None):
    return dataclasses.replace(
        syn.steps_record(), anomaly_backwards=on, anomaly_backward_reads=read, anomaly_caller=caller
    )


def test_a_one_off_debugging_backward_beside_the_loop_is_not_the_loops():
    # The clock found it on in 1 of 9 backward calls: the cell's own one-off check after it.
    outside = (
        CELL.replace("torch.autograd.set_detect_anomaly(True)\n", "")
        + "with torch.autograd.detect_anomaly():\n    model(torch.randn(8, 4)).sum().backward()\n"
    )
    for cell in (outside, PLAIN_LOOP):
        run = syn.make_run(cell, steps=_live(1, 9, "check_grads"))
        assert "debug.anomaly_detection" not in ids(rules_for(run, syn.make_analysis()))


def test_a_switch_of_the_cell_the_source_does_not_place_on_the_steps_is_named_by_its_line():
    # The loop lives in a function of an earlier cell: the cell's `with` is around its call.
    cell = "import torch\nwith torch.autograd.detect_anomaly():\n    fit(model, loader)\n"
    run = syn.make_run(cell, steps=_live(8, 8, "fit"))
    f = only(rules_for(run, syn.make_analysis()), "debug.anomaly_detection")
    assert f.fix_id is None and "line 3 of this cell turns it on" in " ".join(f.evidence)
