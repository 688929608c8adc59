"""A ChainDataset of streaming shards whose __len__ raises (and counts its calls): torch's
ChainDataset.__len__ asks each shard, so a report that asked for the loader's length would run
the user's code after the cell, and fail a good cell."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
len_calls = []
class Shard(torch.utils.data.IterableDataset):
    def __init__(self, seed):
        self.seed = seed
    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        for _ in range(4):
            yield torch.randn(8, generator=g), int(torch.randint(0, 2, (), generator=g))
    def __len__(self):
        len_calls.append(self.seed)
        raise TypeError("a streaming shard has no length")
stream = torch.utils.data.ChainDataset([Shard(s) for s in range(6)])
loader = torch.utils.data.DataLoader(stream, batch_size=2)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    """
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 6), len_calls)
""",
]
MEASURED = 1
REPORT_HAS = [r"not read: ChainDataset, its size needs its own code"]
