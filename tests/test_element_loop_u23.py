"""A Python loop over a batch's elements, a tensor operation each, in code the step runs is named
(rules/element_loop_u23.py).

Unseen round 23: supcon_python_mask (a SupCon loss whose positive mask is built by
``for i in range(n): for j in range(n): if y[i] == y[j]: mask[i, j] = 1.0`` in a function the
step function calls: its line held 67% of the sampled step, no finding) and
lightning_metric_pyloop (``for i in range(len(y)): correct += int(preds[i] == y[i])`` in
``training_step``). Asserted here: which loops are flagged (the pair mask in a loss a step
function calls, a per-sample count in a LightningModule's ``training_step``, a per-element
``.item()`` in the step loop; not an RNN's loop over time steps feeding ``x[t]`` to a cell, not a
loop over a Python list, not one under ``if step % 50 == 0``, not one before the training), and
a real run's finding at the loop's line with its share read off the sampled lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report
from gpu_notebook.rules.element_loop_u23 import element_loops


def _hits(source: str) -> list[tuple[int, tuple[str, ...]]]:
    tree = scan_source(source).tree
    assert tree is not None
    return [(tree.line_of(loop), names) for loop, names in element_loops(tree)]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


SHAPES = """
import torch
from torch import nn

cell = nn.GRUCell(8, 8)
head = nn.Linear(8, 3)
opt = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
names = ["a", "b", "c"]
y0 = torch.randint(0, 3, (16,))
first = 0
for i in range(len(y0)):
    first += int(y0[i] == 0)


def pair_mask(y):
    n = len(y)
    mask = torch.zeros(n, n)
    for i in range(n):
        for j in range(n):
            if i != j and y[i] == y[j]:
                mask[i, j] = 1.0
    return mask


def step(x, y):
    h = torch.zeros(16, 8)
    for t in range(x.shape[0]):
        h = cell(x[t], h)
    logits = head(h)
    loss = nn.functional.cross_entropy(logits, y) + pair_mask(y).mean() * 0
    opt.zero_grad()
    loss.backward()
    opt.step()
    return logits


for step_i in range(20):
    x, y = torch.randn(5, 16, 8), torch.randint(0, 3, (16,))
    logits = step(x, y)
    weights = []
    for k in range(len(names)):
        if names[k] == "a":
            weights.append(1.0)
    for k in range(len(y)):
        weights.append(logits[k, y[k]].item())
    if step_i % 50 == 0:
        for k in range(len(y)):
            print(int(y[k]))
"""


def test_the_steps_element_loops_are_flagged_and_nothing_else():
    assert _hits(SHAPES) == [
        (_line(SHAPES, "    for i in range(n):"), ("mask", "y")),
        (_line(SHAPES, "    for k in range(len(y)):"), ("logits", "y")),
    ]
    # `for t` feeds x[t] to a cell (no element read); `names` is a Python list; the print loop
    # runs one step in fifty; `first` is counted once before the training.


LIGHTNING = """
import lightning as L
import torch
from torch import nn


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 4)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        preds = logits.argmax(1)
        correct = 0
        for i in range(len(y)):
            correct += int(preds[i] == y[i])
        self.log("acc", correct / len(y))
        return nn.functional.cross_entropy(logits, y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
"""


def test_a_per_sample_count_in_training_step_is_flagged():
    assert _hits(LIGHTNING) == [
        (_line(LIGHTNING, "        for i in range(len(y)):"), ("preds", "y"))
    ]


SUPCON = """
import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)


def supcon(z, y):
    n = len(y)
    mask = torch.zeros(n, n)
    for i in range(n):
        for j in range(n):
            if i != j and y[i] == y[j]:
                mask[i, j] = 1.0
    logp = (z @ z.T / 0.1).log_softmax(1)
    return -((mask * logp).sum(1) / mask.sum(1).clamp(min=1)).mean()


model = nn.Linear(32, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in zip(torch.randn(60, 32, 32), torch.randint(0, 4, (60, 32))):
        loss = supcon(F.normalize(model(x), dim=1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_real_run_names_the_element_loop_at_its_line(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(SUPCON)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--lines", "all", "--json",
           str(out), "-q", str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    hits = [f for f in report.findings if f.rule_id == "host.element_loop"]
    assert [f.line for f in hits] == [_line(SUPCON, "    for i in range(n):")]
    finding = hits[0]
    assert "`y`" in finding.title or "`y`" in " ".join(finding.evidence)
    assert "(y[:, None] == y[None, :])" in finding.fix and finding.proposal is None
    assert finding.phase_share is not None and finding.phase_share > 0
    assert finding.gain_bound is not None and finding.gain_bound > 1
