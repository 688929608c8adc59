"""Hard-negative mining by a full ``argsort`` of every similarity row, in a generator-driven
loop (unseen round 22): a 64-d embedding MLP trained with a triplet loss against a memory bank
of 8192 embeddings, batch 128, 150 steps pulled from ``def pairs()`` (an endless generator).

Class: a full sort where only the top k are used. ``sim.argsort(dim=1, descending=True)[:, :k]``
sorts 8192 scores per anchor to keep 8: O(n log n) per row, and the sort dominates a small
model's step. ``sim.topk(k, dim=1).indices`` returns the same indices (up to ties) in O(n). The
same class: ``torch.sort(...).indices[:, :k]``, ``argsort()[..., -k:]`` for the largest, ``np.argsort``
on the scores.
Seen 2026-12-07 on main 343a714: CPU-ONLY (high), the argsort line 93% of the samples, no
finding. By hand topk 10.6x (CPU clock). Fixed in eb7d042: host.full_sort_topk 4.47x-13.21x,
patch topk.
"""

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
D, B, N_BANK, K = 64, 128, 8192, 8
items = torch.randn(20000, 96)
targets = items[:, :D] + 0.1 * torch.randn(20000, D)
net = nn.Sequential(nn.Linear(96, 256), nn.ReLU(), nn.Linear(256, D))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
bank = F.normalize(torch.randn(N_BANK, D), dim=1)


def pairs():
    while True:
        idx = torch.randint(0, len(items), (B,))
        yield items[idx], F.normalize(targets[idx], dim=1)


for step, (x, pos) in zip(range(150), pairs(), strict=False):
    anchor = F.normalize(net(x), dim=1)
    with torch.no_grad():
        sim = anchor @ bank.T
        hard = sim.argsort(dim=1, descending=True)[:, :K]
    neg = bank[hard]  # [B, K, D]
    d_pos = (anchor - pos).pow(2).sum(1, keepdim=True)
    d_neg = (anchor.unsqueeze(1) - neg).pow(2).sum(2)
    loss = F.relu(d_pos - d_neg + 0.5).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    bank[step * B % N_BANK : step * B % N_BANK + B] = pos
    if step % 50 == 0:
        print(step, loss.item())
