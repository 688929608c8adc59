"""CLIP-style contrastive training with a learnable temperature (unseen round 17): two MLP towers,
``logit_scale`` an ``nn.Parameter`` exponentiated in ``forward``, a 512x512 logit matrix with
the symmetric cross-entropy, the scale clamped after every update under ``no_grad``
(``model.logit_scale.clamp_(0, math.log(100))``), in-batch accuracy and the temperature read by
``.item()`` every step and printed once an epoch. TensorDataset, batch 512, 72 steps.

Class: a contrastive loss over the whole batch (the logit matrix grows with the batch squared)
and the parameter clamp CLIP does by hand. Written before the first run: compute-bound (cpu-only
here), the data share of a 512-row TensorDataset collated row by row noticeable; two reads a
step named at info (on a GPU each waits for the queue); the clamp is part of the update.

Seen 2026-12-06 (main 91071ec, load 1-3): CPU-ONLY (medium), data 16% -> "[medium] index whole
batches" up to 1.19x (by hand, the epoch loop's CPU time with a BatchSampler, 3 rounds at load
13-16: 0.93 -> 0.84 s, 1.12x: right, within its bound); the reads at lines 52-53 named at info
(right). Wrong: "[low] The loop logs on every step ... line 51:
`model.logit_scale.clamp_(0, math.log(100))`" (``math.log`` read as a tracker's ``log``; fixed,
tests/test_logarithm_not_logging.py); the reads' patch refused with "the training loop has no
per-step .item() ... outside an if" while lines 52-53 are per-step reads (their values are
printed after the loop).
"""

import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)


class Tower(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, 256), nn.GELU(), nn.Linear(256, d_out))

    def forward(self, x):
        return nn.functional.normalize(self.net(x), dim=-1)


class Clip(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image = Tower(192, 64)
        self.text = Tower(96, 64)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, img, txt):
        scale = self.logit_scale.exp()
        logits = scale * self.image(img) @ self.text(txt).t()
        target = torch.arange(img.shape[0])
        loss_i = nn.functional.cross_entropy(logits, target)
        loss_t = nn.functional.cross_entropy(logits.t(), target)
        return (loss_i + loss_t) / 2, logits


torch.manual_seed(0)
latent = torch.randn(12288, 32)
imgs = latent @ torch.randn(32, 192) + 0.1 * torch.randn(12288, 192)
txts = latent @ torch.randn(32, 96) + 0.1 * torch.randn(12288, 96)
loader = DataLoader(TensorDataset(imgs, txts), batch_size=512, shuffle=True, drop_last=True)
model = Clip()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
for epoch in range(3):
    for img, txt in loader:
        loss, logits = model(img, txt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        acc = (logits.argmax(1) == torch.arange(len(img))).float().mean().item()
        temp = 1 / model.logit_scale.exp().item()
    print(f"epoch {epoch} loss {loss.item():.3f} acc {acc:.2f} temperature {temp:.3f}")
