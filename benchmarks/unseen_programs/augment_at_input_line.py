"""A CPU loop at the input line: per-sample Python batches beside a deep stack of tiny layers.

Class of problem (issue 26, verdicts that flip under load): the step's data wait (a Dataset's
__getitem__ doing list arithmetic per sample, no workers; a batch of 32 takes ~1 ms, more than
a worker's handoff, so it is not counted as in-memory host work) is about a fifth of the step,
beside 18 tiny Linear layers (host overhead over half the step). Which side of the 20% input
line the data share reads decides input-bound or host-bound. On a machine whose other programs
hold the cores (load 3-7x the cores) the loop's thread waits for a core most of each step, the
time slices land in either phase, and main read input-bound in some runs and host-bound in
others. What the product should say: on a quiet machine, the verdict its shares give; where
the steps waited for a core half their time or more and that wait moves the data share across
its line, "too busy to judge" with the wait measured (rerun on a quieter machine), never a
different bound from run to run.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Jittered(Dataset):
    def __init__(self, n=2048, d=48):
        self.rows = [[float(i * d + j) / (n * d) for j in range(d)] for i in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        # per-sample Python augmentation: a few passes over the row
        mean = sum(row) / len(row)
        row = [(v - mean) * 1.5 for v in row]
        row = [v if abs(v) < 2.0 else 2.0 for v in row]
        return torch.tensor(row), torch.tensor([mean])


layers = [m for _ in range(16) for m in (nn.Linear(64, 64), nn.ReLU())]
model = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), *layers, nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in DataLoader(Jittered(), batch_size=32, shuffle=True):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
