"""SimCLR-style contrastive training with the two augmented views built in the training step,
one image at a time in Python (unseen round 13): the loader yields raw uint8 images from a
TensorDataset; the loop does ``torch.stack([augment(img) for img in x])`` twice (random crop,
flip, colour jitter with per-image torch ops), then an NT-Xent loss over 2B embeddings.

Class: per-sample augmentation in the loop's main thread, not in the Dataset/workers. Written
before the first run: a practitioner sees ~128 tiny augment calls a step (6-8 ops each) and
expects host-bound, the two ``torch.stack([augment(img) ...])`` lines named, and the advice to
augment the whole batch at once (or move it into a Dataset with workers).

Measured by hand (variants: ``augment_batch`` doing the crop by gather, flip/gray by where, the
jitter broadcast over the batch; interleaved, process CPU time after imports, 3 rounds, load
17-25): as is 26.1 / 27.1 / 26.3 s, batched 17.2 / 18.8 / 17.7 s: **1.49x** (medians).

Seen 2026-12-06 (main 3f68e8f, load 15-18, 91% wait): UNKNOWN, too busy to judge (right, as
read cpu-only or host-bound); no finding: the augment lines were not among the three hot lines
(the forward 37%, backward 34%). The GPU estimate read "256.0 read(s) of device values per step:
host and GPU take turns" from the ``if torch.rand(()) < 0.5`` tests (two a sample): those
tensors are made on the host and stay there on a GPU (the loop never moves ``x`` before the
augment), so they are no device reads; the trace cannot tell. Open (round 13).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def augment(img: torch.Tensor) -> torch.Tensor:
    img = img.float() / 255.0
    i, j = torch.randint(0, 9, (2,)).tolist()
    img = nn.functional.pad(img, (4, 4, 4, 4), mode="reflect")[:, i : i + 32, j : j + 32]
    if torch.rand(()) < 0.5:
        img = img.flip(-1)
    jitter = 1.0 + 0.4 * (torch.rand(3, 1, 1) - 0.5)
    img = (img * jitter).clamp(0, 1)
    if torch.rand(()) < 0.2:
        img = img.mean(0, keepdim=True).expand(3, -1, -1)
    return (img - 0.5) / 0.25


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, t: float = 0.2) -> torch.Tensor:
    z = nn.functional.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / t
    n = z1.shape[0]
    sim.fill_diagonal_(float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return nn.functional.cross_entropy(sim, target)


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.proj = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, x):
        return self.proj(self.backbone(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    imgs = torch.randint(0, 256, (1280, 3, 32, 32), dtype=torch.uint8)
    loader = DataLoader(TensorDataset(imgs), batch_size=64, shuffle=True, drop_last=True)
    model = Encoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(1):
        for (x,) in loader:
            v1 = torch.stack([augment(img) for img in x])
            v2 = torch.stack([augment(img) for img in x])
            loss = nt_xent(model(v1), model(v2))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")
