"""Gradient accumulation with a GradScaler (unseen round 11): ``loss / accum`` every micro-step,
scaler.step/update and ``.item()`` only on accumulation boundaries (every 4th micro-step), an
MLP under CPU bf16 autocast.

Class: correct per-boundary work that a per-step reader could take for per-step work. Written
before the first run: a practitioner sees nothing wrong in the loop (the read of the loss is
already once an optimizer step, 1 micro-step in 4, and the scaler is the documented pattern).
The product must NOT say "reads device values every step" nor offer a log-every-N gate on the
boundary's ``.item()`` (it is already gated), and must not offer accumulation (it is there). If
anything, host-bound "ops too small" with a bigger micro-batch is fair.

Seen on main e78d0f4 (2026-12-05, load 12-24): no false per-step sync (the boundary's
``.item()`` not flagged), 60 optimizer steps counted for 240 micro-steps, the GradScaler under
bf16 said unneeded at info (right: scaling is for float16). Verdict CPU-ONLY then HOST-BOUND
across two runs at a 89-93% wait for a core; fused AdamW 1.04x (0.95x-1.17x), undecided, in a
predicted 1.47x. Nothing fixed: the product was right on what this script tests.
"""

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

model = nn.Sequential(
    nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256), nn.GELU(), nn.Linear(256, 10)
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
accum = 4
X = torch.randn(4096, 256)
Y = torch.randint(0, 10, (4096,))
losses = []
running = 0.0
for i in range(240):
    idx = torch.randint(0, 4096, (32,))
    x, y = X[idx], Y[idx]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss / accum).backward()
    if (i + 1) % accum == 0:
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        running = 0.9 * running + 0.1 * loss.item()
        losses.append(running)
print(f"final smoothed loss {losses[-1]:.4f}")
