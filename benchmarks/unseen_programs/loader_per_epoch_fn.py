"""A generator function that builds the DataLoader (with workers) and is called every epoch
(unseen, oldopen): `def batches(): yield from DataLoader(ds, num_workers=2)` then
`for epoch...: for x, y in batches():`. Class: worker start-up once per epoch, the loader
hidden in a function. The product should name the start-up's share and where to act (build the
loader once, persistent_workers=True), or say why its patch cannot reach it. Seen 2026-12-05 15:36 (load 17): [high] "The DataLoader
is made anew every epoch" (up to 2.64x), naming `batches()`; no patch."""

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


def batches():
    yield from DataLoader(ds, batch_size=32, shuffle=True, num_workers=2)


model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(12):
    for x, y in batches():
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, round(loss.item(), 3))
