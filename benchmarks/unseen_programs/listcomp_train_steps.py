"""The step loop is a top-level list comprehension (unseen round 18): ``losses = [train_step(x, y)
for x, y in loader]`` once per epoch, written as three statements, no ``for`` statement at all.

Class: a step loop that is an expression (a comprehension over the loader calling a step
function), not a ``for``/``while``. Written before the first run: 3 epochs x 64 steps of batch 16
(192 steps, read at ``train_step``), a small MLP: host-bound on the per-step framework overhead,
batch x4 offered; the per-step ``loss.item()`` named (info on a CPU).

Seen 2026-12-06 (main c63e0fa, load 2.8): HOST-BOUND (high), 192 steps at the optimizer
(right: the comprehension's calls of ``train_step`` are read as the steps), median 5.4 ms;
batch x2 1.31x-1.75x, fused Adam 1.17x-1.46x, whole-batch indexing up to 1.13x (right; by
hand, the loop's CPU clock, 5 rounds interleaved, load 5.6-6: batch x2 1.74x, fused 1.42x,
whole-batch 1.06x, each in its range). My premise's batch x4 was the product's x2 (its range
held). The per-step ``.item()`` measured (1 read a step) but not named: the cell reader finds no
step loop in a comprehension (``SourceFacts.syncs`` empty), where the same script with ``for``
loops gets "[info] The loop reads device values on the host every step" at line 37. Open.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(1024, 64)
Y = (X[:, :8].sum(1) > 0).long()
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True)
model = nn.Sequential(
    nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def train_step(x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


losses = [train_step(x, y) for x, y in loader]
losses += [train_step(x, y) for x, y in loader]
losses += [train_step(x, y) for x, y in loader]
print(f"{len(losses)} steps, last {sum(losses[-64:]) / 64:.3f}")
