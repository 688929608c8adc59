"""Images kept as PNG bytes and decoded and augmented with PIL per item (unseen round 16): the
Dataset holds 1024 encoded 64x64 RGB PNGs; ``__getitem__`` does ``Image.open(io.BytesIO(b))
.convert("RGB")``, a random crop + ``resize((48, 48), BILINEAR)``, a random
``ImageOps.mirror``, a small ``rotate``, then ``np.asarray`` -> float tensor, normalised.
A DataLoader with batch 32, no workers, shuffle; a 2-conv net, SGD, 40 steps.

Class: the common image pipeline on PIL without torchvision, in the main process. Planted: the
decode + crop/resize/rotate costs ~0.3-0.5 ms an image (~10-15 ms a batch) against a
~3-6 ms step of a small conv net: input-bound, data wait ~60-80% of the step on a quiet
machine. Written before the first run: INPUT-BOUND (or too busy to judge under load, where
the workers advice must weigh the free cores), the wait named in ``__getitem__``'s PIL lines,
a workers fix on the ``DataLoader(`` line; 40 steps.

Seen 2026-12-06 (main ff4e6cb, load 24, 95% waiting): UNKNOWN, too busy to judge (right), 40
steps (right), data 8% of the step as read (0-100% with the wait anywhere), "[low] The step
waits for data ... (0.57x-2.33x): Use num_workers=2 ... Line 42 in `PngImages.__getitem__`
makes most of each item". My premise was wrong: the two convolutions' backward (63% of the
samples) outweigh the PIL work (~10-15 ms a batch); the run is not input-bound.
``--try-fixes --try-budget 150`` (load 22-25): workers "Not offered: 0.0 of 2 core(s) were
free" (a computing loader: the refusal stays after 3bdadd9), nothing to try.
"""

import io
import random

import numpy as np
import torch
from PIL import Image, ImageOps
from torch import nn
from torch.utils.data import DataLoader, Dataset


class PngImages(Dataset):
    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.blobs, self.labels = [], rng.integers(0, 10, n).tolist()
        for _ in range(n):
            arr = rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)
            buf = io.BytesIO()
            Image.fromarray(arr).save(buf, format="PNG")
            self.blobs.append(buf.getvalue())
        self.mean = torch.tensor([0.5, 0.5, 0.5]).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int):
        img = Image.open(io.BytesIO(self.blobs[i])).convert("RGB")
        a, b = random.randint(0, 12), random.randint(0, 12)
        img = img.crop((a, b, a + 52, b + 52)).resize((48, 48), Image.BILINEAR)
        if random.random() < 0.5:
            img = ImageOps.mirror(img)
        img = img.rotate(random.uniform(-10, 10))
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return (x - self.mean) / 0.25, self.labels[i]


random.seed(0)
torch.manual_seed(0)
loader = DataLoader(PngImages(1280), batch_size=32, shuffle=True)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(32, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.3f}")
