"""Gradient accumulation under tqdm(enumerate(loader)) with a scheduler, fed by a 0-worker
loader whose items are slow: every batch is fetched below tqdm's __iter__ frame. The report
must name the loader, and must not call that fetch time the progress bar's (issue 26: it said
"[high] The framework logs or draws progress on every step" and advised a shorter mininterval
than the bar's own 5 s)."""
import io
import random
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

torch.manual_seed(0); random.seed(0); np.random.seed(0)
torch.set_num_threads(1)
ACCUM = 2


class Slow(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.001)  # a decode
        return torch.randn(16), i % 4


model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50)
loader = DataLoader(Slow(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1))
_bar_out = io.StringIO()  # the bar's frames run; its rates (timing) stay out of the comparison
opt.zero_grad()
for i, (x, y) in tqdm(enumerate(loader), total=120, mininterval=5, file=_bar_out):
    loss = nn.functional.cross_entropy(model(x), y) / ACCUM
    loss.backward()
    if (i + 1) % ACCUM == 0:
        opt.step()
        sched.step()
        opt.zero_grad()
    if i + 1 >= 120:
        break
print(f"lr {sched.get_last_lr()[0]:.6f}")

from tests.differential.probe import dump  # noqa: E402

dump(globals())

REPORT_HAS = [
    r"the DataLoader loads batches in the main process",
    r"\A(?![\s\S]*draws progress on every step)",
]
