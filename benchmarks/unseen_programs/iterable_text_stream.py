"""An IterableDataset streaming lines from a text file (unseen round 11): each line split on
whitespace in Python, each word looked up in a vocab dict, truncated/padded to 32 ids, batched by
a DataLoader (num_workers=0); a small embedding-bag classifier trains on it.

Class: input-bound by per-line Python tokenization in the dataset's ``__iter__``, no workers.
Written before the first run: a practitioner sees the model waiting on the reader (the
embedding bag is cheap; tokenizing 64 lines in Python is most of a step). The product should
say input-bound, name the tokenizing line(s) in ``__iter__`` (the split / dict lookups), and offer
DataLoader workers (an IterableDataset needs its shards split across workers with
get_worker_info, else each worker yields the whole file: the fix must say so or do it) or
pre-tokenizing the file once. It must not offer a BatchSampler over indices (an iterable
dataset has no indices) nor pin_memory as the main fix on a CPU run.

Seen on main e78d0f4 (load 15-16, 84-87% wait): UNKNOWN "too busy to judge" both runs; run 1
"[high] the DataLoader loads batches in the main process" with the right advice (split the
stream by get_worker_info first, then num_workers=2), run 2 "[info] no core is spare for
workers" (the workers advice flips with the load: the workers model is another helper's). The
tokenizing line in ``__iter__`` was never named (16-26 samples, all on the ``for`` line). Open.

Helper loadflip, 2026-12-06 (load 17-28, four runs each): the offer hung on the step two
workers leave, its middle, at 1.030, 0.989, 0.967, 0.997 of today's step: "no core is spare"
once, offered [low]/[medium]/[medium] three times. Offered now only where the middle is more than
5% (two runs of the same code) shorter: "no core is spare" in 4/4 at load 20-22 (0.981-1.084);
open: the data share itself moved between the two batches of runs (12-19% of the step's own
time at load 17-28, 24-40% at 20-22; own steps 8.8-15.4 ms against 4.0-5.9 ms for ~3.3 ms a step
on a core: the rest blocked, neither running nor waiting for a core), and the tokenizing line.

Helper scriptcell, 2026-12-06 (load 22): the data-wait finding names the dataset's own line
(rules/input_pipeline.dataset_time: the data wait's samples in the methods of the cell's
dataset class, a generator __iter__ as a __getitem__): "the dataset's own code holds 4 of the
data wait's 4 samples, the most on line 50 `for line in f:` in `LineStream.__iter__`", and the
advice "make each item cheaper (line 50 in `LineStream.__iter__` holds most of the wait: ...)".
With the window's few samples the sampler put them on the generator's ``for`` line (where the
file is read and the loop resumes). With --lines all (load 16-17): 32 of the data wait's 69
samples in ``__iter__``, the most on its ``yield torch.tensor(ids), int(label)`` line (the rest
is the DataLoader's own fetch and collate); the split / dict-lookup line was not the hottest.
"""

import os
import random
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

torch.manual_seed(0)
torch.set_num_threads(1)
random.seed(0)

WORDS = [f"w{i}" for i in range(2000)]
path = os.path.join(tempfile.gettempdir(), "u11_stream.txt")
with open(path, "w") as f:
    for _ in range(20000):
        n = random.randint(8, 60)
        label = random.randint(0, 1)
        f.write(f"{label}\t{' '.join(random.choice(WORDS) for _ in range(n))}\n")
vocab = {w: i + 2 for i, w in enumerate(WORDS)}


class LineStream(IterableDataset):
    def __init__(self, path, max_len=32):
        self.path = path
        self.max_len = max_len

    def __iter__(self):
        with open(self.path) as f:
            for line in f:
                label, text = line.rstrip("\n").split("\t")
                ids = [vocab.get(w.lower().strip(".,"), 1) for w in text.split()][: self.max_len]
                ids = ids + [0] * (self.max_len - len(ids))
                yield torch.tensor(ids), int(label)


emb = nn.EmbeddingBag(len(vocab) + 2, 64, mode="mean", padding_idx=0)
head = nn.Linear(64, 2)
opt = torch.optim.Adam(list(emb.parameters()) + list(head.parameters()), lr=1e-3)
loader = DataLoader(LineStream(path), batch_size=64)
for step, (ids, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(head(emb(ids)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 250:
        break
print(loss.item())
