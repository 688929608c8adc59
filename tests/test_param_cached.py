"""A parametrized weight computed anew on each of its reads in a forward (rules/param_cached.py):
named from the trace's operators against the live model's parametrizations, patched with
``parametrize.cached()`` around the forward.

Seen (unseen round 22, rnn_weightnorm_uncached): a hand-written RNN whose recurrent
``nn.Linear`` carries ``parametrizations.weight_norm``, 48 time steps: the trace held 48
``aten::_weight_norm_interface`` calls a step and no finding named them; by hand ``cached()``
around the forward and loss was 1.64x of the loop. The shapes: a real ``%%gpucheck`` run of
that RNN (the finding, its patch, the patched cell run again: one read a forward, no finding),
a real ``gpucheck run`` of a script whose one spectral-normed block is applied four times a
forward with the time loop in the step loop itself; the negatives: a conv net whose
weight-normed layer runs once a step (a real run), and a step that accumulates micro-batches,
each forward reading its weight once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

from gpu_notebook.records import Report
from gpu_notebook.rules.param_cached import FIX, READS
from gpu_notebook.words.proposals import attach_fixes

RULE = "host.parametrization_recomputed"

RNN = """\
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm
torch.manual_seed(0)
class WN(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 64)
        self.rec = weight_norm(nn.Linear(64, 64, bias=False))
        self.out = nn.Linear(64, 1)
    def forward(self, xs):
        h = torch.zeros(xs.shape[1], 64)
        for t in range(xs.shape[0]):
            h = torch.tanh(self.inp(xs[t]) + self.rec(h))
        return self.out(h)
model = WN()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
seqs = torch.randn(30, 24, 16, 8)
ys = seqs.sum(dim=(1, 3)).unsqueeze(-1) * 0.05
for xs, y in zip(seqs, ys):
    loss = nn.functional.mse_loss(model(xs), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

CONV = """\
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm
torch.manual_seed(0)
cnn = nn.Sequential(weight_norm(nn.Conv2d(3, 16, 3)), nn.ReLU(), nn.Flatten(),
                    nn.LazyLinear(10))
opt = torch.optim.SGD(cnn.parameters(), lr=0.01)
for step in range(30):
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    loss = nn.functional.cross_entropy(cnn(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

ACCUMULATED = """\
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm
torch.manual_seed(0)
net = nn.Sequential(weight_norm(nn.Linear(32, 32)), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(30):
    for micro in range(4):
        x = torch.randn(16, 32)
        loss = net(x).pow(2).mean()
        loss.backward()
    opt.step()
    opt.zero_grad()
"""

SHARED = """\
import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

torch.manual_seed(0)
block = spectral_norm(nn.Linear(96, 96))
head = nn.Linear(96, 1)
opt = torch.optim.Adam([*block.parameters(), *head.parameters()], lr=1e-3)
for step in range(40):
    x = torch.randn(32, 96)
    h = x
    for depth in range(4):
        h = torch.relu(block(h)) + h
    loss = head(h).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def _after(finding, cell: str) -> str:
    (fixed,) = attach_fixes([finding], cell)
    assert fixed.proposal is not None and fixed.proposal.source_after is not None
    return fixed.proposal.source_after


def test_an_rnns_weight_normed_recurrent_layer_is_named_and_its_forward_cached(ip):
    rep = _run(ip, RNN)
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == 22 and f.fix_id == FIX.fix_id  # line 1 is %%gpucheck
    said = " ".join(f.evidence)
    assert "`model.rec.weight` (weight_norm parametrization)" in said
    assert "24.0 reads a forward each" in said  # 24 time steps: one read each
    after = _after(f, RNN)
    assert (
        "    with torch.nn.utils.parametrize.cached():\n"
        "        loss = nn.functional.mse_loss(model(xs), y)\n"
        "    opt.zero_grad()\n"
    ) in after
    # The patched cell: one read a forward, nothing to name.
    rep = _run(ip, after)
    assert RULE not in [f.rule_id for f in rep.findings]


def test_cached_reads_give_the_same_loss_and_gradients():
    torch.manual_seed(0)
    rec = weight_norm(torch.nn.Linear(6, 6, bias=False))
    xs = torch.randn(5, 3, 6)

    def loss() -> torch.Tensor:
        h = torch.zeros(3, 6)
        for x in xs:
            h = torch.tanh(x + rec(h))
        return h.pow(2).sum()

    plain = loss()
    grads = torch.autograd.grad(plain, list(rec.parameters()))
    with parametrize.cached():
        cached = loss()
    again = torch.autograd.grad(cached, list(rec.parameters()))
    assert torch.allclose(plain, cached)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, again, strict=True))


def test_a_scripts_spectral_normed_block_applied_four_times_a_forward_is_named(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(SHARED)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    (f,) = [f for f in report.findings if f.rule_id == RULE]
    said = " ".join(f.evidence)
    assert "`block.weight` (spectral_norm parametrization)" in said
    assert "4.0 reads a forward each" in said
    # The time loop sits in the step loop: it is the forward the block wraps.
    after = f.proposal.source_after if f.proposal is not None else ""
    assert (
        "    h = x\n"
        "    with torch.nn.utils.parametrize.cached():\n"
        "        for depth in range(4):\n"
        "            h = torch.relu(block(h)) + h\n"
        "        loss = head(h).pow(2).mean()\n"
        "    opt.zero_grad()\n"
    ) in after


def test_a_weight_read_once_a_forward_is_not_named(ip):
    assert READS > 1.0
    for cell in (CONV, ACCUMULATED):
        rep = _run(ip, cell)
        assert RULE not in [f.rule_id for f in rep.findings]
