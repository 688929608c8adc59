"""A VAE whose loss is built from ``torch.distributions`` each step (unseen round 20).

Class: ``q = Normal(mu, std)``, ``z = q.rsample()``, ``kl_divergence(q, Normal(0, 1))``,
``Bernoulli(logits=...).log_prob(x)``: each distribution's constructor validates its
arguments by default (``validate_args``: ``constraint.check(value).all()`` then a Python
``if``, a host read of a device value on a GPU). KL weight annealed by step.

Seen 2026-12-07 (main e2aeafd): HOST-BOUND (high), too-small ops (right), fused Adam;
nothing on validate_args (by hand 1.13x off, noisy: small on a CPU).
"""

import torch
from torch import nn
from torch.distributions import Bernoulli, Normal, kl_divergence

torch.set_num_threads(1)
torch.manual_seed(0)
data = (torch.rand(64 * 50, 196) > 0.7).float()


class VAE(nn.Module):
    def __init__(self, d=196, h=256, z=16):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, 2 * z))
        self.dec = nn.Sequential(nn.Linear(z, h), nn.ReLU(), nn.Linear(h, d))

    def forward(self, x):
        mu, logstd = self.enc(x).chunk(2, dim=1)
        q = Normal(mu, logstd.exp())
        z = q.rsample()
        px = Bernoulli(logits=self.dec(z))
        prior = Normal(torch.zeros_like(mu), torch.ones_like(mu))
        return px.log_prob(x).sum(1), kl_divergence(q, prior).sum(1)


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
step = 0
for epoch in range(4):
    perm = torch.randperm(len(data))
    for i in range(0, len(data), 64):
        x = data[perm[i : i + 64]]
        rec, kl = model(x)
        beta = min(1.0, step / 100)
        loss = -(rec - beta * kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    print(epoch, loss.item())
