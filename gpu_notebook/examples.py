"""Built-in example training loops (CPU-sized), used by ``gpucheck demo`` and the notebooks."""

from __future__ import annotations

# A DataLoader whose __getitem__ decodes slowly (a 60 ms sleep per 8 samples): input-bound, and
# still so on a busy machine (the sleep does not slow down with the cores; the model does).
INPUT_BOUND = """
import time, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

class SlowDecodeDataset(Dataset):
    def __init__(self, n=192, d=64):
        self.x, self.y = torch.randn(n, d), torch.randn(n, 1)
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        if i % 8 == 0:
            time.sleep(0.060)  # stands for JPEG decoding / augmentation
        return self.x[i], self.y[i]

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(SlowDecodeDataset(), batch_size=8, num_workers=0)
for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

# Big matmuls on pre-loaded tensors: the time goes to compute.
COMPUTE_BOUND = """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs, ys = torch.randn(256, 1024), torch.randn(256, 1024)
for step in range(15):
    loss = nn.functional.mse_loss(model(xs), ys)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

EXAMPLES: dict[str, str] = {"input-bound": INPUT_BOUND, "compute-bound": COMPUTE_BOUND}
