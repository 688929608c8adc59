"""accelerate over a text dataset that tokenizes in ``__getitem__`` (unseen round 21,
frameworks): raw strings of 120 words, a Python word->id dict lookup and a bag-of-words
``torch.bincount`` per sample, ``num_workers=0``, a bag-of-words MLP, batch 64, the loader
``accelerator.prepare``d (a ``DataLoaderShard``), 2 epochs.

Class: per-sample Python preprocessing redone every epoch in the loop's own thread, behind a
framework's loader wrapper. By hand the fix is to tokenize once, before training (the dataset
keeps tensors); the product should name the data wait and its place (``__getitem__``), and any
patch must reach the user's ``DataLoader(...)`` call (accelerate rebuilds the loader from it).

Seen 2026-12-07 on main f90c6ff (load 18): UNKNOWN (too busy, 88%); data 29%, optimizer 62%;
fused Adam first (measured 2.00x, above its 1.43x top); the wait named at ``__getitem__``'s line
at [info] with "cache items" (workers refused on a busy machine). By hand caching 1.62x.
"""

import random

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)
random.seed(0)
WORDS = [f"w{i}" for i in range(2000)]
VOCAB = {w: i for i, w in enumerate(WORDS)}


class Texts(Dataset):
    def __init__(self, n):
        self.texts = [" ".join(random.choices(WORDS, k=120)) for _ in range(n)]
        self.labels = [hash(t) % 3 for t in self.texts]

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        ids = torch.tensor([VOCAB.get(w, 0) for w in self.texts[i].lower().split()])
        bow = torch.bincount(ids, minlength=len(VOCAB)).float()
        return bow / bow.sum(), self.labels[i]


accelerator = Accelerator(cpu=True)
model = nn.Sequential(nn.Linear(2000, 256), nn.ReLU(), nn.Linear(256, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(Texts(4096), batch_size=64, shuffle=True)
model, opt, loader = accelerator.prepare(model, opt, loader)
for _epoch in range(2):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
accelerator.print(f"loss {loss.item():.3f}")
