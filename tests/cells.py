"""Training cells used by the tests: real PyTorch loops on synthetic data, CPU-sized.

Each is the body a user would put under ``%%gpucheck``; the setup strings build what an
earlier notebook cell would have defined.
"""

from __future__ import annotations

SETUP = """
import time, torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset
torch.manual_seed(0)
torch.set_num_threads(1)

class SlowDataset(Dataset):
    '''A __getitem__ that sleeps 60 ms a batch: a slow decode/augment step.'''
    def __init__(self, n=64, d=32):
        self.x = torch.randn(n, d); self.y = torch.randn(n, 1)
    def __len__(self): return len(self.x)
    def __getitem__(self, i):
        if i % 8 == 0: time.sleep(0.060)
        return self.x[i], self.y[i]

def mlp(d=32, hidden=256):
    return nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, 1))

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(32 * 16, 10)
    def forward(self, x):
        return self.head(self.conv(x).flatten(1))
"""

MLP_LOADER = """
model = mlp(256, 2048); opt = torch.optim.AdamW(model.parameters(), lr=1e-3); loss_fn = nn.MSELoss()
loader = DataLoader(TensorDataset(torch.randn(2048, 256), torch.randn(2048, 1)), batch_size=128, num_workers={workers})
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""

CNN_LOADER = """
model = SmallCNN(); opt = torch.optim.SGD(model.parameters(), lr=0.01); loss_fn = nn.CrossEntropyLoss()
loader = DataLoader(TensorDataset(torch.randn(640, 3, 32, 32), torch.randint(0, 10, (640,))), batch_size=64, num_workers={workers})
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""

# Input-bound: every batch waits 60 ms for __getitem__ in the main process, against ~1 ms of
# model work a step: >10x what a busy machine makes of the model's part (3-10x slower with every
# core taken), so the planted cause dominates whatever the load.
SLOW_INPUT = """
model = mlp(); opt = torch.optim.SGD(model.parameters(), lr=0.01); loss_fn = nn.MSELoss()
loader = DataLoader(SlowDataset(n=96), batch_size=8, num_workers=0)
for x, y in loader:
    loss = loss_fn(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""

# Compute-heavy with pre-loaded tensors: no input wait at all.
COMPUTE_HEAVY = """
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = torch.randn(256, 512); ys = torch.randn(256, 512)
for step in range(12):
    loss = ((model(xs) - ys) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""

# Manual SGD, no optimizer object, no DataLoader.
MANUAL_SGD = """
model = mlp(); xs = torch.randn(64, 32); ys = torch.randn(64, 1)
for step in range(10):
    loss = ((model(xs) - ys) ** 2).mean()
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.01)
"""

# Gradient accumulation: 4 micro-batches per optimizer step.
GRAD_ACCUM = """
model = mlp(); opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(512, 32), torch.randn(512, 1)), batch_size=16)
for i, (x, y) in enumerate(loader):
    loss = ((model(x) - y) ** 2).mean() / 4
    loss.backward()
    if (i + 1) % 4 == 0:
        opt.step(); opt.zero_grad()
"""

# Closure optimizer: LBFGS calls forward/backward several times inside each step.
LBFGS = """
model = mlp(); opt = torch.optim.LBFGS(model.parameters(), max_iter=4)
xs = torch.randn(64, 32); ys = torch.randn(64, 1)
def closure():
    opt.zero_grad()
    loss = ((model(xs) - ys) ** 2).mean()
    loss.backward()
    return loss
for step in range(9):
    opt.step(closure)
"""

# Inference: no backward, no optimizer.
INFERENCE = """
model = mlp().eval()
loader = DataLoader(TensorDataset(torch.randn(320, 32)), batch_size=32)
outs = []
with torch.no_grad():
    for (x,) in loader:
        outs.append(model(x).sum())
"""


def measured(ip, body: str):
    """The report of one real ``%%gpucheck`` run of ``body`` in the test shell ``ip`` (quiet,
    kept in ``rep``, sampled every 50 ms); the cell must succeed."""
    ip.user_ns.pop("rep", None)
    res = ip.run_cell(f"%%gpucheck -q -o rep -i 0.05\n{body}")
    assert res.success
    return ip.user_ns["rep"]
