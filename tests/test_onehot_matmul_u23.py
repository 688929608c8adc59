"""An embedding lookup written as a one-hot matrix times a table is named
(rules/onehot_matmul_u23.py).

Unseen round 23 (benchmarks/unseen_programs/accel_onehot_embed.py): ``F.one_hot(ids,
V).float() @ self.table`` in a model's forward under accelerate, V 5000: the product and its
backward held the step and no finding named them. Asserted here: which products are flagged (a
one-hot bound to a name then multiplied, the direct ``torch.matmul(F.one_hot(...).float(),
W)``, a one-hot fed to the model's own Linear in a LightningModule's ``training_step``; not a
one-hot target multiplied elementwise into a loss, not one made once before the loop, not one
under ``if step % 100 == 0``), and a real run's finding at the product's line with a range.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report
from gpu_notebook.rules.onehot_matmul_u23 import onehot_products


def _hits(source: str) -> list[tuple[int, int]]:
    tree = scan_source(source).tree
    assert tree is not None
    return [(tree.line_of(node), made) for node, made in onehot_products(tree)]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


SHAPES = """
import torch
import torch.nn.functional as F
from torch import nn

V = 100


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(V, 8))
        self.head = nn.Linear(8, 4)

    def forward(self, ids):
        onehot = F.one_hot(ids, V).float()
        h = (onehot @ self.table).mean(1)
        return self.head(h)


model = Bag()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
W = torch.randn(V, 4, requires_grad=True)
prior = F.one_hot(torch.arange(4), 4).float() @ torch.randn(4, 4)
for step, ids in enumerate(torch.randint(0, V, (10, 8, 5))):
    y = torch.randint(0, 4, (8,))
    extra = torch.matmul(F.one_hot(ids[:, 0], V).float(), W)
    logp = F.log_softmax(model(ids) + extra, 1)
    loss = -(F.one_hot(y, 4) * logp).sum(1).mean()
    if step % 100 == 0:
        probe = F.one_hot(ids, V).float() @ model.table
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_products_of_a_one_hot_in_the_step_are_flagged_and_nothing_else():
    assert _hits(SHAPES) == [
        (
            _line(SHAPES, "        h = (onehot @ self.table).mean(1)"),
            _line(SHAPES, "        onehot = F.one_hot(ids, V).float()"),
        ),
        (
            _line(SHAPES, "    extra = torch.matmul(F.one_hot(ids[:, 0], V).float(), W)"),
            _line(SHAPES, "    extra = torch.matmul(F.one_hot(ids[:, 0], V).float(), W)"),
        ),
    ]
    # `prior` is made once before the loop; the loss's one-hot target is multiplied
    # elementwise; `probe` runs on one step in a hundred.


LIGHTNING = """
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(1000, 32, bias=False)
        self.head = nn.Linear(32, 2)

    def training_step(self, batch, batch_idx):
        ids, y = batch
        h = self.proj(F.one_hot(ids, 1000).to(torch.float32)).mean(1)
        return F.cross_entropy(self.head(h), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
"""


def test_a_one_hot_fed_to_a_submodule_in_training_step_is_flagged():
    line = _line(LIGHTNING, "        h = self.proj(F.one_hot(ids, 1000).to(torch.float32)).mean(1)")
    assert _hits(LIGHTNING) == [(line, line)]


ONEHOT = """
import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
V = 4000


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(V, 64) * 0.02)
        self.head = nn.Linear(64, 4)

    def forward(self, ids):
        onehot = F.one_hot(ids, V).float()
        return self.head((onehot @ self.table).mean(1))


model = Bag()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
ids = torch.randint(0, V, (40, 32, 24))
ys = torch.randint(0, 4, (40, 32))
for epoch in range(2):
    for x, y in zip(ids, ys):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_real_run_names_the_one_hot_product_at_its_line(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(ONEHOT)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--lines", "all", "--json",
           str(out), "-q", str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    hits = [f for f in report.findings if f.rule_id == "host.onehot_product"]
    assert [f.line for f in hits] == [
        _line(ONEHOT, "        return self.head((onehot @ self.table).mean(1))")
    ]
    finding = hits[0]
    assert "F.embedding(ids, table)" in finding.fix and finding.proposal is None
    assert finding.phase_share is not None and finding.phase_share > 0
    assert finding.gain_bound is not None and finding.gain_bound > 1
