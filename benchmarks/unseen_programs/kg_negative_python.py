"""TransE knowledge-graph embeddings with negatives corrupted in Python (unseen round 17): a list
of 40k (head, relation, tail) triples, ``collate_fn=lambda b: b``, ``corrupt(batch)`` drawing a
random entity per triple until the corrupted triple is not in a Python set, ``torch.tensor`` of
the lists, a margin loss over L1 distances, Adam, the entity embeddings renormalised after every
update (``with torch.no_grad(): model.ent.weight.div_(...norm(...))``: TransE's constraint).
Batch 512, 237 steps.

Class: a recommender / KG loop on ``nn.Embedding`` with negative sampling in Python, and a
parameter constraint applied under ``no_grad`` every step. Written before the first run:
host-bound (tiny ops, Python), the corrupt loop a visible share, the renormalisation part of the
update (never validation).

Seen 2026-12-06 (main 91071ec, load 3): HOST-BOUND (high), "[high] ops too small: batch x4"
1.37x-3.49x (by hand, the epoch loop's CPU time at batch 2048 and lr x4: 1.12 -> 0.57 s,
medians of 3: 2.0x, in range); fused Adam uncertain; the corrupt loop not named (by hand it
costs nothing measurable: 1.12 s with and 1.21 s without, load 5). Wrong: "[info] Validation
runs inside every training step" at line 53 with a patch gating the renormalisation every 10
steps (it changes the training). Fixed (``div_`` is an in-place update as ``add_`` was;
tests/test_constraint_not_validation.py).
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader

torch.set_num_threads(1)
random.seed(0)
torch.manual_seed(0)
N_ENT, N_REL = 5000, 40
triples = [
    (random.randrange(N_ENT), random.randrange(N_REL), random.randrange(N_ENT))
    for _ in range(40000)
]
known = set(triples)


class TransE(nn.Module):
    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.ent = nn.Embedding(N_ENT, dim)
        self.rel = nn.Embedding(N_REL, dim)

    def score(self, h, r, t):
        return (self.ent(h) + self.rel(r) - self.ent(t)).norm(p=1, dim=-1)


def corrupt(batch):
    negs = []
    for h, r, t in batch:
        while True:
            e = random.randrange(N_ENT)
            cand = (e, r, t) if random.random() < 0.5 else (h, r, e)
            if cand not in known:
                break
        negs.append(cand)
    return negs


loader = DataLoader(triples, batch_size=512, shuffle=True, collate_fn=lambda b: b)
model = TransE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for batch in loader:
        negs = corrupt(batch)
        pos = torch.tensor(batch)
        neg = torch.tensor(negs)
        d_pos = model.score(pos[:, 0], pos[:, 1], pos[:, 2])
        d_neg = model.score(neg[:, 0], neg[:, 1], neg[:, 2])
        loss = torch.relu(1.0 + d_pos - d_neg).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.ent.weight.div_(model.ent.weight.norm(dim=1, keepdim=True))
    print(f"epoch {epoch} loss {loss.item():.4f}")
