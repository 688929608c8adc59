"""Plain loop, input-bound: a __getitem__ that sleeps (decoding), no workers."""

import time

import torch
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Decoded(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(64), torch.randn(1)


loader = DataLoader(Decoded(), batch_size=8, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 150:
        break
