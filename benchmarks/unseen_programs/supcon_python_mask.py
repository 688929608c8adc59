"""Supervised contrastive (SupCon) loss whose positive mask is built by a Python double loop
over the batch (unseen round 23): ``for i in range(n): for j in range(n): if i != j and y[i] ==
y[j]: mask[i, j] = 1.0`` in ``supcon_loss``, called from a ``train_step`` function; a
3072-512-128 encoder, batch 64, 10 classes, SGD, 150 steps.

Class: a tensor built element by element from the batch's labels in the step: n^2 (4096)
tensor indexings, comparisons and truth reads a step, the written element a tensor write
each. The fix: ``mask = (y[:, None] == y[None, :]).float().fill_diagonal_(0)`` (same mask).
Seen 2026-12-07 on main e9b71ba: UNKNOWN (too busy, 93%), the `if` line 67% of the sampled step,
no finding. By hand the batched mask 1.84x of the whole script (CPU clock, medians of 3 pairs),
4.34x of the steps alone. Fixed in rules/element_loop_u23: host.element_loop [high] 1.95x-3.48x.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


def supcon_loss(z, y, temperature=0.1):
    n = len(y)
    mask = torch.zeros(n, n)
    for i in range(n):
        for j in range(n):
            if i != j and y[i] == y[j]:
                mask[i, j] = 1.0
    sim = z @ z.T / temperature
    self_mask = torch.eye(n, dtype=torch.bool)
    sim = sim.masked_fill(self_mask, -1e9)
    log_prob = sim - sim.logsumexp(1, keepdim=True)
    pos = mask.sum(1).clamp(min=1)
    return -((mask * log_prob).sum(1) / pos).mean()


def train_step(model, opt, x, y):
    z = F.normalize(model(x), dim=1)
    loss = supcon_loss(z, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


X = torch.randn(64 * 50, 3072)
Y = torch.randint(0, 10, (64 * 50,))
X[:, :10] += F.one_hot(Y, 10) * 3
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True, drop_last=True)
model = nn.Sequential(nn.Linear(3072, 512), nn.ReLU(), nn.Linear(512, 128))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(3):
    for x, y in loader:
        loss = train_step(model, opt, x, y)
    print(epoch, float(loss))
