"""accelerate with ``accelerator.gather_for_metrics`` and ``accelerator.log`` every step (unseen,
helper fwunseen): one process, no tracker configured (``log_with`` unset), a small MLP.

Class (a control): per-step metric calls of a framework that cost almost nothing on one
process: ``gather_for_metrics`` returns its input after a few checks, ``accelerator.log`` loops
over no trackers. A practitioner knows that on one process these are not the cost; the
``.item()`` of the gathered accuracy is a read of a CPU tensor. The product should not report
framework overhead here (nor the log lines as the loop's cost) beyond what it measures.

Seen 2026-12-06 (helper fwunseen; by hand, CPU clock: both calls removed 1.03x, 1.02-1.07,
load 17-19): no framework finding (right).
"""

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)

accelerator = Accelerator(cpu=True)
model = nn.Sequential(
    nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ds = TensorDataset(torch.randn(16384, 64), torch.randint(0, 8, (16384,)))
loader = DataLoader(ds, batch_size=64, shuffle=True)
model, opt, loader = accelerator.prepare(model, opt, loader)

for _epoch in range(2):
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        preds, labels = accelerator.gather_for_metrics((out.argmax(1), y))
        acc = (preds == labels).float().mean()
        accelerator.log({"loss": loss.item(), "acc": acc.item()}, step=step)
