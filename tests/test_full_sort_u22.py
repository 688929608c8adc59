"""A whole sort of which the step keeps k entries (rules/full_sort_u22.py): named at its line,
rewritten as ``topk``.

Seen (unseen round 22, generator_argsort_hardneg): ``sim.argsort(dim=1, descending=True)[:, :K]``
over 8192 bank rows held 93% of the sampled step; on main no finding named it (a hot line
only). By hand ``sim.topk(K, dim=1).indices`` was 4.0x of the loop. The shapes: a generator-
driven loop (a real run), a helper the step calls, a Lightning ``training_step``; the negatives:
a slice off the sorted dimension, a window not at the start, a whole sort used whole, a sort
before the loop, one gated to every 100th step.
"""

from __future__ import annotations

import torch

from gpu_notebook.records import Report
from gpu_notebook.rules.full_sort_u22 import FIX
from gpu_notebook.words.proposals import attach_fixes
from tests.scenarios import synthetic as syn
from tests.test_rules import ids, only, rules_for

RULE = "host.full_sort_topk"

GENERATOR = """\
import torch
import torch.nn.functional as F
torch.manual_seed(0)
net = torch.nn.Linear(32, 16)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
bank = F.normalize(torch.randn(4096, 16), dim=1)
def pairs():
    while True:
        yield torch.randn(64, 32), F.normalize(torch.randn(64, 16), dim=1)
for step, (x, pos) in zip(range(40), pairs()):
    anchor = F.normalize(net(x), dim=1)
    with torch.no_grad():
        sim = anchor @ bank.T
        hard = sim.argsort(dim=1, descending=True)[:, :8]
    loss = F.relu((anchor - pos).pow(2).sum(1, keepdim=True)
                  - (anchor.unsqueeze(1) - bank[hard]).pow(2).sum(2) + 0.5).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

HELPER = """\
import torch
bank = torch.randn(100, 8)
def mine(a, k):
    return torch.sort(a @ bank.T, dim=1, descending=True)[1][:, :k]
for step, x in enumerate(xs):
    hard = mine(model(x), 4)
    loss = model(x).sum()
    loss.backward()
    opt.step()
"""

LIGHTNING = """\
import lightning as L
import torch
class Miner(L.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        sim = self(x) @ self.bank.T
        hard = sim.argsort(dim=-1, descending=True)[:, :8]
        return self.loss(x, hard)
trainer = L.Trainer(max_epochs=1)
trainer.fit(Miner(), loader)
"""

LAST_K = """\
import torch
for step, x in enumerate(xs):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    worst = per_sample.argsort()[..., -16:]
"""

NEGATIVES = """\
import torch
order = scores.argsort()[:10]
for step, x in enumerate(xs):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    a = s.argsort(dim=0)[:, :4]
    b = s.sort(dim=1).values
    c = s.argsort(dim=1)[:, 2:7]
    if step % 100 == 0:
        d = s.argsort(dim=1)[:, :3]
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


def test_a_generator_loop_sorting_bank_rows_is_named_and_rewritten_as_topk(ip):
    rep = _run(ip, GENERATOR)
    (f,) = [f for f in rep.findings if f.rule_id == RULE]
    assert f.line == 15 and f.fix_id == FIX.fix_id  # line 1 is %%gpucheck
    after = _after(f, GENERATOR)
    assert "hard = sim.topk(8, dim=1).indices" in after and "argsort" not in after
    # The same hard negatives (random scores: no ties).
    sim = torch.randn(64, 4096)
    assert torch.equal(sim.argsort(dim=1, descending=True)[:, :8], sim.topk(8, dim=1).indices)


def test_a_helper_the_step_calls_and_a_lightning_training_step_are_the_steps():
    f = only(rules_for(syn.make_run(HELPER), syn.make_analysis()), RULE)
    assert f.line == 5
    after = _after(f, HELPER)
    assert "return torch.topk(a @ bank.T, k, dim=1).indices" in after
    f = only(rules_for(syn.make_run(LIGHTNING), syn.make_analysis()), RULE)
    assert f.line == 8
    assert "hard = sim.topk(8, dim=-1).indices" in _after(f, LIGHTNING)


def test_the_last_k_of_an_ascending_sort_is_named_without_a_patch():
    f = only(rules_for(syn.make_run(LAST_K), syn.make_analysis()), RULE)
    assert f.line == 7 and f.fix_id is None


def test_slices_off_the_sorted_dimension_whole_sorts_and_gated_or_one_off_sorts_are_not():
    assert RULE not in ids(rules_for(syn.make_run(NEGATIVES), syn.make_analysis()))
