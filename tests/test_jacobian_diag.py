"""A Jacobian of the whole batch read on its batch diagonal (rules/jacobian_diag.py): named at its
line, with the per-sample forms as advice.

Seen (unseen round 22, jacrev_batch_penalty): ``jacrev(energy)(x).diagonal(dim1=0, dim2=1)`` as
an input-gradient penalty over a batch of 64; the trace said backward 88%, the hot lines the
backward 76% and the Jacobian's line 17%, and no finding named it. By hand
``torch.autograd.grad(energy(x).sum(), x, create_graph=True)[0]`` was 12.0x of the loop. The
shapes: a real run of a step loop (the diagonal read on the name), a helper the step calls
(``torch.autograd.functional.jacobian`` and an einsum), a Lightning ``training_step`` (an index
pair), ``jacfwd`` read through ``torch.diagonal``; the negatives: a Jacobian read whole, one of a
name the batch does not reach, one before the loop, one under ``if step % 10``, one already
under ``vmap``, the diagonal of a feature pair.
"""

from __future__ import annotations

import torch
from torch.func import jacrev, vmap

from gpu_notebook.records import Report
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

RULE = "autograd.batch_jacobian"

PENALTY = """\
import torch
from torch import nn
from torch.func import jacrev
torch.manual_seed(0)
data = torch.randn(16 * 12, 8)
net = nn.Sequential(nn.Linear(8, 64), nn.Softplus(), nn.Linear(64, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
def energy(x):
    return net(x).squeeze(-1)
for epoch in range(3):
    for x in data[torch.randperm(len(data))].split(16):
        jac = jacrev(energy)(x)
        grad_x = jac.diagonal(dim1=0, dim2=1).T
        loss = energy(x).mean() + 0.1 * grad_x.pow(2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

HELPER = """\
import torch
from torch.autograd.functional import jacobian
def penalty(f, x):
    J = jacobian(f, x, create_graph=True)
    return torch.einsum("bibj->bij", J).pow(2).sum()
for step, (x, y) in enumerate(loader):
    loss = model(x).sum() + penalty(model, x)
    loss.backward()
    opt.step()
"""

LIGHTNING = """\
import lightning as L
import torch
from torch.func import jacrev
class Lit(L.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        idx = torch.arange(x.shape[0])
        J = jacrev(self.net)(x)
        per_sample = J[idx, :, idx]
        return self.loss(x, y) + per_sample.norm()
trainer = L.Trainer(max_epochs=1)
trainer.fit(Lit(), loader)
"""

JACFWD = """\
import torch
from torch.func import jacfwd
for xb, yb in loader:
    score = torch.diagonal(jacfwd(f)(xb), 0, 0, 2)
    loss = score.sum()
    loss.backward()
    opt.step()
"""

NEGATIVES = """\
import torch
from torch.func import jacrev, vmap
J0 = jacrev(f)(data).diagonal()
z = latent.detach()
for step, x in enumerate(loader):
    loss = model(x).sum()
    whole = jacrev(f)(x).pow(2).sum()
    feature = jacrev(g)(z).diagonal()
    per = vmap(jacrev(f))(x).diagonal(dim1=0, dim2=1)
    pair = torch.diagonal(jacrev(f)(x), 0, 1, 2)
    if step % 10 == 0:
        later = jacrev(f)(x).diagonal()
    loss.backward()
    opt.step()
"""


def _run(ip, body: str) -> Report:
    ip.user_ns.pop("rep", None)
    result = ip.run_cell(f"%%gpucheck -q -o rep\n{body}")
    assert result.success, result.error_in_exec
    return ip.user_ns["rep"]


def test_a_step_loops_batch_jacobian_read_on_its_diagonal_is_named_with_the_per_sample_forms(ip):
    rep = _run(ip, PENALTY)
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == 13 and f.fix_id is None  # line 1 is %%gpucheck
    assert "vmap(torch.func.jacrev(energy_one))(x)" in f.fix
    assert "torch.autograd.grad(energy(x).sum(), x, create_graph=True)[0]" in f.fix
    assert any("line 14" in e and "diagonal" in e for e in f.evidence)
    # What the advice says holds for samples the function treats apart: the diagonal blocks are
    # each sample's own gradient, as the per-sample Jacobian and one backward of the sum give.
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Softplus(), torch.nn.Linear(16, 1))
    x = torch.randn(5, 8, requires_grad=True)
    diag = jacrev(lambda v: net(v).squeeze(-1))(x).diagonal(dim1=0, dim2=1).T
    per = vmap(jacrev(lambda v: net(v).squeeze(-1)))(x)
    (summed,) = torch.autograd.grad(net(x).squeeze(-1).sum(), x, create_graph=True)
    assert torch.allclose(diag, per, atol=1e-6) and torch.allclose(diag, summed, atol=1e-6)


def test_a_helper_the_step_calls_a_lightning_training_step_and_jacfwd_are_found():
    f = only(rules_for(syn.make_run(HELPER), syn.make_analysis()), RULE)
    assert f.line == 5 and "jacobian(f, x, create_graph=True)" in " ".join(f.evidence)
    f = only(rules_for(syn.make_run(LIGHTNING), syn.make_analysis()), RULE)
    assert f.line == 9 and any("J[idx, :, idx]" in e for e in f.evidence)
    f = only(rules_for(syn.make_run(JACFWD), syn.make_analysis()), RULE)
    assert f.line == 5


def test_jacobians_read_whole_off_the_batch_per_sample_before_the_loop_or_gated_are_not():
    assert RULE not in ids(rules_for(syn.make_run(NEGATIVES), syn.make_analysis()))
