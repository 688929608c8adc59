"""A training loop the user already annotated with ``torch.autograd.profiler.record_function``
(unseen round 14): ``with record_function("data"):`` around ``next(it)``, then "forward",
"backward" and "optimizer" blocks around the step's parts, and a DataLoader whose Dataset
builds each item in Python (a 64-float feature row from a per-item list computation), no
workers; a 4-layer MLP, Adam.

Class: user profiler annotations in the step. Written before the first run: ``record_function``
without a profiler is nearly free; under ours its ranges appear in the trace as user
annotations. The product must not take the user's ranges for its own phases or count them as
work twice (a "data" range holding the DataLoader's wait; a "forward" range around the model),
must not step aside as if the user had started a profiler (they did not: no profiler runs), and
should still say input-bound if the data wait is the larger part.

Seen 2026-12-06 (main 278266d, load 24-27, 96% waiting): UNKNOWN, too busy to judge (right:
cpu-only or input-bound as read), 32 steps. The user's ranges broke nothing: phases data 2.3%
(3.1 ms a step) against the step clock's 3% (right), forward/backward/optimizer painted from
the operators, not from the user's "forward"/"backward" ranges; no "a profiler of yours"
step-aside (right: none runs). My premise (data the larger part) was wrong: the 512-wide MLP's
backward and Adam are 84% of the step. "[medium] The Adam step updates each parameter tensor
separately (1.11x-1.22x): fused=True" (8 tensors; plausible). GPU estimate "3.0x ... GPU
compute 42.60 ms" for about 0.1 GFLOP a step: the CPU operators' time of a loaded run (no
shapes recorded) bounds the work far above it; open (see benchmarks/README).
"""

import math

import torch
from torch import nn
from torch.autograd.profiler import record_function
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __len__(self) -> int:
        return 2048

    def __getitem__(self, i: int):
        row = [math.sin(i * 0.37 + k) * math.cos(k * 0.11) for k in range(64)]
        for _ in range(6):
            row = [0.9 * v + 0.1 * math.tanh(v * 3) for v in row]
        return torch.tensor(row), i % 7


torch.manual_seed(0)
loader = DataLoader(Rows(), batch_size=64, shuffle=True)
model = nn.Sequential(
    nn.Linear(64, 512),
    nn.ReLU(),
    nn.Linear(512, 512),
    nn.ReLU(),
    nn.Linear(512, 256),
    nn.ReLU(),
    nn.Linear(256, 7),
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _epoch in range(1):
    it = iter(loader)
    for _step in range(len(loader)):
        with record_function("data"):
            x, y = next(it)
        with record_function("forward"):
            loss = nn.functional.cross_entropy(model(x), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with record_function("optimizer"):
            opt.step()
print(f"loss {loss.item():.3f}")
