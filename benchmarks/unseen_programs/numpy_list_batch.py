"""Each step's batch made by ``torch.tensor([...list of numpy arrays...])`` in the loop (unseen
round 10).

Class: the batch assembled on the host in the training loop, without a DataLoader, through
torch's slow path. The data is a list of 20000 float32 numpy rows; each step picks 64 indices
with numpy and calls ``torch.tensor([rows[i] for i in idx])``, which walks every element of
every array in Python (torch itself warns "Creating a tensor from a list of numpy.ndarrays is
extremely slow"). A practitioner knows: ``torch.from_numpy(np.stack(...))`` or, better, one
tensor made before the loop and indexed per step (``X[idx]``). The product should say the step
waits on its own batch making (input work at that line, its share), and offer stacking /
pre-converting; workers do not apply (there is no loader) and a bigger batch only scales it.

Seen 2026-12-05 (unseen round 10, load 12-16): host-bound, "the ops are too small": torch.compile
(up to 2.61x-3.32x) and fused Adam offered, no word of the line (hot lines: 24-39% on it). Since
rules/list_tensors: "[medium] Each step builds a tensor from a list of numpy arrays, one number
at a time (up to 2.34x-2.51x)", patch torch.from_numpy(np.stack([...])); the patched script
measured 1.50x median of 4 interleaved execs (1.14, 1.81, 1.50, 1.38; load 13).
"""

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)

rows = [rng.standard_normal(96).astype(np.float32) for _ in range(20000)]
labels = rng.integers(0, 10, 20000)
model = nn.Sequential(
    nn.Linear(96, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _step in range(500):
    idx = rng.integers(0, len(rows), 64)
    x = torch.tensor([rows[i] for i in idx])
    y = torch.tensor(labels[idx])
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
