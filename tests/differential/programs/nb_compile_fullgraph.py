"""torch.compile(fullgraph=True) (aot_eager backend: no C compiler work): must not raise, one
graph, and the model stays compiled after the cell."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.SiLU(), torch.nn.Linear(16, 1))
cmodel = torch.compile(model, fullgraph=True, backend="aot_eager")
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
X = torch.randn(32, 8); Y = X[:, :1]
""",
    """
for step in range(15):
    loss = (cmodel(X) - Y).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 5))
""",
    """
import torch._dynamo
print(torch._dynamo.utils.counters["stats"]["unique_graphs"], round(cmodel(X).sum().item(), 4))
""",
]
MEASURED = 1
