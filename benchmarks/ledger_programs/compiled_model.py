"""A compiled model (torch.compile) fed by a loader without workers."""

import time

import torch
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Slow(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(32), torch.randn(1)


model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 1))
model = torch.compile(model, backend="aot_eager")  # no C++ toolchain needed
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
for step, (x, y) in enumerate(DataLoader(Slow(), batch_size=8)):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 150:
        break
