"""Gradient accumulation: four micro-batches per optimizer step, loss scaled by 1/4."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
from torch.utils.data import DataLoader, TensorDataset
dataset = TensorDataset(torch.randn(384, 10), torch.randint(0, 3, (384,)))
loader = DataLoader(dataset, batch_size=16, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
accum = 4
""",
    """
opt.zero_grad()
for i, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step(); opt.zero_grad()
        print(i, round(loss.item() * accum, 5))
""",
]
MEASURED = 1
