"""The step loop is a top-level list comprehension (unseen round 18): ``losses = [train_step(x, y)
for x, y in loader]`` once per epoch, written as three statements, no ``for`` statement at all.

Class: a step loop that is an expression (a comprehension over the loader calling a step
function), not a ``for``/``while``. Written before the first run: 3 epochs x 64 steps of batch 16
(192 steps, read at ``train_step``), a small MLP: host-bound on the per-step framework overhead,
batch x4 offered; the per-step ``loss.item()`` named (info on a CPU).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(1024, 64)
Y = (X[:, :8].sum(1) > 0).long()
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))
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
