"""An IterableDataset streaming synthetic samples (no __len__), batched by a DataLoader."""

CELLS = [
    """
import random, numpy as np, torch
from torch.utils.data import IterableDataset, DataLoader
torch.manual_seed(0); random.seed(0); np.random.seed(0)

class Stream(IterableDataset):
    def __init__(self, n): self.n = n
    def __iter__(self):
        g = torch.Generator().manual_seed(7)
        for _ in range(self.n):
            x = torch.randn(6, generator=g)
            yield x, x.sum().unsqueeze(0)

dataset = Stream(480)
loader = DataLoader(dataset, batch_size=24)
model = torch.nn.Linear(6, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
""",
    """
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 6))
""",
]
MEASURED = 1
