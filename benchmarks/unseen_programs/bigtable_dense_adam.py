"""A two-tower recommender with a large dense embedding table under Adam (unseen round 20).

Class: ``nn.Embedding(200_000, 32)`` for items (dense gradients, the default), Adam over
all parameters: each step's backward writes a full-table gradient (zeros but the batch's rows) and
Adam reads and writes the table, its two moments and the gradient, for a batch that touches
a few hundred rows. Batch 256 pairs, dot-product score, BCE with one sampled negative.

Seen 2026-12-07 (main e2aeafd): HOST-BOUND "ops too small" (false: 99% of the step in
calls of milliseconds over the table), fused Adam 1.54x-2.26x (by hand 2.2x-2.7x). Since
(branch unseen20, analysis/large_elementwise_ops): CPU-ONLY. By hand sparse=True + SparseAdam
29x-35x: unnamed (open).
"""

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
N_USERS, N_ITEMS, D = 5_000, 200_000, 32


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(N_USERS, D)
        self.items = nn.Embedding(N_ITEMS, D)
        self.mlp = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))

    def forward(self, u, i):
        return (self.mlp(self.users(u)) * self.items(i)).sum(1)


users = torch.randint(0, N_USERS, (256 * 60,))
items = torch.randint(0, N_ITEMS, (256 * 60,))
model = TwoTower()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = nn.BCEWithLogitsLoss()
for epoch in range(2):
    for s in range(0, len(users), 256):
        u, pos = users[s : s + 256], items[s : s + 256]
        neg = torch.randint(0, N_ITEMS, (len(u),))
        logits = torch.cat([model(u, pos), model(u, neg)])
        target = torch.cat([torch.ones(len(u)), torch.zeros(len(u))])
        loss = lossf(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
