"""A GPU-bound loop: a float32 MLP, 4096 wide, batch 4096, no sync in the step.

On an H200 its steps take 31.7 ms on the GPU while the host issues them in 2.7 ms: the host runs
ahead until CUDA's launch queue is full. The fixes that should deliver: bf16 autocast, TF32.
Usage: python gpu_bound.py [STEPS]  (on the CPU: a 256-wide stand-in, for the kit's dry run).
"""

import sys

import torch
from torch import nn

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 120
device = "cuda" if torch.cuda.is_available() else "cpu"
width = 4096 if device == "cuda" else 256
model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(width, width), nn.ReLU())])
model = model.to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(width, width, device=device)
for _step in range(STEPS):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", loss.item())
