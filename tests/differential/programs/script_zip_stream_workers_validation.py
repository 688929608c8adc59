"""Two loaders zipped under itertools.islice: an IterableDataset that computes features with torch
in two worker processes (sharded by worker_init_fn), and an in-memory TensorDataset; validation
every 10 steps under torch.no_grad with .item(). Issue 26: the workers fix went to both loaders,
and the GPU estimate counted the dataset's own ops as kernels."""
import itertools
import math
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset, get_worker_info

torch.manual_seed(0); random.seed(0); np.random.seed(0)
torch.set_num_threads(1)


class Stream(IterableDataset):
    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        g = torch.Generator().manual_seed(self.start)
        for i in range(self.start, self.end):
            x = torch.randn(64, generator=g)
            x = torch.stack([torch.fft.rfft(x).abs()[:16] for _ in range(4)]).mean(0)
            yield x, i % 3


def shard(worker_id):
    info = get_worker_info()
    ds = info.dataset
    per = math.ceil((ds.end - ds.start) / info.num_workers)
    ds.start, ds.end = ds.start + worker_id * per, min(ds.start + (worker_id + 1) * per, ds.end)


stream = DataLoader(Stream(0, 1024), batch_size=16, num_workers=2, worker_init_fn=shard)
aux = TensorDataset(torch.randn(512, 16), torch.randint(0, 3, (512,)))
aux_loader = DataLoader(aux, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1))
val = [(torch.randn(16, 16), torch.randint(0, 3, (16,))) for _ in range(4)]
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
seen = []
for step, ((xa, ya), (xb, yb)) in enumerate(itertools.islice(zip(stream, aux_loader), 30)):  # noqa: B905
    loss = nn.functional.cross_entropy(model(torch.cat([xa, xb])), torch.cat([ya, yb]))
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen.append(int(ya[0]))
    if step % 10 == 0:
        model.eval()
        with torch.no_grad():
            v = sum(nn.functional.cross_entropy(model(vx), vy).item() for vx, vy in val) / len(val)
        model.train()
        print(f"step {step} val {v:.4f}")
print("labels", seen)

from tests.differential.probe import dump  # noqa: E402

dump(globals())

REPORT_HAS = [r"Steps: 30 \(step ends at: optimizer\).*\(batch 32\)"]
TIMEOUT_S = 180
