"""Seq2seq with teacher forcing (unseen round 8): a GRU encoder, a GRUCell decoder stepped in a
Python loop per output token, half the tokens fed back from its own argmax (scheduled sampling),
a DataLoader over a TensorDataset, Adam and grad clipping.

Class: tiny ops launched from a Python per-token loop. The product should say host-bound (ops
of a few us, Python between them) and offer a bigger batch (the loader is there to enlarge).
Seen 2026-12-05 (load 13): host-bound, bigger_batch x4 1.35x-4.00x offered; --try-fixes
measured 2.04x (1.85x-2.24x), verified, inside its range."""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)
torch.set_num_threads(1)

V, L, H = 20, 14, 64
src = torch.randint(3, V, (2048, L))
tgt = torch.flip(src, dims=[1])
loader = DataLoader(TensorDataset(src, tgt), batch_size=32, shuffle=True)


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.enc = nn.GRU(H, H, batch_first=True)
        self.dec = nn.GRUCell(H, H)
        self.out = nn.Linear(H, V)

    def forward(self, s, t, tf_ratio=0.5):
        _, h = self.enc(self.emb(s))
        h = h[0]
        inp = torch.ones(s.shape[0], dtype=torch.long)  # <bos>
        logits = []
        for i in range(t.shape[1]):
            h = self.dec(self.emb(inp), h)
            o = self.out(h)
            logits.append(o)
            inp = t[:, i] if random.random() < tf_ratio else o.argmax(-1)
        return torch.stack(logits, 1)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
crit = nn.CrossEntropyLoss()
for epoch in range(3):
    for s, t in loader:
        logits = model(s, t)
        loss = crit(logits.reshape(-1, V), t.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.3f}")
