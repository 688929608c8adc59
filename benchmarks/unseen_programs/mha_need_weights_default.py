"""Self-attention through ``nn.MultiheadAttention`` with its default ``need_weights=True``
(unseen round 20).

Class: ``out, _ = self.attn(h, h, h)`` discards the attention weights, but the default
``need_weights=True`` makes the module compute them the slow way (an explicit
``bmm``+``softmax`` and a head average) instead of ``scaled_dot_product_attention``. A small
pre-norm encoder, sequences of 128, batch 16, a classification head.

Seen 2026-12-07 (main e2aeafd): CPU-ONLY (high), nothing on need_weights. By hand
(load 9-14) need_weights=False no faster on this CPU (6.67 s against 5.76 s): right here; the
GPU's SDPA path not checked.
"""

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.n1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.n2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        h = self.n1(x)
        a, _ = self.attn(h, h, h)
        x = x + a
        return x + self.ff(self.n2(x))


class Encoder(nn.Module):
    def __init__(self, vocab=1000, d=128, depth=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(depth)])
        self.head = nn.Linear(d, 4)

    def forward(self, ids):
        return self.head(self.blocks(self.emb(ids)).mean(1))


tokens = torch.randint(0, 1000, (16 * 40, 128))
labels = tokens[:, 0] % 4
model = Encoder()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for epoch in range(2):
    perm = torch.randperm(len(tokens))
    for i in range(0, len(tokens), 16):
        idx = perm[i : i + 16]
        loss = nn.functional.cross_entropy(model(tokens[idx]), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(epoch, loss.item())
