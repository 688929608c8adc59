"""Deterministic algorithms switched on (warn-only) by an earlier cell: the measured cell only
trains. Guards: the report names the mode from the live flag the step clock reads ("set outside
this cell", an info on a CPU run: no cost claimed), and reading it changes nothing (on, and
warn-only, after the cell, as in the plain run)."""

CELLS = [
    """
import random, numpy as np, torch
from torch import nn
torch.use_deterministic_algorithms(True, warn_only=True)
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Embedding(50, 16), nn.Flatten(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randint(0, 50, (8, 4)), torch.randn(8, 1)) for _ in range(30)]
""",
    """
for x, y in data:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"last loss {loss.item():.5f} deterministic after: "
      f"{torch.are_deterministic_algorithms_enabled()} "
      f"{torch.is_deterministic_algorithms_warn_only_enabled()}")
""",
]
MEASURED = 1
REPORT_HAS = [
    r"Deterministic algorithms are on while the loop ran \(set outside this cell\)",
    r"torch.use_deterministic_algorithms\(False\) before the loop",
]
