"""A loss summed over slices of a tensor dimension, one call per slice, is named
(rules/sliced_loss_loop.py).

Unseen round 23: seq_loss_per_timestep (``sum(F.cross_entropy(logits[:, t], y[:, t]) for t in
range(T)) / T``: the backward 81% of the sampled step, no finding; one call 2.44x by hand).
Asserted here, on the cell's facts: which loops are flagged (a generator in ``sum``, a ``for``
with ``+=`` over an ``nn.CrossEntropyLoss`` instance in a function the step calls, a ``zip`` of
two ``unbind``s, an ``enumerate`` of one, a list of slices' losses stacked, a LightningModule's
``training_step``, a model's ``forward`` the step calls, a per-label binary loss in an HF
Trainer's ``compute_loss``); not a recurrent cell stepped over t, not a Python list of heads'
losses, not one target for all heads, not micro-batches with a backward each, not a loop gated
by ``if step % 50``. The severity read off the trace's fills where it has T a step, else at most
medium off the backward. And a real run's finding at the loss's line, the trace's fills in it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpu_notebook.cell.scan import scan_source
from gpu_notebook.records import Report
from gpu_notebook.rules.sliced_loss_loop import sliced_loss_loops


def _hits(source: str) -> list[tuple[int, str, str]]:
    tree = scan_source(source).tree
    assert tree is not None
    return [(tree.line_of(node), tensor, var) for node, _, tensor, var in sliced_loss_loops(tree)]


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


SHAPES = """
import torch
import torch.nn.functional as F
from torch import nn

model = nn.Linear(8, 5)
rnn = nn.GRUCell(8, 8)
heads = nn.ModuleList(nn.Linear(8, 5) for _ in range(3))
crit = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
T = 16


def seq_loss(out, tgt):
    total = 0.0
    for t in range(out.shape[1]):
        total += crit(out[:, t], tgt[:, t])
    return total / out.shape[1]


for step in range(20):
    x, y = torch.randn(4, T, 8), torch.randint(0, 5, (4, T))
    logits = model(x)
    loss = sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T)) / T
    loss = loss + seq_loss(logits, y)
    for o, y_t in zip(logits.unbind(1), y.unbind(1)):
        loss = loss + F.nll_loss(o.log_softmax(-1), y_t)
    for t, o in enumerate(logits.unbind(0)):
        loss += crit(o, y[t])
    loss = loss + torch.stack([crit(logits[t], y[t]) for t in range(4)]).mean()
    for t in range(T):
        pred = logits[:, t].float()
        step_t = crit(pred, y[:, t])
        loss = loss + step_t
    h = torch.zeros(4, 8)
    for t in range(T):
        h = rnn(x[:, t], h)
        loss = loss + crit(model(h)[:, :5], y[:, t])
    outs = [head(h) for head in heads]
    loss = loss + sum(crit(o, y[:, 0]) for o in outs)
    for i in range(len(outs)):
        loss += crit(outs[i], y[:, 0])
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        extra = sum(crit(logits[:, t], y[:, t]) for t in range(T))
"""


def test_losses_summed_over_slices_are_flagged_and_nothing_else():
    assert _hits(SHAPES) == [
        (_line(SHAPES, "    for t in range(out.shape[1]):"), "out", "t"),
        (_line(SHAPES, "    loss = sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T)) / T"),
         "logits", "t"),
        (_line(SHAPES, "    for o, y_t in zip(logits.unbind(1), y.unbind(1)):"), "o", "o"),
        (_line(SHAPES, "    for t, o in enumerate(logits.unbind(0)):"), "o", "t"),
        (_line(SHAPES, "    loss = loss + torch.stack([crit(logits[t], y[t]) for t in range(4)]).mean()"),
         "logits", "t"),
        (_line(SHAPES, "    for t in range(T):") , "pred", "t"),
    ]  # fmt: skip
    # Not: the GRU's loop (h carried; the prediction is no slice), the heads' list (one
    # target for all), the loop over `outs` by index (the same), the one under `if step % 50`.


ACCUMULATED = """
import torch
from torch import nn

model = nn.Linear(8, 5)
crit = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    x, y = torch.randn(4, 16, 8), torch.randint(0, 5, (4, 16))
    out = model(x)
    for i in range(4):
        part = crit(out[i], y[i]) / 4
        part.backward(retain_graph=True)
    for i in range(4):
        micro = crit(model(x[i]), y[i])
        micro.backward()
    opt.step()
    opt.zero_grad()
"""


def test_micro_batches_with_a_backward_each_are_not_flagged():
    assert _hits(ACCUMULATED) == []


LIGHTNING = """
import lightning as L
import torch
from torch import nn


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 4)
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        return sum(self.loss_fn(o, t) for o, t in zip(logits.unbind(1), y.unbind(1)))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
"""


def test_a_sum_over_unbinds_in_training_step_is_flagged():
    line = _line(
        LIGHTNING,
        "        return sum(self.loss_fn(o, t) for o, t in zip(logits.unbind(1), y.unbind(1)))",
    )
    assert _hits(LIGHTNING) == [(line, "o", "o")]


MORE = """
import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer


class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 5)
        self.crit = nn.CrossEntropyLoss()

    def forward(self, x, y):
        out = self.net(x)
        return sum(self.crit(out[:, t], y[:, t]) for t in range(x.shape[1])) / x.shape[1]


class MyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        logits = model(inputs["x"])
        y = inputs["labels"]
        loss = 0.0
        for k in range(y.shape[1]):
            loss = loss + F.binary_cross_entropy_with_logits(logits[:, k], y[:, k])
        return loss


model = Seq()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    x, y = torch.randn(4, 16, 8), torch.randint(0, 5, (4, 16))
    loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_models_forward_and_a_trainers_compute_loss_are_flagged():
    # A loss the model's forward sums over time steps (the step calls the model), and a
    # per-label binary loss over a label dimension in an HF Trainer's compute_loss.
    assert _hits(MORE) == [
        (_line(MORE, "        return sum(self.crit(out[:, t], y[:, t]) for t in range(x.shape[1])) / x.shape[1]"),
         "out", "t"),
        (_line(MORE, "        for k in range(y.shape[1]):"), "logits", "k"),
    ]  # fmt: skip


PROGRAM = """
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
V, T, B = 64, 64, 16
model = nn.Sequential(nn.Embedding(V, 32), nn.Linear(32, V))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(12):
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    logits = model(x)
    loss = sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T)) / T
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
LOSS_LINE = "    loss = sum(F.cross_entropy(logits[:, t], y[:, t]) for t in range(T)) / T"


def _finding(analysis):
    from gpu_notebook.rules.sliced_loss_loop import sliced_loss_loop
    from gpu_notebook.words import word_findings
    from tests.scenarios import synthetic as syn

    finding = sliced_loss_loop(syn.make_run(PROGRAM), analysis, scan_source(PROGRAM))
    assert finding is not None
    return word_findings([finding])[0]


def test_the_trace_fills_set_the_severity_and_the_backward_alone_at_most_medium():
    from gpu_notebook.records import OpStat
    from tests.scenarios import synthetic as syn

    # 8 traced steps of 10 ms, the backward 80%; 96 fills a step holding 60%, adds 10%. The
    # bound is the backward's (the loss's line not sampled): the same with or without fills.
    ops = (
        OpStat("aten::fill_", 8 * 96, 48_000.0, 48_000.0),
        OpStat("aten::add_", 800, 8_000.0, 8_000.0),
    )
    traced = _finding(syn.make_analysis({"backward": 0.8}, ops=ops))
    assert traced.rule_id == "backward.sliced_loss" and traced.line == _line(PROGRAM, LOSS_LINE)
    assert traced.severity == "high" and traced.phase_share == 0.8
    assert "96 zero fills a step" in " ".join(traced.evidence)
    assert "reshape(-1, V)" in traced.fix and traced.proposal is None
    # On a GPU the fill kernels count, every type and width summed: 96 a step holding 60%.
    kernel = "void at::native::vectorized_elementwise_kernel<{}, at::native::FillFunctor<float>>"
    gpu = (OpStat(kernel.format(4), 8 * 60, 48_000.0, 48_000.0, "gpu"),
           OpStat(kernel.format(2), 8 * 36, 0.0, 0.0, "gpu"))  # fmt: skip
    on_gpu = _finding(syn.make_analysis({"backward": 0.8}, ops=gpu))
    assert on_gpu.severity == "high" and "96 zero fills a step" in " ".join(on_gpu.evidence)
    # Without the fills (a few a step: a zero_grad's, not the slices'), the backward bounds it.
    few = (OpStat("aten::fill_", 8 * 3, 48_000.0, 48_000.0),)
    alone = _finding(syn.make_analysis({"backward": 0.8}, ops=few))
    assert alone.severity == "medium" and alone.phase_share == 0.8
    assert "zero fills" not in " ".join(alone.evidence)
    assert alone.gain_bound is not None and alone.gain_bound == traced.gain_bound


def test_a_real_run_names_the_loss_line_and_reads_the_fills(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "gpu_notebook", "run", "-s", "4", "--json", str(out), "-q",
           str(script)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    report = Report.from_json(out.read_text())
    hits = [f for f in report.findings if f.rule_id == "backward.sliced_loss"]
    assert [f.line for f in hits] == [_line(PROGRAM, LOSS_LINE)]
    # The trace holds the slices' fills: T (64) a step at least.
    fills = [o for o in report.analysis.top_ops if o.name == "aten::fill_"]
    assert fills and fills[0].calls >= 64 * 4
    assert "zero fills a step" in " ".join(hits[0].evidence)
    assert hits[0].gain_bound is not None and hits[0].gain_bound > 1
