"""Two domains trained round-robin (unseen round 8): `for (xa, ya), (xb, yb) in zip(loader_a,
loader_b)`, each loader over a Dataset whose __getitem__ does a numpy augmentation, no
workers. Class: two loaders a step; a workers fix must reach both. The product should say
input-bound. Seen 2026-12-05 (load 13): input-bound 56% data over the run (right; the step
clock joined both reads into one step); workers not offered ("no core is spare" at load 13). Seen 14:51-15:55 (oldopen): plain and
--try-fixes give the same offer for one run; it flips with load (offered at load 21-25, data
58-88%; "no core is spare" at load 10, data 47%); by hand at load 7-9, 2 workers on each loader:
1.25x, 1.47x, 0.93x. Since 2026-12-05 18:30 (zipspare) the offer is decided on the middle of
the step with no overlap and packed: offered in every run at load 12-21 and first in line for
the cores (the middle 0.73-0.91 of today's step; main refused 4 of those 9 figures); the
no-overlap end is the range's low end, under 1x where it says so. --try-fixes at load 13-16:
1.14x (0.72x-1.81x, undecided) in 0.85x-2.22x. Fused AdamW (zipspare, load 13-17): 1.25x
(1.17x-1.35x) over its 0.95x-1.21x; the excess is glibc page faults the unfused update's
full-size temporaries cause (in the step and in the next backward's fresh gradients), not the
update's arithmetic: benchmarks/fused_update_faults.py (fusedzip: x1.29 default, x1.09 with
the malloc thresholds fixed). Since 2026-12-06 01:00 (wshare) the workers are not offered where
the machine's cores are busy and the loop's thread computes ("may not help on this machine
now": the CPU its session got leaves 0.66x-0.74x of today's step), 6 of 6 runs at load 24-29;
they were offered with a low end under 1x and measured 0.84x-1.63x."""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Images(Dataset):
    def __init__(self, n, seed):
        r = np.random.default_rng(seed)
        self.x = r.standard_normal((n, 3, 40, 40)).astype(np.float32)
        self.y = r.integers(0, 5, n)
        self.r = r

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = self.x[i]
        dy, dx = self.r.integers(0, 9, 2)
        img = img[:, dy : dy + 32, dx : dx + 32]
        if self.r.random() < 0.5:
            img = img[:, :, ::-1]
        img = img + 0.05 * self.r.standard_normal(img.shape).astype(np.float32)
        img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(np.ascontiguousarray(img)), int(self.y[i])


loader_a = DataLoader(Images(1536, 1), batch_size=32, shuffle=True)
loader_b = DataLoader(Images(1536, 2), batch_size=32, shuffle=True)
backbone = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 128), nn.ReLU())
head_a, head_b = nn.Linear(128, 5), nn.Linear(128, 5)
params = list(backbone.parameters()) + list(head_a.parameters()) + list(head_b.parameters())
opt = torch.optim.AdamW(params, lr=1e-3)
for epoch in range(2):
    for (xa, ya), (xb, yb) in zip(loader_a, loader_b, strict=False):
        la = nn.functional.cross_entropy(head_a(backbone(xa)), ya)
        lb = nn.functional.cross_entropy(head_b(backbone(xb)), yb)
        loss = la + lb
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item())
