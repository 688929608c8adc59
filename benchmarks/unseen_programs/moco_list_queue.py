"""A MoCo-style contrastive loop whose negative queue is a Python deque of key tensors (unseen
round 21).

Class: a memory bank kept as ``collections.deque(maxlen=K)`` of per-sample key rows, appended
with ``queue.extend(k.unbind(0))`` and turned back into a matrix with ``torch.stack(list(queue))``
on every step. The stack copies all K rows through K Python-level tensor handles each step; the
encoders (query, and a momentum key encoder updated by a ``torch._foreach`` lerp) are small. The
cut: a preallocated ``(K, D)`` tensor ring buffer written with a slice at a moving pointer.
"""

import collections

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
K, D, B = 8192, 128, 64


def encoder():
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, D))


q_enc, k_enc = encoder(), encoder()
k_enc.load_state_dict(q_enc.state_dict())
for p in k_enc.parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD(q_enc.parameters(), lr=0.03, momentum=0.9)
queue = collections.deque(nn.functional.normalize(torch.randn(K, D), dim=1).unbind(0), maxlen=K)
data = torch.randn(B * 100, 256)
for epoch in range(3):
    for i in range(0, len(data), B):
        x = data[i : i + B]
        x1 = x + 0.1 * torch.randn_like(x)
        x2 = x + 0.1 * torch.randn_like(x)
        q = nn.functional.normalize(q_enc(x1), dim=1)
        with torch.no_grad():
            torch._foreach_lerp_(list(k_enc.parameters()), list(q_enc.parameters()), 0.001)
            k = nn.functional.normalize(k_enc(x2), dim=1)
        bank = torch.stack(list(queue))
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ bank.T], dim=1) / 0.07
        loss = nn.functional.cross_entropy(logits, torch.zeros(B, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        queue.extend(k.unbind(0))
    print(epoch, loss.item())
