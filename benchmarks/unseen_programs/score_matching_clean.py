"""Denoising score matching on a tensor-resident data set, nothing planted (unseen round 21's
control).

Class: a clean, compute-bound loop: data already a tensor, batches by slicing a per-epoch
``randperm``, noise levels and noise drawn as whole-batch tensors, a 3-layer 1024-wide MLP
conditioned on log-sigma, batch 512, Adam, the loss read once per epoch. Whatever the product
names should be the compute itself (bigger batch or not, precision on a GPU), no data, sync,
or Python finding.
"""

import math

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
D, B = 64, 512
data = torch.randn(B * 40, D) @ torch.randn(D, D) * 0.3
net = nn.Sequential(
    nn.Linear(D + 1, 1024), nn.SiLU(), nn.Linear(1024, 1024), nn.SiLU(), nn.Linear(1024, D)
)
opt = torch.optim.Adam(net.parameters(), lr=2e-4)
log_lo, log_hi = math.log(0.01), math.log(1.0)
for epoch in range(2):
    perm = torch.randperm(len(data))
    for idx in perm.split(B):
        x = data[idx]
        sigma = torch.exp(torch.rand(len(x), 1) * (log_hi - log_lo) + log_lo)
        noise = torch.randn_like(x)
        pred = net(torch.cat([x + sigma * noise, sigma.log()], dim=1))
        loss = ((pred * sigma + noise) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(epoch, loss.item())
