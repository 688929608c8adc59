"""Activation checkpointing on a CPU MLP with memory to spare (reentrant checkpoint per block).

Class: a fix that removes a mechanism (``checkpointing_off``) must bound its gain by every cost of
that mechanism the trace shows. Each residual block runs under
``torch.utils.checkpoint.checkpoint(..., use_reentrant=True)``: the backward reruns each block's
forward (under ``CheckpointFunctionBackward``), and the forward pays the checkpoint's own wrapper
(the ``CheckpointFunction`` record around each block: RNG state saved, inputs detached, the
autograd Function's bookkeeping), and the backward node its own (RNG restored, a nested
backward call).

The product should say: activation checkpointing recomputes the forward while memory has room,
with the split of what turning it off removes (recompute X%, the checkpoint's own overhead Y% of
the step), offer ``checkpointing_off`` (call the block directly), and its "up to" bound must hold
the measured speedup. The ledger's first script of this class read "up to 1.23x" for a measured
1.25x (issue 26). This one, `gpucheck run -q --try-fixes 30 --try-budget 150`, 2 cores at load
12-27 (2026-12-05, i26ckpt): main 56649a9 up to 1.18x (the recompute alone), measured 1.38x
(1.23x-1.55x); with the checkpoint's own cost (24264ce) up to 1.90x / 1.61x for 1.63x / 1.53x;
at load 25 the 3-step trace is ten times the step and the bound wanders (1.15x for 1.46x; -s 20:
1.41x for 1.55x). Thread time (no load in it), 20 traced steps: up to 1.46x, 1.39x.
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, dim: int = 128, depth: int = 8) -> None:
        super().__init__()
        self.inp = nn.Linear(32, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.out = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for blk in self.blocks:
            h = h + checkpoint(blk, h, use_reentrant=True)
        return self.out(h)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
xs, ys = torch.randn(64, 32), torch.randint(0, 10, (64,))
total = 0.0
for _ in range(300):
    loss = nn.functional.cross_entropy(model(xs), ys)
    opt.zero_grad()
    loss.backward()
    opt.step()
    total += loss.item()
print(f"mean loss {total / 300:.4f}")
