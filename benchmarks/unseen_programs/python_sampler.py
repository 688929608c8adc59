"""A class-balancing Sampler whose ``__iter__`` draws each index with ``random.choices`` over
all weights (unseen round 10).

Class: the DataLoader's time is the sampler's, not the dataset's. ``random.choices(range(n),
weights=w)`` rebuilds the cumulative weights, O(n), for every single index; the sampler runs in
the main process whatever ``num_workers`` is (workers only call ``__getitem__``), so the loop
waits on it. A practitioner knows: ``WeightedRandomSampler(w, num_samples)`` (one
torch.multinomial for the epoch) or ``random.choices(..., k=n)`` once; more workers do nothing
here. The product should say input-bound with the time in the sampler's ``__iter__`` and not
offer workers (or, if it does, --try-fixes should find them of no effect).

Seen 2026-12-05 (unseen round 10, load 11-18): "[high] The step waits for data already in
memory ... index whole batches: BatchSampler(RandomSampler(ds))" (a TensorDataset's per-sample
reads blamed; the advice drops the user's balancing sampler), hot line 39 (the sampler's
random.choices) 24-40% of the samples; --try-fixes: a bigger batch x2 verified 1.14x per sample.
Now (1721d83 and after, 2026-12-05, load 3-7), with the sampler's time in the stacks (the
default window's 12 samples once, `--lines all` 250): "[high] The step waits for the
DataLoader's sampler: its __iter__ runs in the main process (up to 3.02x-5.20x): Keep
num_workers=0 and keep your sampler: make the sampler's `BalancedSampler.__iter__` (its def
line; its `yield random.choices(...)` line) draw the epoch's indices in one call instead of one
call per index", evidence "held 99 of the 113 stack samples of the data wait"; the bound is
Amdahl over the sampler's part of the wait only. A window of under 5 samples (3 at load 3.5)
names no sampler: the in-memory advice then wraps it (`sampler=BatchSampler(BalancedSampler(
weights, 2048), batch_size=32, drop_last=False), batch_size=None`). No advice drops the
sampler; bigger_batch (tiny-ops finding: batch_size=64, lr x2) keeps sampler= and refuses,
naming it, a loader whose batches come from a batch_sampler=.
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
random.seed(0)

N = 6000
X = torch.randn(N, 64)
Y = torch.randint(0, 4, (N,))
Y[: N // 2] = 0  # class 0 is half the data: balance it
counts = torch.bincount(Y, minlength=4).tolist()
weights = [1.0 / counts[int(c)] for c in Y]


class BalancedSampler(Sampler[int]):
    def __init__(self, weights: list[float], num_samples: int) -> None:
        self.weights = weights
        self.num_samples = num_samples

    def __iter__(self):
        population = range(len(self.weights))
        for _ in range(self.num_samples):
            yield random.choices(population, weights=self.weights)[0]

    def __len__(self) -> int:
        return self.num_samples


loader = DataLoader(TensorDataset(X, Y), batch_size=32, sampler=BalancedSampler(weights, 2048))
model = nn.Sequential(
    nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _epoch in range(4):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print(loss.item())
