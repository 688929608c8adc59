"""A custom Sampler (and its generator) feeding a DataLoader."""

CELLS = [
    """
import random, numpy as np, torch
from torch.utils.data import Sampler, DataLoader, TensorDataset
torch.manual_seed(0); random.seed(0); np.random.seed(0)

class EvenFirst(Sampler):
    def __init__(self, n, seed): self.n, self.seed = n, seed
    def __len__(self): return self.n
    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        idx = torch.randperm(self.n, generator=g).tolist()
        return iter(sorted(idx, key=lambda i: i % 2))

dataset = TensorDataset(torch.randn(200, 5), torch.randn(200, 1))
sampler = EvenFirst(200, 3)
loader = DataLoader(dataset, batch_size=20, sampler=sampler)
model = torch.nn.Linear(5, 1)
opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
""",
    """
for epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    print(epoch, round(loss.item(), 6))
""",
]
MEASURED = 1
