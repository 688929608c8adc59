"""A tensor made to require grad every step whose gradient is read on few steps is named
(cell/input_grad_unread.py, rules/input_grad_unread.py).

Unseen round 23 (benchmarks/unseen_programs/input_grad_saliency.py, 1.36x by hand): the batch
made to require grad before every forward, its ``.grad`` read only under ``if step % 100 ==
0``: no finding. Asserted on the cell's tree: the switches taken (a ``while`` over ``next(it)``
with the read gated, a ``for`` over a loader with ``x.requires_grad = True`` and no read, a step
function's ``x.detach().requires_grad_()`` with a gated ``torch.autograd.grad``, a
``torch.tensor(..., requires_grad=True)`` in the step, a LightningModule's ``training_step``
with a gated ``autograd.grad``, each with its gate), and the ones left
(adversarial training's ``x.grad.sign()`` every step, a gradient penalty's ungated
``autograd.grad(..., create_graph=True)``, a latent an optimizer is given, a switch already
conditional or itself gated, a helper that reads ``.grad`` called every step, a loop reading the
step function's input gradient every step, a ``training_step`` that stores the batch on
``self`` for a hook to read, a reentrant ``checkpoint`` that needs its input to require grad);
and the rule's finding and words on a real run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_notebook.cell.input_grad_unread import unread_input_grads
from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report


def _hits(source: str) -> list[tuple[int, str, list[int], str | None]]:
    tree = scan_source(source).tree
    assert tree is not None
    return [
        (
            tree.line_of(h.switch),
            h.name,
            [tree.line_of(r) for r in h.reads],
            ast.unparse(h.gate) if h.gate is not None else None,
        )
        for h in unread_input_grads(tree)
    ]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


HEAD = """
import torch
import torch.nn.functional as F
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(6)]
"""

WHILE_NEXT = (
    HEAD
    + """
it = iter(loader)
step = 0
saliency = []
while step < 20:
    try:
        x, y = next(it)
    except StopIteration:
        it = iter(loader)
        continue
    x.requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        saliency.append(x.grad.abs().mean(0))
    step += 1
"""
)

FOR_NEVER = (
    HEAD
    + """
for epoch in range(2):
    for x, y in loader:
        x.requires_grad = True
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
)

STEP_FUNCTION = (
    HEAD
    + """
LOG_EVERY = 50


def train_step(step, x, y):
    x = x.detach().requires_grad_()
    loss = F.cross_entropy(model(x), y)
    if step % LOG_EVERY == 0:
        (g,) = torch.autograd.grad(loss, x, retain_graph=True)
        print(g.norm().item())
    opt.zero_grad()
    loss.backward()
    opt.step()


for step, (x, y) in enumerate(loader):
    train_step(step, x, y)
"""
)

FACTORY = (
    HEAD
    + """
for i, (x, y) in enumerate(loader):
    inp = torch.tensor(x.numpy(), requires_grad=True)
    loss = F.cross_entropy(model(inp), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i % 10 == 0 and i > 0:
        print(inp.grad.norm())
"""
)


LIGHTNING = """
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        x.requires_grad_(True)
        loss = F.cross_entropy(self.net(x), y)
        if batch_idx % 50 == 0:
            (g,) = torch.autograd.grad(loss, x, retain_graph=True)
            self.log("saliency", g.abs().mean())
        self.last = x.detach()
        return loss + 0 * self.net(x).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
"""


@pytest.mark.parametrize(
    ("source", "switch", "name", "reads", "gate"),
    [
        (
            WHILE_NEXT,
            "    x.requires_grad_(True)",
            "x",
            ["        saliency.append(x.grad.abs().mean(0))"],
            "step % 100 == 0",
        ),
        (FOR_NEVER, "        x.requires_grad = True", "x", [], None),
        (
            STEP_FUNCTION,
            "    x = x.detach().requires_grad_()",
            "x",
            ["        (g,) = torch.autograd.grad(loss, x, retain_graph=True)"],
            "step % LOG_EVERY == 0",
        ),
        (
            FACTORY,
            "    inp = torch.tensor(x.numpy(), requires_grad=True)",
            "inp",
            ["        print(inp.grad.norm())"],
            "i % 10 == 0 and i > 0",
        ),
        (
            LIGHTNING,
            "        x.requires_grad_(True)",
            "x",
            ["            (g,) = torch.autograd.grad(loss, x, retain_graph=True)"],
            "batch_idx % 50 == 0",
        ),
    ],
    ids=[
        "while-next-gated",
        "for-never-read",
        "step-function-autograd",
        "factory-in-step",
        "lightning-training-step",
    ],
)
def test_a_per_step_switch_whose_reads_are_gated_is_taken(source, switch, name, reads, gate):
    lines = [_line(source, r) for r in reads]
    assert _hits(source) == [(_line(source, switch), name, lines, gate)]


FGSM = (
    HEAD
    + """
for x, y in loader:
    x.requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    x_adv = (x + 0.03 * x.grad.sign()).detach()
    opt.zero_grad()
    F.cross_entropy(model(x_adv), y).backward()
    opt.step()
"""
)

PENALTY = (
    HEAD
    + """
for x, y in loader:
    x = x.clone().requires_grad_(True)
    out = model(x)
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    loss = F.cross_entropy(out, y) + g.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)

LATENT = (
    HEAD
    + """
for x, y in loader:
    z = torch.zeros(4, 8, requires_grad=True)
    inner = torch.optim.Adam([z], lr=0.1)
    for _ in range(3):
        inner.zero_grad()
        F.cross_entropy(model(x + z), y).backward()
        inner.step()
"""
)

CONDITIONAL = (
    HEAD
    + """
for step, (x, y) in enumerate(loader):
    x.requires_grad_(step % 100 == 0)
    if step % 7 == 0:
        x.requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(x.grad.abs().mean())
"""
)

HELPER = (
    HEAD
    + """
def attack(x, eps):
    return (x + eps * x.grad.sign()).detach()


for x, y in loader:
    x.requires_grad_()
    F.cross_entropy(model(x), y).backward()
    x_adv = attack(x, 0.03)
    opt.zero_grad()
    F.cross_entropy(model(x_adv), y).backward()
    opt.step()
"""
)

CALLER_READS = (
    HEAD
    + """
def train_step(x, y):
    x.requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


maps = []
for x, y in loader:
    train_step(x, y)
    maps.append(x.grad.abs())
"""
)


CHECKPOINTED = (
    HEAD
    + """
from torch.utils.checkpoint import checkpoint

for step, (x, y) in enumerate(loader):
    x.requires_grad_(True)
    loss = F.cross_entropy(checkpoint(model, x, use_reentrant=True), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)

STORED = """
import lightning as L
import torch.nn.functional as F
from torch import nn


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        x.requires_grad_(True)
        self.last = (x, y)
        return F.cross_entropy(self.net(x), y)

    def on_after_backward(self):
        self.log("saliency", self.last[0].grad.abs().mean())
"""


@pytest.mark.parametrize(
    "source",
    [FGSM, PENALTY, LATENT, CONDITIONAL, HELPER, CALLER_READS, CHECKPOINTED, STORED],
    ids=[
        "fgsm",
        "gradient-penalty",
        "optimized-latent",
        "conditional",
        "helper",
        "caller",
        "reentrant-checkpoint",
        "lightning-stored-on-self",
    ],
)
def test_an_input_gradient_used_every_step_or_optimized_is_left(source):
    assert _hits(source) == []


SALIENCY = """
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = torch.randn(30, 64, 1024)
ys = torch.randint(0, 10, (30, 64))
for step in range(30):
    x, y = xs[step], ys[step]
    x.requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(step, x.grad.abs().mean().item())
"""


def test_a_real_run_names_the_switch_with_the_gate_as_advice(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(SALIENCY)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    hits = [f for f in report.findings if f.rule_id == "autograd.input_grad_unread"]
    assert [f.line for f in hits] == [_line(SALIENCY, "    x.requires_grad_(True)")]
    finding = hits[0]
    assert "x.requires_grad_(step % 10 == 0)" in finding.fix
    # Bounded by the backward's share where the step clock timed it, else said without a bound.
    assert (finding.severity, finding.gain_bound is not None) in {("low", True), ("info", False)}
