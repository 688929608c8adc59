"""A linear probe whose backbone was never frozen (unseen round 20).

Class: "train only the head": the optimizer gets ``head.parameters()``, but the backbone's
parameters keep ``requires_grad=True`` and its forward runs with autograd on, so every
backward computes (and accumulates, never zeroed by this optimizer) gradients for a
backbone no optimizer steps. A conv backbone, 32x32 images, batch 32.

Seen 2026-12-07 (main e2aeafd): CPU-ONLY (medium), nothing on the backbone's unused
gradients (by hand backbone.requires_grad_(False) 1.64x, medians of 3 at load 9-14). Open.
"""

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
backbone = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(64, 64, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
)
head = nn.Linear(64, 10)
images = torch.randn(32 * 24, 3, 32, 32)
labels = torch.randint(0, 10, (len(images),))
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for epoch in range(2):
    for i in range(0, len(images), 32):
        xb, yb = images[i : i + 32], labels[i : i + 32]
        loss = nn.functional.cross_entropy(head(backbone(xb)), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
