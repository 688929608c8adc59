"""Hand-rolled minibatches over in-memory tensors: `for i in range(0, n, 64)` over a fresh
permutation each epoch, gradient clipping, a global step counter from an earlier cell, losses
read every step and a NaN check that raises. The throttle fix for these reads must count steps
with its own index (`i` counts samples: `i % 10` would keep 7 reads of 32)."""

CELLS = [
    """
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
xs = torch.randn(1024, 32); ys = torch.randn(1024, 1)
model = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
log = {"loss": [], "gnorm": []}
global_step = 0
""",
    """
for epoch in range(3):
    perm = torch.randperm(1024)
    for i in range(0, 1024, 64):
        idx = perm[i:i + 64]
        loss = nn.functional.mse_loss(model(xs[idx]), ys[idx])
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        global_step += 1
        log["loss"].append(round(loss.item(), 6)); log["gnorm"].append(round(float(gn), 6))
        if torch.isnan(loss): raise RuntimeError("nan")
print(global_step, log["loss"][-1])
""",
]
MEASURED = 1
REPORT_HAS = [r"Steps: 48 "]
