"""The training step lives in a function the loop calls, and the cause lives there: autograd's
anomaly detection switched on around each step's forward and backward. The loop itself has no
.backward() of its own; the report must still name the switch in train_step (issue 26: it saw
no step loop and said nothing)."""
import random

import numpy as np
import torch
from torch import nn

torch.manual_seed(0); random.seed(0); np.random.seed(0)
torch.set_num_threads(1)
data = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(8)]
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model, batch):
    x, y = batch
    with torch.autograd.detect_anomaly():
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
    opt.step()
    return loss.item()


running = 0.0
for epoch in range(8):
    for batch in data:
        running = 0.9 * running + 0.1 * train_step(model, batch)
print(f"final {running:.4f}")

from tests.differential.probe import dump  # noqa: E402

dump(globals())

REPORT_HAS = [r"Autograd's anomaly detection is on while the loop trains"]
