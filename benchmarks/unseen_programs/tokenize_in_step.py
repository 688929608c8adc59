"""Raw strings tokenised in the training loop body (unseen round 19).

Class: the batch is a list of Python strings (a DataLoader over a list of dicts with the
default collate gives lists of str); the loop body lower-cases, splits, maps words through a
dict vocab, pads by hand and builds ``torch.tensor(ids)`` every step, on the main thread, then
a bag-of-words EmbeddingBag classifier trains on it. Written before the first run: the
tokenisation is most of the step (the model is tiny); moving it into the Dataset /
``collate_fn`` with ``num_workers`` (or pre-tokenising once) removes it. The product should
say host/input-bound and name the tokenisation lines as input work.

Seen 2026-12-07 (main dfe5334, load 12): HOST-BOUND (high), "the model's ops are too small:
batch x2 (1.18x-1.89x)", Python between operators 60%, unattributed 36%, hot lines 7 samples
all in ``opt.step()``; the tokenisation lines not named. By hand (the loop's process CPU):
1.17 s tokenising in the loop, 0.75 s with the batches pre-tokenised once (medians of 3): the
tokenisation 36% of the loop (1.56x). ``--try-fixes``: batch x2 measured 1.23x (UNDECIDED). Open: the hot-line sampler's few samples cannot name
lines; the loop body's Python before the model call is not read as input work.
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader

torch.set_num_threads(1)
random.seed(0)
torch.manual_seed(0)
words = [f"w{i}" for i in range(2000)]
texts = [
    {
        "text": " ".join(random.choice(words) for _ in range(random.randint(40, 120))).upper(),
        "label": random.randint(0, 3),
    }
    for _ in range(3200)
]
vocab = {w: i + 1 for i, w in enumerate(words)}
loader = DataLoader(texts, batch_size=32, shuffle=True)
model = nn.Sequential()
emb = nn.EmbeddingBag(len(vocab) + 1, 64, mode="mean", padding_idx=0)
head = nn.Linear(64, 4)
opt = torch.optim.Adam(list(emb.parameters()) + list(head.parameters()), lr=1e-3)
for epoch in range(3):
    for batch in loader:
        tokens = [t.lower().replace(",", " ").split() for t in batch["text"]]
        ids = [[vocab.get(w, 0) for w in toks] for toks in tokens]
        width = max(len(r) for r in ids)
        ids = [r + [0] * (width - len(r)) for r in ids]
        x = torch.tensor(ids)
        y = batch["label"]
        loss = nn.functional.cross_entropy(head(emb(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.3f}")
