"""A fixed number of batches an epoch by ``enumerate(islice(loader, N))``, over a Dataset whose
items come from a slow store (unseen round 16): ``for epoch in range(3): for i, (x, y) in
enumerate(itertools.islice(loader, 24)):``. ``RemoteShards.__getitem__`` stands for a read
from object storage: ``time.sleep(0.0015)`` (1.5 ms of latency an item, no CPU) then a small
numpy decode; batch 32 through a DataLoader with no workers; a 2-layer MLP, SGD. 72 steps.

Class: a data wait that is latency, not CPU: the main process sleeps ~48 ms a batch while the
step's compute is ~1-3 ms. Planted: the run is input-bound, the data wait ~90% of the step
time even on a quiet machine; because the wait is sleeping (it needs no core), it stays
input-bound on a busy machine too, and workers fix it even where cores are scarce (sleeps
overlap: 4 workers, ~4x). Written before the first run: INPUT-BOUND with the data wait the
most of each step, 72 steps (islice stops each epoch's loader early: no more), the wait
named at the ``for ... islice`` line and in ``__getitem__``'s sleep, and a workers fix that
patches the ``DataLoader(`` line; not "too busy to judge" from the sleep (a sleeping thread
waits for no core).

Seen 2026-12-06 (main ff4e6cb, load 12-14, 80% waiting): UNKNOWN, too busy to judge (right: on
this machine each of the 32 wake-ups a batch waited for a core, 0.3-0.4 s a batch by hand), 72
steps (right), data 63% of the step (step clock); workers "[info] Not offered: num_workers=2
may not help on this machine now: 0.0 of 2 core(s) were free" and "vectorise its Python loop"
for line 37, the sleep (**wrong**: the data wait's stack samples were on a core 7-10% of their
own time; the process's CPU, torch's second thread spinning in backward, read the loop as
computing). Fixed by 3bdadd9 (``loading_on_core``): at load 31-35, "[high] The step waits for
data ... (0.51x-8.09x, uncertain): Use num_workers=2", patch on the ``DataLoader(`` line.
``--try-fixes --try-budget 150`` (load 22-25): 0.86x-6.71x offered, not tried (a run took 58 s);
by hand, the script plain against the patch, alternated: 167 vs 84 s, 60 vs 45 s (load 18-23).
"""

import itertools
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RemoteShards(Dataset):
    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.blobs = [rng.integers(0, 255, 128, dtype=np.uint8).tobytes() for _ in range(n)]
        self.labels = rng.integers(0, 5, n)

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int):
        time.sleep(0.0015)  # the store's round trip
        x = np.frombuffer(self.blobs[i], dtype=np.uint8).astype(np.float32) / 255.0
        return torch.from_numpy(x), int(self.labels[i])


torch.manual_seed(0)
loader = DataLoader(RemoteShards(4096), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 5))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
STEPS_PER_EPOCH = 24
for epoch in range(3):
    total = 0.0
    for i, (x, y) in enumerate(itertools.islice(loader, STEPS_PER_EPOCH)):  # noqa: B007
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.detach()
    print(f"epoch {epoch} mean loss {(total / (i + 1)).item():.3f}")
