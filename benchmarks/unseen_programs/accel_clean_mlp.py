"""A clean accelerate loop (unseen round 22's control): ``Accelerator(cpu=True)``, a tabular
MLP 256-1024-1024-16 on in-memory tensors, ``DataLoader(TensorDataset, batch_size=256,
shuffle=True)`` ``prepare``d with the model and AdamW, ``accelerator.backward``, the loss read
once per epoch.

Class: control. The matmuls hold the step; no planted slowdown. The product should call it
compute-bound with no data, sync, logging or Python finding (a fused optimizer or precision at
most, low).
Seen 2026-12-07 on main 343a714: UNKNOWN (too busy, 88%: right to refuse); fused AdamW
[medium] 1.06x-1.72x, by hand fused=True 1.36x (CPU clock, medians of 3 pairs): right.
"""

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
accelerator = Accelerator(cpu=True)
X = torch.randn(256 * 40, 256)
Y = (X[:, :16] @ torch.randn(16, 16)).argmax(1)
loader = DataLoader(TensorDataset(X, Y), batch_size=256, shuffle=True)
model = nn.Sequential(
    nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 16)
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, opt, loader = accelerator.prepare(model, opt, loader)
for epoch in range(3):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
    accelerator.print(epoch, loss.item())
