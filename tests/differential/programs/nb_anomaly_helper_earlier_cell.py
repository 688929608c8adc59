"""Anomaly detection turned on by a helper of an earlier cell: `train_step` wraps its backward in
`torch.autograd.detect_anomaly()`, the measured cell only calls it in a loop. Guards: the report
names it from the live flag the step clock reads ("set outside this cell", no patch), and reading
the flag changes nothing (it is off after the cell, as in the plain run)."""

CELLS = [
    """
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randn(8, 1)) for _ in range(30)]
def train_step(x, y):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    with torch.autograd.detect_anomaly():
        loss.backward()
    opt.step()
    return loss.item()
""",
    """
losses = [train_step(x, y) for x, y in data]
print(f"last loss {losses[-1]:.5f} anomaly after: {torch.is_anomaly_enabled()}")
""",
]
MEASURED = 1
REPORT_HAS = [
    r"anomaly detection is on while the loop ran \(set outside this cell\)",
    r"`train_step`",
]
