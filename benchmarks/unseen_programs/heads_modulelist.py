"""Multi-task: 48 ``nn.Linear(128, 1)`` heads in an ``nn.ModuleList`` called one by one in forward
(``torch.cat([head(h) for head in self.heads], 1)``), a TensorDataset loader, Adam (unseen round 12).

Class: copies of one layer run in a Python loop where one stacked layer does the same work.
Measured by hand (thread time, one torch thread, 5 rounds of 20 steps, load 13-16): 6.28 ms a step
as written, 0.70 ms with one ``nn.Linear(128, 48)`` (9.0x). The product should say host-bound and
name the heads loop with the stacking fix first.

Seen 2026-12-06 on main (load 14-19): host-bound, "[medium] The model's ops are too small ...
batch size x8 (learning rate x8); then torch.compile" (0.75x-6.93x) and fused Adam; no word of
the heads. Fixed (cell/module_loops, rules/launch.tiny_ops): the fix starts "First, stack the
TASKS `Linear` layers of `self.heads` into one ... line 19 (line 32 here) runs them one by one". Left: no patch
and no bound of its own for the stacking (the finding's range is the bigger batch's).

--try-fixes 30, budget 400 s (2026-12-06 01:47-01:55, load 12-15): bigger batch x8 predicted
4.14x-7.14x, measured 1.24x (0.91x-1.70x; the x8 run ended after 11 steps, the epoch's end): no
measurable effect; fused Adam predicted 1.03x-1.23x, undecided (0.35x, 5 rounds). By hand (thread
time, one thread, load 10-14) batch 1024 against 128 gives 3.04x per sample: the bigger batch's
low end (4.14x, from "operators whose work grows with the batch take 7% of the model side") is
too high, because the heads' elementwise ops under 30 us (bias adds, sigmoid, the BCE's) grow with
the batch too and were counted as paid once a step. Fixed (analysis.host.model_work_share, branch
lbfgsheads): on the CPU a forward/backward call's time beyond a call's fixed cost (the optimizer's
calls' floor) grows with the batch, read on floors: a one-thread trace's share 5.6% -> 33.9%, low
end about 2.3x. Its --try-fixes at load 21-24 stayed undecided (0.89x, 2 rounds).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
TASKS = 48


class MultiHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(32, 128), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(128, 1) for _ in range(TASKS)])

    def forward(self, x):
        h = self.trunk(x)
        return torch.cat([head(h) for head in self.heads], dim=1)


X = torch.randn(16384, 32)
Y = (torch.rand(16384, TASKS) > 0.5).float()
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)
model = MultiHead()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(1):  # noqa: B007 - as users write it
    for x, y in loader:
        loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print(f"loss {loss.item():.3f}")
