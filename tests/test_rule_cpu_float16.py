"""float16 autocast on a CPU-only run (rules/precision.cpu_float16): a GPU's mixed-precision
recipe moved onto a CPU (unseen round 18's scaler_skip_nonfinite: a GRU under
``torch.autocast("cpu", dtype=torch.float16)`` and a GradScaler, 63.8 ms a step against 13.2 ms
in float32 by hand, the product silent). Measured by a real %%gpucheck run on the CPU; the cell's
other shapes of the same autocast read against that run's analysis, and the autocasts that are
no CPU float16 (bfloat16, CUDA's, a dtype not written) left alone."""

from __future__ import annotations

import pytest

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.rules.precision import CpuFloat16, cpu_float16
from tests.cells import measured

RULE = "precision.cpu_float16"

CELL = """\
import torch
from torch import nn
torch.manual_seed(0)
gru = nn.GRU(16, 48, batch_first=True)
head = nn.Linear(48, 2)
opt = torch.optim.AdamW([*gru.parameters(), *head.parameters()], lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(16, 20, 16), torch.randint(0, 2, (16,))
for step in range(12):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.cross_entropy(head(gru(x)[0][:, -1]), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""

AUTOCAST = 'torch.autocast("cpu", dtype=torch.float16)'


@pytest.fixture(scope="module")
def rep(ip):
    return measured(ip, CELL)


def test_a_cpu_float16_autocast_is_named_at_its_line_with_the_measured_compute(rep):
    findings = [f for f in rep.findings if f.rule_id == RULE]
    assert len(findings) == 1
    f = findings[0]
    assert f.line == 12 and f.severity == "medium"  # the cell's line 12: the magic is its first
    assert f.gain_bound is None  # no bound: how much slower depends on the ops and the CPU
    assert "GradScaler" in f.fix and "bfloat16" in f.fix
    assert any("line 12" in e and "float16" in e for e in f.evidence)
    said = cpu_float16(rep.run, rep.analysis, scan_source(CELL))
    assert said is not None and isinstance(said.said, CpuFloat16)
    assert said.said.scaler and said.said.autocasts == 1
    # The step's forward and backward, as the real trace measured them, is the share it sets.
    compute = said.said.compute
    assert compute is not None and compute > 0.5 and f.phase_share == pytest.approx(compute)


@pytest.mark.parametrize(
    "cast",
    [
        'torch.autocast(device_type="cpu", dtype=torch.half)',
        "torch.cpu.amp.autocast(dtype=torch.float16)",
        'torch.amp.autocast("cpu", dtype=torch.float16)',
    ],
    ids=["device-type-half", "cpu-amp", "amp-module"],
)
def test_other_shapes_of_the_cpu_float16_autocast(rep, cast):
    cell = CELL.replace(AUTOCAST, cast).replace('    scaler = torch.amp.GradScaler("cpu")\n', "")
    f = cpu_float16(rep.run, rep.analysis, scan_source(cell))
    assert f is not None and f.line == 11


@pytest.mark.parametrize(
    "cast",
    [
        'torch.autocast("cpu", dtype=torch.bfloat16)',
        "torch.cpu.amp.autocast()",
        'torch.autocast("cuda", dtype=torch.float16)',
        "torch.cuda.amp.autocast()",
        'torch.autocast("cpu", dtype=amp_dtype)',
        "torch.autocast(device, dtype=torch.float16)",
    ],
    ids=["bf16", "cpu-default", "cuda", "cuda-amp", "dtype-var", "device-var"],
)
def test_no_finding_where_the_cpu_is_not_autocast_to_float16(rep, cast):
    assert cpu_float16(rep.run, rep.analysis, scan_source(CELL.replace(AUTOCAST, cast))) is None
