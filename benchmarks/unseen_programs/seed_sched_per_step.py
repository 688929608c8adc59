"""Per-step Python housekeeping on a small conv net (unseen round 12): ``torch.manual_seed(step)``,
``model.train()``, a LambdaLR with warm-up and cosine math in Python stepped every batch, a
random flip decided by ``torch.rand(()) < 0.5``.

Class: cheap per-step lines that look suspicious. The product must not name any of them as a
cost (each is microseconds beside the convolutions). Seen 2026-12-06 (load 15): too busy to
judge (cpu-only or host-bound), 60 steps, no finding on the seed, the scheduler or train() (right).
"""

import math

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.ReLU(),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(32, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
WARMUP, TOTAL = 10, 60


def lr_at(step: int) -> float:
    if step < WARMUP:
        return (step + 1) / WARMUP
    t = (step - WARMUP) / max(1, TOTAL - WARMUP)
    return 0.5 * (1 + math.cos(math.pi * t))


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
X = torch.randn(2048, 3, 16, 16)
Y = torch.randint(0, 10, (2048,))
for step in range(TOTAL):
    torch.manual_seed(1000 + step)  # reproducible augmentation per step
    model.train()
    i = (step * 32) % 2048
    x = X[i : i + 32]
    if torch.rand(()) < 0.5:
        x = x.flip(3)
    loss = nn.functional.cross_entropy(model(x), Y[i : i + 32])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
print(f"lr {sched.get_last_lr()[0]:.4f} loss {loss.item():.3f}")
