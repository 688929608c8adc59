"""A hand-written RNN whose recurrent ``nn.Linear`` carries a ``weight_norm`` parametrization,
stepped 48 times per sequence (unseen round 22): hidden 384, batch 32, Adam, 60 steps.

Class: a parametrized weight read many times in one forward. A parametrization recomputes the
weight from its parts (here ``g * v / ||v||``, its norm and division, and autograd nodes for
them) on every access of ``cell.weight``: 48 accesses per forward, 48 copies of the same
weight and 48 chains to back through. ``torch.nn.utils.parametrize.cached()`` around the forward
(and its loss) computes it once per forward, with the same gradients. The same class: spectral
norm (a power iteration per access), ``orthogonal``, any parametrization in a loop over time
or over a shared block.
Seen 2026-12-07 on main 343a714: CPU-ONLY (medium), _weight_norm_interface 48 calls a step
in the trace, no finding. By hand parametrize.cached() 1.64x (CPU clock). Fixed in c266195:
host.parametrization_recomputed, patch parametrize.cached() around the forward and loss.
"""

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

torch.set_num_threads(1)
torch.manual_seed(0)
T, B, H, IN = 48, 32, 384, 16


class WNRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(IN, H)
        self.rec = weight_norm(nn.Linear(H, H, bias=False))
        self.out = nn.Linear(H, 1)

    def forward(self, xs):
        h = torch.zeros(xs.shape[1], H)
        for t in range(xs.shape[0]):
            h = torch.tanh(self.inp(xs[t]) + self.rec(h))
        return self.out(h)


model = WNRNN()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
seqs = torch.randn(60, T, B, IN)
ys = seqs.sum(dim=(1, 3)).unsqueeze(-1) * 0.05
for epoch in range(2):
    for xs, y in zip(seqs, ys, strict=True):
        loss = nn.functional.mse_loss(model(xs), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
