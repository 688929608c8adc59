"""A step budget driven by ``itertools.cycle(loader)`` (unseen round 14): ``it = cycle(loader)``,
then ``for step in range(160): x, y = next(it)``. The loader (shuffle=True, no workers) reads a
map-style Dataset that normalises and randomly crops a 3x40x40 image per item in torch; 32
batches an epoch, so the budget runs 5 passes. A small conv net, SGD + momentum,
a cosine LR stepped per step.

Class: ``itertools.cycle`` keeps every batch of its first pass and replays them: the loader is
read only during the first 32 steps (its shuffling and augmentation stop after that, a known
bug of this idiom; it also keeps the whole epoch's batches in memory). Written before the first
run: the data wait is the first pass only, so the steady steps have no data wait; the product
should not call the run input-bound from later steps, nor offer workers for a wait that is
gone after step 32 (they would help only the first 32 steps) - or, better, say the cycle
replays cached batches.

Seen 2026-12-06 (main 278266d, load 24-26, 96% of the steps' time waiting for a core): UNKNOWN,
too busy to judge (right), 160 steps, no input finding (right). My premise was wrong: the
first pass's data wait is small here too (the step clock read 0.8-1.9 ms a batch for the 32
uncached steps, 0 after; the convolutions are the work), so the cycle's caching changes no
cost worth a finding; the product says nothing of the replayed batches (a correctness matter,
not a speed one: not its job). 47 s of user CPU plain (2 threads, loaded).
"""

import itertools

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Crops(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 256, (n, 3, 40, 40), dtype=torch.uint8, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.mean = torch.tensor([0.5, 0.5, 0.5]).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        img = self.x[i].float() / 255.0
        a, b = torch.randint(0, 9, (2,)).tolist()
        img = img[:, a : a + 32, b : b + 32]
        return (img - self.mean) / 0.25, self.y[i]


torch.manual_seed(0)
loader = DataLoader(Crops(1024), batch_size=32, shuffle=True, drop_last=True)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.BatchNorm2d(16),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.BatchNorm2d(32),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(32, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
MAX_STEPS = 160
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, MAX_STEPS)
it = itertools.cycle(loader)
for _step in range(MAX_STEPS):
    x, y = next(it)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
print(f"loss {loss.item():.3f}")
