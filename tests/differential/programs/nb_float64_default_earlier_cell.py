"""The default dtype set to float64 by an earlier cell, which then builds the model: the measured
cell only trains. Guards: the report names it from the live default dtype the step clock reads
("set outside this cell", where to act, no patch), and reading it changes nothing (the
default dtype is float64 after the cell, as in the plain run)."""

CELLS = [
    """
import random, numpy as np, torch
from torch import nn
torch.set_default_dtype(torch.float64)
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randn(8, 1)) for _ in range(30)]
""",
    """
for x, y in data:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"last loss {loss.item():.5f} default dtype after: {torch.get_default_dtype()}")
""",
]
MEASURED = 1
REPORT_HAS = [
    r"default dtype is float64 while the loop ran \(set outside this cell\)",
    r"torch.set_default_dtype\(torch.float32\) where float64 is set",
]
