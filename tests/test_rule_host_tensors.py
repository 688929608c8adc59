"""The host-made tensor rule (rules/host_tensors.py): its check, its fix, end to end on a cell."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_notebook.fixes import Patch, apply_fix
from gpu_notebook.rules.host_tensors import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

CELL = """\
import torch
device = "cpu"
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 4).to(device)
    noise = torch.zeros(8, 1).to(device, non_blocking=True)
    loss = (model(x) + noise).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def gpu_analysis(copy: float = 0.12):
    return dataclasses.replace(
        syn.make_analysis({"copy": copy, "forward": 0.5}), gpu=syn.timeline(busy=0.6)
    )


def test_a_tensor_made_on_the_host_in_the_step_loop_is_found_and_made_on_the_device():
    f = only(rules_for(syn.make_run(CELL, gpus=[syn.gpu()]), gpu_analysis()), "copies.host_made")
    # Line 7 of the notebook cell: the %%gpucheck line is line 1.
    assert f.line == 7 and f.severity == "medium" and f.fix_id == FIX.fix_id
    assert f.phase_share == pytest.approx(0.12)
    (fixed,) = attach_fixes([f], CELL)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    after = fixed.proposal.source_after
    assert "x = torch.randn(8, 4, device=device)" in after
    # Not a lone device: .to(device, non_blocking=True) is left to the copy rules.
    assert "torch.zeros(8, 1).to(device, non_blocking=True)" in after
    # The patched cell runs and trains as the original does.
    for source in (CELL, after):
        torch.manual_seed(0)
        scope: dict[str, object] = {}
        exec(compile(source, "<cell>", "exec"), scope)
        assert isinstance(scope["loss"], torch.Tensor)


@pytest.mark.parametrize(
    "line",
    [
        "x = torch.randn(8, 4, device=device)",  # made on the device already
        "x = torch.randn(8, 4).to(torch.float16)",  # a dtype, not a device
        "x = torch.randn(8, 4).to('cpu')",
        "x = batch.to(device)",  # data from the loader: the copy rules speak
    ],
)
def test_no_finding_where_nothing_is_made_on_the_host_for_the_gpu(line):
    cell = CELL.replace("x = torch.randn(8, 4).to(device)", line)
    findings = rules_for(syn.make_run(cell, gpus=[syn.gpu()]), gpu_analysis())
    assert "copies.host_made" not in ids(findings)
    assert not isinstance(apply_fix(FIX, cell), Patch)


def test_silent_without_a_gpu_and_cuda_gets_the_cuda_device():
    assert "copies.host_made" not in ids(rules_for(syn.make_run(CELL), syn.make_analysis()))
    cell = CELL.replace("torch.randn(8, 4).to(device)", "torch.randn(8, 4).cuda()")
    patched = apply_fix(FIX, cell)
    assert isinstance(patched, Patch)
    assert 'x = torch.randn(8, 4, device="cuda")' in patched.source_after


def test_the_fix_reads_a_cell_with_ipython_lines():
    cell = "%time warm = 1\n" + CELL + "!echo done\n"
    patched = apply_fix(FIX, "%%gpucheck\n" + cell)
    assert isinstance(patched, Patch), patched
    assert "x = torch.randn(8, 4, device=device)" in patched.source_after
    assert "%time warm = 1\n" in patched.source_after and "!echo done\n" in patched.source_after
