"""The batch's inputs made to require grad every step for a saliency map logged every 100 steps
(unseen round 23): ``x.requires_grad_(True)`` before the forward, ``x.grad.abs().mean(0)`` read
only when ``step % 100 == 0``; a 3072-1024-10 MLP on flattened 32x32x3 images, batch 128, SGD,
300 steps in a ``while`` loop over ``next(it)`` that restarts the iterator at each epoch's end.

Class: autograd asked for a gradient nobody reads on most steps. With the input a leaf that
requires grad, every backward also computes the first layer's input gradient (a [B, 1024] x
[1024, 3072] matmul, as large as its weight gradient) and accumulates it into ``x.grad``. The
fix: ``x.requires_grad_(step % 100 == 0)`` (the saliency steps keep it).
Seen 2026-12-07 on main e9b71ba: UNKNOWN (too busy, 94%); fused SGD [low-medium] only, backward
60% of the sampled step; no finding. By hand 1.36x (CPU clock, medians of 3 pairs). Open.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)

X = torch.randn(128 * 50, 3072)
Y = torch.randint(0, 10, (128 * 50,))
X[:, :10] += F.one_hot(Y, 10) * 2
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)
model = nn.Sequential(nn.Linear(3072, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

saliency = []
it = iter(loader)
step = 0
while step < 300:
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
        saliency.append(x.grad.abs().mean(0).view(3, 32, 32))
        print(step, loss.item())
    step += 1
