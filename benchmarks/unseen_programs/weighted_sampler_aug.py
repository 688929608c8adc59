"""A ``WeightedRandomSampler`` (class-balanced, replacement=True) over a map-style image Dataset
whose ``__getitem__`` augments in numpy per item (unseen round 13): pad-and-random-crop, a flip,
a brightness/contrast jitter and a per-channel normalise on a 3x48x48 uint8 image; no workers.

Class: input-bound on per-item host work behind a sampler the fix must keep. Written before the
first run: a practitioner expects "input-bound, add workers" with the ``sampler=`` kept (a fix
that swapped it for ``shuffle=True`` would drop the class balancing).

Seen 2026-12-06 (main bce4bf9, load 21-24, the steps waited 94% for a core): UNKNOWN, too busy to
judge ("as read cpu-only; where that wait fell decides between it and input-bound"); data wait
6% as read (8 ms of a 137 ms own step: the two convolutions on 48x48 are the work at this size,
my premise of input-bound was wrong here); "[info] no core is spare for workers", naming line 36
of ``Images.__getitem__`` (the jitter line) as most of the wait; no workers fix offered, so no
sampler to keep. Right for this machine: with 2 cores at load 20 workers cannot help.
"""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

MEAN = np.array([0.5, 0.5, 0.5], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.25, 0.25, 0.25], dtype=np.float32).reshape(3, 1, 1)


class Images(Dataset):
    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.imgs = rng.integers(0, 256, (n, 3, 48, 48), dtype=np.uint8)
        # imbalanced labels: class 0 is 70% of the data
        self.y = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 6, n))
        self.rng = np.random.default_rng(1)

    def __len__(self) -> int:
        return len(self.imgs)

    def __getitem__(self, i: int):
        img = self.imgs[i].astype(np.float32) / 255.0
        img = np.pad(img, ((0, 0), (4, 4), (4, 4)), mode="reflect")
        top, left = self.rng.integers(0, 9, 2)
        img = img[:, top : top + 48, left : left + 48]
        if self.rng.random() < 0.5:
            img = img[:, :, ::-1]
        b, c = self.rng.uniform(0.8, 1.2, 2)
        img = np.clip((img - img.mean()) * c + img.mean() * b, 0.0, 1.0)
        img = (img - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32)), int(self.y[i])


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 6),
        )

    def forward(self, x):
        return self.f(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    ds = Images(1536)
    counts = np.bincount(ds.y, minlength=6)
    weights = torch.as_tensor(1.0 / counts[ds.y], dtype=torch.double)
    sampler = WeightedRandomSampler(weights, num_samples=len(ds), replacement=True)
    loader = DataLoader(ds, batch_size=64, sampler=sampler)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(1):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")
