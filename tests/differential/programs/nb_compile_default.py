"""torch.compile (inductor, the default backend) on a tiny model trained in the cell: one graph
captured, no graph breaks, same numbers (dynamo's counters are compared)."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
cmodel = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
X = torch.randn(32, 8); Y = X.sum(1, keepdim=True)
""",
    """
for step in range(12):
    loss = (cmodel(X) - Y).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 5))
""",
]
MEASURED = 1
TIMEOUT_S = 300
