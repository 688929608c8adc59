"""A Hugging Face accelerate loop: Accelerator.prepare, accelerator.backward, CPU only."""
import random

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0); random.seed(0); np.random.seed(0)
accelerator = Accelerator(cpu=True)
dataset = TensorDataset(torch.randn(160, 6), torch.randn(160, 1))
loader = DataLoader(dataset, batch_size=16, shuffle=True,
                    generator=torch.Generator().manual_seed(2))
model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, opt, loader = accelerator.prepare(model, opt, loader)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
    accelerator.print(epoch, round(loss.item(), 6))

from tests.differential.probe import dump  # noqa: E402

dump(globals())

TIMEOUT_S = 180
