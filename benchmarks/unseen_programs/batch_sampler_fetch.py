"""A dataset that fetches whole batches: ``BatchSampler`` as the sampler, ``batch_size=None``
(unseen round 20).

Class: the documented way to skip per-sample fetching: the dataset's ``__getitem__`` takes a
list of indices and returns the batch in one indexing op, and the DataLoader is told not to
batch (``batch_size=None``) with ``sampler=BatchSampler(RandomSampler(ds), 64, False)``.
An MLP on tabular data, batch 64.

Seen 2026-12-07 (main e2aeafd): HOST-BOUND (high), bigger batch 1.05x-1.74x (by hand 1.6x);
"assembling each batch sample by sample" and "index whole batches" advising this very loader
(false). Since (branch unseen20, cell/whole_batch_fetch): no such finding, the headline names
the loader's per-batch work. By hand no DataLoader at all is 1.33x (unnamed, open).
"""

import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

torch.set_num_threads(1)
torch.manual_seed(0)


class Table(Dataset):
    def __init__(self, n=64 * 60):
        self.x = torch.randn(n, 64)
        self.y = (self.x[:, :4].sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


ds = Table()
loader = DataLoader(
    ds, sampler=BatchSampler(RandomSampler(ds), 64, drop_last=False), batch_size=None
)
model = nn.Sequential(
    nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2)
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(4):
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
