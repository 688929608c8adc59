"""A model trained in float64 while the default dtype is float32 (rules/precision.float64_params):
unseen round 19's float64_from_numpy (numpy's float64 data through ``torch.from_numpy`` and
``model.double()`` to match it; float32 2.1x faster by hand, the product silent: only a float64
default dtype was read, ``modes.float64_default``). Measured by real %%gpucheck runs on the CPU:
the step clock reads the trained parameters' dtype; the cell's other casts read against that run,
and float32 parameters (a float64 input cast back with ``.float()``) left alone."""

from __future__ import annotations

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.rules.precision import Float64Params, float64_params
from tests.cells import measured

RULE = "precision.float64_params"

CELL = """\
import numpy as np
import torch
from torch import nn
rng = np.random.default_rng(0)
X = rng.standard_normal((256, 64))
Y = (X[:, :1] > 0).astype(X.dtype)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
model = model.double()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(0, 256, 16):
    xb, yb = torch.from_numpy(X[i : i + 16]), torch.from_numpy(Y[i : i + 16])
    loss = nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

CAST = "model = model.double()"


@pytest.fixture(scope="module")
def rep(ip):
    return measured(ip, CELL)


def test_float64_parameters_are_named_at_the_cast(rep):
    clock = rep.run.steps
    assert clock.grad_bytes and clock.double_grad_bytes == clock.grad_bytes
    assert clock.double_default_backwards == 0  # the default dtype stayed float32
    findings = [f for f in rep.findings if f.rule_id == RULE]
    assert len(findings) == 1
    f = findings[0]
    assert f.line == 9  # the cell's line 9: the magic is its first
    assert f.gain_bound is None  # no bound: the slowdown depends on the ops and the device
    assert "float32" in f.fix and ".double()" in f.fix
    assert any("line 9" in e and "float64" in e for e in f.evidence)
    assert not [f for f in rep.findings if f.rule_id == "modes.float64_default"]
    said = float64_params(rep.run, rep.analysis, scan_source(CELL))
    assert said is not None and isinstance(said.said, Float64Params)
    assert said.said.double_bytes == said.said.param_bytes == clock.grad_bytes


@pytest.mark.parametrize(
    "cast",
    ["model = model.to(torch.float64)", "model = model.to(dtype=torch.double)"],
    ids=["to-float64", "to-dtype-double"],
)
def test_other_casts_are_found(rep, cast):
    f = float64_params(rep.run, rep.analysis, scan_source(CELL.replace(CAST, cast)))
    assert f is not None and f.line == 8


def test_a_cast_the_cell_does_not_show_is_said_without_a_line(rep):
    f = float64_params(rep.run, rep.analysis, scan_source(CELL.replace(CAST, "pass")))
    assert f is not None and f.line is None
    assert isinstance(f.said, Float64Params) and f.said.text is None


def test_float32_parameters_are_left_alone(ip):
    body = CELL.replace(CAST, "pass").replace(
        "torch.from_numpy(X[i : i + 16]), torch.from_numpy(Y[i : i + 16])",
        "torch.from_numpy(X[i : i + 16]).float(), torch.from_numpy(Y[i : i + 16]).float()",
    )
    rep = measured(ip, body)
    assert rep.run.steps.double_grad_bytes == 0
    assert not [f for f in rep.findings if f.rule_id == RULE]
