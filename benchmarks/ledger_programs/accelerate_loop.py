"""accelerate: Accelerator.prepare over a slow dataset; the loader the loop reads is prepared."""

import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Slow(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(16), torch.randn(1)


accelerator = Accelerator(cpu=True)
loader = DataLoader(Slow(), batch_size=8)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, opt, loader = accelerator.prepare(model, opt, loader)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    accelerator.backward(loss)
    opt.step()
    if step == 150:
        break
