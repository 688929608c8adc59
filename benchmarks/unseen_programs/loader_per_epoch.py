"""A DataLoader with workers re-made every epoch (unseen, oldopen): `for epoch in range(E):
loader = DataLoader(ds, num_workers=2, ...)` inside the epoch loop, short epochs (16 steps).
Class: worker start-up paid once per epoch (each new loader forks its workers and waits for
their first batches); persistent_workers=True on a loader made anew does nothing. The product
should name the start-up's share of the run at the loader line and offer to build the loader
once, before the epoch loop, with persistent_workers=True (the fix must reach the loader the
loop iterates). Seen 2026-12-05 15:12 (load 23): stalls every 16 steps in "Over the run", no
finding named them ([info] "workers barely run and the machine is busy"). Since: [high] "The
DataLoader is made anew every epoch" at the loader line, up to 1.40x-2.2x by the stalls' share
(no patch: build it once before the epoch loop, persistent_workers=True); by hand at load
16-23, building it once ran 1.50x-1.80x (3 interleaved pairs, plain python)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Noisy(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 64)
        self.y = torch.randint(0, 4, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + 0.01 * torch.randn(64), self.y[i]


ds = Noisy(512)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(12):
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, round(loss.item(), 3))
