"""A mixture-of-experts layer routed by a Python loop over experts (unseen round 19).

Class: top-1 routing written as ``for e, expert in enumerate(self.experts): idx = (route ==
e).nonzero(as_tuple=True)[0]; out[idx] = expert(h[idx])`` in the forward: per expert a compare,
a nonzero (a device-to-host size read on a GPU), a gather, two small Linears and a scatter, 16
experts, two MoE layers. Written before the first run: host-bound on launches (many tiny ops a
step); a batched form (stack the experts' weights, ``torch.bmm`` over a padded capacity, or
``torch.gather``) or fewer experts per layer would cut it. On a GPU the ``nonzero`` is a sync a
step per expert. The product should say host-bound and point at the routing loop.

Seen 2026-12-07 (main dfe5334, load 12): HOST-BOUND (high), 160 steps (right), 2176 host
operators a step, "bigger batch, or torch.compile", fused AdamW uncertain (0.67x-1.68x); hot
lines the backward 40%, opt.step 38%, the forward 22%: the routing loop inside the forward
not named by line. By hand (the loop's process CPU, medians of 3, load 12-17): batch
128 3.18 s, batch 256 over the same samples 2.02 s (1.6x: the bigger batch right), routing by
one argsort + split instead of 16 nonzero 2.41 s (1.3x: the routing's own cost, unnamed). On a
GPU each expert's ``nonzero`` is a sync a step (not checked: no GPU).
"""

import torch
from torch import nn


class MoE(nn.Module):
    def __init__(self, d: int, n_experts: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d, n_experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            for _ in range(n_experts)
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        probs = self.gate(h).softmax(-1)
        weight, route = probs.max(-1)
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            idx = (route == e).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue
            out[idx] = expert(h[idx]) * weight[idx, None]
        return h + out


torch.set_num_threads(1)
torch.manual_seed(0)
d = 64
model = nn.Sequential(nn.Linear(32, d), MoE(d, 16), MoE(d, 16), nn.Linear(d, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
X = torch.randn(128 * 16, 32)
Y = torch.randint(0, 10, (128 * 16,))
for epoch in range(10):
    for i in range(0, len(X), 128):
        loss = nn.functional.cross_entropy(model(X[i : i + 128]), Y[i : i + 128])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.3f}")
