"""The parameter-loop rule (rules/param_loops.py): its check, its fix, end to end on a cell."""

from __future__ import annotations

import pytest
import torch

from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.rules.param_loops import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

CELL = """\
import copy
import torch
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
ema = copy.deepcopy(model).requires_grad_(False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
decay = 0.9
for step in range(3):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(decay).add_(p.detach(), alpha=1 - decay)
"""


def run_cell(source: str) -> dict[str, object]:
    torch.manual_seed(0)
    scope: dict[str, object] = {}
    exec(compile(source, "<cell>", "exec"), scope)
    return scope


def test_an_ema_loop_over_the_parameters_is_found_and_written_as_foreach_calls():
    analysis = syn.make_analysis({"forward": 0.4, "other": 0.12, "unattributed": 0.03})
    f = only(rules_for(syn.make_run(CELL, gpus=[syn.gpu()]), analysis), "host.parameter_loop")
    # Line 15 of the notebook cell: the %%gpucheck line is line 1.
    assert f.line == 15 and f.fix_id == FIX.fix_id and f.severity == "medium"
    assert f.gain_bound == pytest.approx(1 / 0.85)  # the step's time outside the phases, removed
    (fixed,) = attach_fixes([f], CELL)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "for e, p in zip" not in after
    assert "        params = list(zip(ema.parameters(), model.parameters()))\n" in after
    assert "        torch._foreach_mul_([e for e, p in params], decay)\n" in after
    # Under no_grad p.detach() is p to the foreach call: the list of the tensors themselves.
    assert (
        "        torch._foreach_add_([e for e, p in params], [p for e, p in params], "
        "alpha=1 - decay)\n"
    ) in after
    # The patched cell keeps the same average (to rounding) and trains as the original does.
    before, patched = run_cell(CELL), run_cell(after)
    for a, b in zip(before["ema"].parameters(), patched["ema"].parameters(), strict=True):  # type: ignore[attr-defined]
        torch.testing.assert_close(a, b)


def test_a_loop_over_one_models_parameters_edits_the_list_itself():
    cell = CELL.replace(
        """        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(decay).add_(p.detach(), alpha=1 - decay)""",
        """        for p in model.parameters():
            p.mul_(0.999)""",
    )
    patched = apply_fix(FIX, cell)
    assert isinstance(patched, Patch)
    assert "params = list(model.parameters())" in patched.source_after
    assert "torch._foreach_mul_(params, 0.999)" in patched.source_after


@pytest.mark.parametrize(
    "body",
    [
        "e.copy_(decay * e + (1 - decay) * p)",  # an expression of the tensors: said, no patch
        "p.data.add_(p.grad, alpha=-0.1)",  # .grad may be None: said, no patch
    ],
)
def test_arguments_that_are_not_the_tensors_themselves_get_no_patch(body):
    cell = CELL.replace("e.mul_(decay).add_(p.detach(), alpha=1 - decay)", body)
    analysis = syn.make_analysis({"forward": 0.4, "other": 0.15})
    f = only(rules_for(syn.make_run(cell, gpus=[syn.gpu()]), analysis), "host.parameter_loop")
    assert f.fix_id is None
    assert not isinstance(apply_fix(FIX, cell), Patch)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("    with torch.no_grad():\n", "    if step % 10 == 0:\n"),  # some steps only
        ("zip(ema.parameters(), model.parameters())", "ema_pairs"),  # not .parameters()
        ("e.mul_(decay).add_(p.detach(), alpha=1 - decay)", "print(e.norm())"),  # no update
    ],
)
def test_no_finding_where_no_parameter_loop_of_in_place_ops_runs_every_step(old, new):
    cell = CELL.replace(old, new)
    analysis = syn.make_analysis({"forward": 0.4, "other": 0.15})
    assert "host.parameter_loop" not in ids(rules_for(syn.make_run(cell), analysis))


def test_a_strict_zip_is_the_same_loop_and_stays_strict_in_the_list():
    cell = CELL.replace("model.parameters()):", "model.parameters(), strict=True):")
    patched = apply_fix(FIX, cell)
    assert isinstance(patched, Patch)
    assert "params = list(zip(ema.parameters(), model.parameters(), strict=True))" in (
        patched.source_after
    )


def test_with_autograd_on_the_detach_stays_per_tensor():
    cell = CELL.replace(
        """    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(decay).add_(p.detach(), alpha=1 - decay)""",
        """    for e, p in zip(ema.parameters(), model.parameters()):
        e.mul_(decay).add_(p.detach(), alpha=1 - decay)""",
    )
    patched = apply_fix(FIX, cell)
    assert isinstance(patched, Patch)
    assert "[p.detach() for e, p in params]" in patched.source_after
    before, after = run_cell(cell), run_cell(patched.source_after)
    for a, b in zip(before["ema"].parameters(), after["ema"].parameters(), strict=True):  # type: ignore[attr-defined]
        torch.testing.assert_close(a, b)
        assert b.grad_fn is None  # the average stays out of the graph


def test_without_a_gpu_the_loop_is_said_at_info_with_no_patch():
    # On the CPU a foreach call runs its op tensor by tensor: only the Python between them goes
    # (unseen round 10 ema_param_loop: --try-fixes read 0.86x, 0.79x-0.93x).
    analysis = syn.make_analysis({"forward": 0.4, "other": 0.12, "unattributed": 0.03})
    f = only(rules_for(syn.make_run(CELL), analysis), "host.parameter_loop")
    assert f.severity == "info" and f.fix_id is None
    assert "No patch on the CPU" in f.fix
