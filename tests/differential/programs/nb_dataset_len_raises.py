"""A dataset whose __len__ raises (the loop never asks for it: the sampler is a list): the cell
succeeds plain, so it must succeed measured."""

CELLS = [
    """
import random, numpy as np, torch
from torch.utils.data import Dataset, DataLoader
torch.manual_seed(0); random.seed(0); np.random.seed(0)

class Unsized(Dataset):
    def __init__(self): self.x = torch.randn(64, 4)
    def __getitem__(self, i): return self.x[i], self.x[i].sum(0, keepdim=True)
    def __len__(self): raise TypeError("this dataset has no length")

dataset = Unsized()
loader = DataLoader(dataset, batch_size=8, sampler=list(range(64)))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
""",
    """
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 6))
""",
]
MEASURED = 1
