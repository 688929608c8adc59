"""A length-bucketing ``BatchSampler`` handed to the DataLoader as ``batch_sampler=`` and a collate
that builds a dict of nested lists (unseen round 14): the dataset returns token lists of 8-96
ids with a dict of metadata; ``BucketBatchSampler.__iter__`` sorts indices by length within
chunks of 50 batches and yields lists of 32 indices; the collate pads per batch in Python
(``[s + [0] * (m - len(s)) for s in ...]``), keeps ``"meta"`` as a list of dicts and ``"spans"``
as a list of lists, and the loop turns ``batch["ids"]`` into a tensor with ``torch.tensor``.
A mean-pooled embedding + MLP classifier, Adam, no workers.

Class: a loader whose batch size lives in a user BatchSampler (``batch_size=`` is not a
DataLoader keyword here), and the batch made a tensor in the loop from nested lists.
Written before the first run: the collate + torch.tensor of nested lists is most of the data
time; workers should help; a bigger-batch fix must reach ``BucketBatchSampler(..., 32)``, not
add ``batch_size=`` to a DataLoader that already has ``batch_sampler=`` (a ValueError).

Seen 2026-12-06 (main 278266d, load 26, 97% waiting): UNKNOWN, too busy to judge (right), 100
steps (right: the sampler's batches). My premise was wrong: the collate and ``torch.tensor`` of
nested lists are under 1% of the step (data wait 0% over 86 steps); the embedding's backward
and Adam are the work, so no workers or batch fix was offered (right: nothing reached the
BatchSampler's size, untested here). Wrong: "the script starts processes (Pool) and its source
trains: no optimizer step was counted in its child processes ... run under torchrun": the model
class is named ``Pool`` and ``Pool().to(device)`` read as multiprocessing.Pool. Fixed (49c971c):
a bare call of a class or function the source defines is no launcher; after (load 16-21) the
line is gone. 13 s of user CPU plain.
"""

import random

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler

device = "cuda" if torch.cuda.is_available() else "cpu"


class Texts(Dataset):
    def __init__(self, n: int) -> None:
        rnd = random.Random(0)
        self.rows = [[rnd.randrange(1, 5000) for _ in range(rnd.randint(8, 96))] for _ in range(n)]
        self.labels = [rnd.randrange(4) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        ids = self.rows[i]
        return {"ids": ids, "label": self.labels[i], "meta": {"idx": i, "len": len(ids)}}


class BucketBatchSampler(Sampler):
    def __init__(self, lengths, batch_size: int, seed: int = 0) -> None:
        self.lengths = lengths
        self.batch_size = batch_size
        self.rnd = random.Random(seed)

    def __iter__(self):
        idx = list(range(len(self.lengths)))
        self.rnd.shuffle(idx)
        chunk = self.batch_size * 50
        batches = []
        for c in range(0, len(idx), chunk):
            part = sorted(idx[c : c + chunk], key=lambda i: self.lengths[i])
            batches += [part[b : b + self.batch_size] for b in range(0, len(part), self.batch_size)]
        self.rnd.shuffle(batches)
        yield from batches

    def __len__(self) -> int:
        return (len(self.lengths) + self.batch_size - 1) // self.batch_size


def collate(items):
    m = max(len(it["ids"]) for it in items)
    return {
        "ids": [it["ids"] + [0] * (m - len(it["ids"])) for it in items],
        "spans": [[0, len(it["ids"])] for it in items],
        "label": [it["label"] for it in items],
        "meta": [it["meta"] for it in items],
    }


class Pool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5000, 128, padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 4))

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).float()
        h = (self.emb(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return self.mlp(h)


if __name__ == "__main__":
    torch.manual_seed(0)
    ds = Texts(3200)
    sampler = BucketBatchSampler([len(r) for r in ds.rows], 32)
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
    model = Pool().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    seen = 0
    for _epoch in range(1):
        for batch in loader:
            ids = torch.tensor(batch["ids"], device=device)
            y = torch.tensor(batch["label"], device=device)
            loss = nn.functional.cross_entropy(model(ids), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(batch["meta"])
    print(f"seen {seen} loss {loss.item():.3f}")
