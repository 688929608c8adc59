"""Gradient clipping written by hand in a helper function, one ``.item()`` per parameter (unseen
round 16): ``def clip_by_hand(params, max_norm)`` sums ``p.grad.norm().item() ** 2`` over every
parameter in Python, then ``p.grad.mul_(scale)`` if the total is over the limit; called every
step between ``loss.backward()`` and ``opt.step()``. A 6-block residual MLP of width 128 (LayerNorm + 2
Linears a block: 40 parameter tensors with the two outer Linears), AdamW, batch 64 from a TensorDataset, 30 steps.

Class: per-parameter device reads in a function the step calls (not in the loop's own body).
Planted: 40 reads a step; on a CPU they cost only their small ops, on a GPU each is a
synchronisation (40 host-GPU round trips a step, the queue drained 40 times). Written before
the first run: the GPU estimate should count ~40 reads a step and say the host and GPU take
turns; a finding should name the read inside ``clip_by_hand`` (the ``.item()`` line) and offer
``torch.nn.utils.clip_grad_norm_(params, max_norm)`` (one fused norm, no read), or at least
say the reads are per step; on this CPU the measured cost is small (no high-severity finding
from the CPU's time alone).

Seen 2026-12-06 (main ff4e6cb, load 20-24, 94% waiting): UNKNOWN, too busy to judge (right), 30
steps (right), the GPU estimate "40.0 read(s) of device values per step: host and GPU take
turns" (right), but **no finding named the reads** (the ``.item()`` under ``if p.grad is not
None:`` was taken as gated). Fixed by 5bb393b: "[info] `clip_by_hand` reads a device value
every step" at line 37, no patch; since 5ebac9a: "reads a gradient norm every step", advice
``torch.nn.utils.clip_grad_norm_(params, max_norm)`` (its advice was "compute it on the host
before the batch goes to the device", which fits no gradient).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, h):
        return h + self.fc2(torch.relu(self.fc1(self.norm(h))))


def clip_by_hand(params, max_norm):
    total = 0.0
    for p in params:
        if p.grad is not None:
            total += p.grad.norm().item() ** 2
    total = total**0.5
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale)
    return total


torch.manual_seed(0)
X = torch.randn(1920, 128)
Y = (X[:, :16] @ torch.randn(16, 8)).argmax(1)
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
model = nn.Sequential(nn.Linear(128, 128), *[Block(128) for _ in range(6)], nn.Linear(128, 8))
params = list(model.parameters())
opt = torch.optim.AdamW(params, lr=1e-3)
norms = []
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    norms.append(clip_by_hand(params, 1.0))
    opt.step()
print(f"loss {loss.item():.3f} median grad norm {sorted(norms)[len(norms) // 2]:.2f}")
