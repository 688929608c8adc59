"""A plain Python generator instead of a DataLoader."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
def batches(n, bs):
    for _ in range(n):
        x = torch.randn(bs, 12)
        yield x, (x[:, 0] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.ReLU(), torch.nn.Linear(24, 2))
opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
""",
    """
gen = batches(60, 16)
for x, y in gen:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 6))
""",
]
MEASURED = 1
