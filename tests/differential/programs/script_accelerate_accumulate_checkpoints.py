"""accelerate's accumulate() over 4 micro-batches of 8 per optimizer step, a cosine scheduler
prepared with the rest, and a checkpoint every 5 optimizer steps written with torch.save into the
working folder (the files are compared). Issue 26: the bigger-batch fix scaled the batch and the
learning rate x4 instead of folding the micro-batches; steps are optimizer steps of 32 samples."""
import random

import numpy as np
import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0); random.seed(0); np.random.seed(0)
torch.set_num_threads(1)
acc = Accelerator(cpu=True, gradient_accumulation_steps=4)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20)
ds = TensorDataset(torch.randn(640, 8), torch.randn(640, 1))
dl = DataLoader(ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(2))
model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
updates = 0
for x, y in dl:
    with acc.accumulate(model):
        loss = nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
    if acc.sync_gradients:
        updates += 1
        if updates % 5 == 0:
            torch.save({"model": acc.unwrap_model(model).state_dict(), "updates": updates},
                       f"ckpt_{updates}.pt")
print("updates", updates, "lr", round(sched.get_last_lr()[0], 8), "loss", round(loss.item(), 6))

from tests.differential.probe import dump  # noqa: E402

dump(globals())

REPORT_HAS = [r"Steps: 20 \(step ends at: optimizer\).*\(batch 32\)"]
TIMEOUT_S = 180
