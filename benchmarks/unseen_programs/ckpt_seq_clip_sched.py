"""``checkpoint_sequential`` over a stack of residual MLP blocks, gradient clipping and a
warm-up ``LambdaLR`` stepped per batch (unseen round 15): 4 blocks of width 256 in an
``nn.Sequential`` run as ``checkpoint_sequential(self.blocks, 4, h, use_reentrant=False)``
in forward; ``clip_grad_norm_(..., 1.0)`` before ``opt.step()``, ``sched.step()`` after it; a
TensorDataset loader, batch 64, AdamW, 40 steps. The model is 1 MB: memory is not scarce.

Class: activation checkpointing by segments (``checkpoint_sequential``, not ``checkpoint``
per block) where memory is plentiful, beside clipping and a per-batch scheduler. Written
before the first run: each backward reruns the forward of every segment, so the step does
~4/3 of the work it would without it (about 1.3x to win by dropping it). The product should
offer to drop the checkpointing, at the ``checkpoint_sequential`` line (a patch that calls
``self.blocks(h)``), with a bound near 1.3x, and say nothing against the clip or the scheduler.

Seen 2026-12-06 (main 525b292, load 17-19, 94% waiting): UNKNOWN, too busy to judge (right),
40 steps (right), "[medium] Activation checkpointing recomputes the forward while memory has
room (0.59x-1.14x, uncertain) ... at line 40" with the patch ``h =
torch.nn.Sequential(*self.blocks)(h)`` (right, runs), nothing against the clip or the
scheduler (right). Under load the run took 527 s of wall (10 s a step); plain ~20 s of user CPU.

Shrunk in round 16 (helper unseen16s): 8 blocks of width 384 and batch 128 took 527 s under
load; now 4 blocks of 256, batch 64, the same 40 steps and lines (the Seen above is of the
larger model).
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

    def forward(self, h):
        return h + self.ff(self.norm(h))


class Deep(nn.Module):
    def __init__(self, d: int = 256, depth: int = 4) -> None:
        super().__init__()
        self.inp = nn.Linear(64, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(depth)])
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        h = self.inp(x)
        h = checkpoint_sequential(self.blocks, 4, h, use_reentrant=False)
        return self.out(h)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    X = torch.randn(2560, 64)
    Y = X[:, :10].argmax(1)
    loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
    model = Deep().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    print(f"loss {loss.item():.3f}")
