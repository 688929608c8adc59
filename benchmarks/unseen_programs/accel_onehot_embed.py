"""Token ids turned into ``F.one_hot(ids, V).float()`` and multiplied by an embedding matrix
under accelerate (unseen round 23): a bag-of-words classifier over 32-token texts from a
5000-word vocabulary, the table an ``nn.Parameter(V, 128)``, ``Accelerator(cpu=True)``, batch 64,
AdamW, 2 epochs of 60 steps.

Class: an embedding lookup written as a dense product. ``one_hot(ids, V).float() @ table``
materialises a [B, L, V] float tensor (40 MiB a step) and runs a [B*L, V] x [V, D] matmul forward
and its transpose backward, where a row gather (``F.embedding(ids, table)`` or ``nn.Embedding``)
reads B*L rows. Written so in courses that show the embedding "is just a one-hot times a
matrix". The fix: ``F.embedding(ids, self.table)`` (same values, same gradient).
Seen 2026-12-07 on main e9b71ba: CPU-ONLY (high), the one_hot line 52% of the sampled step, no
finding. By hand F.embedding 7.40x (CPU clock, medians of 3 pairs). Fixed in
rules/onehot_matmul_u23: host.onehot_product [high] at line 32, 2.29x-unbounded.
"""

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
V, L, D = 5000, 32, 128


class BagOfWords(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(V, D) * 0.02)
        self.head = nn.Sequential(nn.Linear(D, 256), nn.ReLU(), nn.Linear(256, 4))

    def forward(self, ids):
        onehot = F.one_hot(ids, V).float()
        h = (onehot @ self.table).mean(1)
        return self.head(h)


accelerator = Accelerator(cpu=True)
labels = torch.randint(0, 4, (64 * 60,))
ids = torch.randint(0, V, (64 * 60, L))
ids[:, :4] = labels[:, None] * 100 + torch.randint(0, 100, (64 * 60, 4))
loader = DataLoader(TensorDataset(ids, labels), batch_size=64, shuffle=True)
model = BagOfWords()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, opt, loader = accelerator.prepare(model, opt, loader)
for epoch in range(2):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
    accelerator.print(epoch, loss.item())
