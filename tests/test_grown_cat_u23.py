"""A tensor grown by concatenating itself with the step's rows every step is named
(rules/grown_cat_u23.py).

Unseen round 23 (benchmarks/unseen_programs/cat_grow_epoch_preds.py): an epoch's logits and
labels kept by ``all_logits = torch.cat([all_logits, logits.detach()])`` every step for an
epoch-end accuracy; each step copies all the rows kept so far, and no finding named it.
Asserted here: which statements are flagged (an epoch-reset tensor, the ``if x is None`` form,
``np.concatenate``, a LightningModule's ``self.preds`` in ``training_step``, a step function's
global; not a queue trimmed to K rows, not a tensor made anew in the step, not one grown under
``if step % 10 == 0``, not a list concatenated, not a Lightning method that runs once an
epoch), and a real run's finding at the concatenating line with its share read off the sampled
lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report
from gpu_notebook.rules.grown_cat_u23 import grown_cats


def _hits(source: str) -> list[tuple[int, str]]:
    tree = scan_source(source).tree
    assert tree is not None
    return [(tree.line_of(h.node), h.name) for h in grown_cats(tree)]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


LOOP = """
import numpy as np
import torch
from torch import nn

model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
feats = None
queue = torch.zeros(0, 4)
sampled = torch.zeros(0, 4)
arr = np.zeros((0, 4))
for epoch in range(2):
    all_logits = torch.empty(0, 4)
    all_labels = torch.empty(0, dtype=torch.long)
    for step, x in enumerate(torch.randn(10, 8, 16)):
        y = torch.randint(0, 4, (8,))
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        all_logits = torch.cat([all_logits, out.detach()])
        all_labels = torch.cat((all_labels, y), dim=0)
        if feats is None:
            feats = out.detach()
        else:
            feats = torch.cat([feats, out.detach()])
        arr = np.concatenate([arr, out.detach().numpy()])
        queue = torch.cat([queue, out.detach()])[-32:]
        parts = []
        for chunk in x.split(4):
            parts.append(chunk)
        mine = torch.cat(parts)
        local = torch.empty(0, 4)
        local = torch.cat([local, out.detach()])
        if step % 10 == 0:
            sampled = torch.cat([sampled, out.detach()])
    print((all_logits.argmax(1) == all_labels).float().mean())
"""


def test_the_step_loops_self_concatenations_are_flagged_and_nothing_else():
    assert _hits(LOOP) == [
        (_line(LOOP, "        all_logits = torch.cat([all_logits, out.detach()])"), "all_logits"),
        (_line(LOOP, "        all_labels = torch.cat((all_labels, y), dim=0)"), "all_labels"),
        (_line(LOOP, "            feats = torch.cat([feats, out.detach()])"), "feats"),
        (_line(LOOP, "        arr = np.concatenate([arr, out.detach().numpy()])"), "arr"),
    ]
    # `queue` keeps its last 32 rows; `mine` joins a list; `local` is made anew each step;
    # `sampled` grows on one step in ten.


TRIMMED = """
import torch
from torch import nn

model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
bank = torch.zeros(0, 4)
for x in torch.randn(10, 8, 16):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    bank = torch.cat([bank, model(x).detach()])
    if len(bank) > 64:
        bank = bank[-64:]
"""


def test_a_bank_trimmed_in_the_loop_is_not_flagged():
    assert _hits(TRIMMED) == []


LIGHTNING = """
import lightning as L
import torch
from torch import nn


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 4)
        self.preds = torch.empty(0, dtype=torch.long)
        self.epoch_losses = torch.empty(0)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.preds = torch.cat([self.preds, logits.argmax(1)])
        return nn.functional.cross_entropy(logits, y)

    def on_train_epoch_end(self):
        self.epoch_losses = torch.cat([self.epoch_losses, torch.zeros(1)])
        self.preds = torch.empty(0, dtype=torch.long)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def train_step(model, opt, x):
    global seen
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen = torch.cat([seen, x[:, :1]])
    rows = torch.empty(0)
    rows = torch.cat([rows, x[:, 0]])


seen = torch.empty(0, 1)
model = nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in torch.randn(10, 8, 16):
    train_step(model, opt, x)
"""


def test_a_per_step_method_and_a_step_functions_global_are_flagged():
    assert _hits(LIGHTNING) == [
        (
            _line(LIGHTNING, "        self.preds = torch.cat([self.preds, logits.argmax(1)])"),
            "self.preds",
        ),
        (_line(LIGHTNING, "    seen = torch.cat([seen, x[:, :1]])"), "seen"),
    ]
    # `on_train_epoch_end` runs once an epoch; `rows` is the step function's own local.


GROWN = """
import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(256 * 150, 64)
Y = X[:, :50].argmax(1)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 50))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    kept = torch.empty(0, 50)
    for i in range(0, len(X), 256):
        logits = model(X[i : i + 256])
        loss = F.cross_entropy(logits, Y[i : i + 256])
        opt.zero_grad()
        loss.backward()
        opt.step()
        kept = torch.cat([kept, logits.detach()])
    print(epoch, (kept.argmax(1) == Y).float().mean().item())
"""


def test_a_real_run_names_the_grown_tensor_at_its_line(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(GROWN)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--lines", "all", "--json",
           str(out), "-q", str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    hits = [f for f in report.findings if f.rule_id == "host.grown_by_cat"]
    assert [f.line for f in hits] == [
        _line(GROWN, "        kept = torch.cat([kept, logits.detach()])")
    ]
    finding = hits[0]
    assert "`kept`" in finding.title
    assert "parts.append" in finding.fix and finding.proposal is None
    # The copy grows with the steps: no top is read from the window's steps, at least medium.
    assert finding.gain_bound is None and finding.severity in ("medium", "high")
    assert "grows with the steps run" in " ".join(finding.evidence)
