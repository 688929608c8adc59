"""By hand: the loop body's own work, removed and timed (rules/python_work's figures checked).

Three shapes, each with and without its loop-body work: strings tokenised in the loop (against
the same batches tokenised once before), a numpy augmentation of each batch before the model
(against none), an ``AveragedModel`` EMA updated every step (against none, and every 10 steps).
Each variant's loop timed on the process CPU clock, variants interleaved, medians of ROUNDS.
Run: ``python benchmarks/python_work_by_hand.py [rounds]``; the share printed is
1 - without/with, what the finding's "moved off the loop's thread" removes.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

torch.set_num_threads(1)


def tokenise(pre: bool) -> float:
    random.seed(0)
    torch.manual_seed(0)
    words = [f"w{i}" for i in range(2000)]
    texts = [
        " ".join(random.choice(words) for _ in range(random.randint(40, 120))).upper()
        for _ in range(3200)
    ]
    labels = torch.randint(0, 4, (3200,))
    vocab = {w: i + 1 for i, w in enumerate(words)}
    emb = nn.EmbeddingBag(len(vocab) + 1, 64, mode="mean", padding_idx=0)
    head = nn.Linear(64, 4)
    opt = torch.optim.Adam(list(emb.parameters()) + list(head.parameters()), lr=1e-3)

    def ids_of(batch: list[str]) -> torch.Tensor:
        tokens = [t.lower().replace(",", " ").split() for t in batch]
        ids = [[vocab.get(w, 0) for w in toks] for toks in tokens]
        width = max(len(r) for r in ids)
        return torch.tensor([r + [0] * (width - len(r)) for r in ids])

    batches = [(texts[i : i + 32], labels[i : i + 32]) for i in range(0, 3200, 32)]
    ready = [(ids_of(b), y) for b, y in batches] if pre else None
    t0 = time.process_time()
    for k, (b, y) in enumerate(batches):
        x = ready[k][0] if ready is not None else ids_of(b)
        loss = nn.functional.cross_entropy(head(emb(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.process_time() - t0


def augment(on: bool) -> float:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    X = torch.randn(64 * 60, 3, 32, 32)
    Y = torch.randint(0, 10, (64 * 60,))
    t0 = time.process_time()
    for i in range(0, len(X), 64):
        x = X[i : i + 64]
        if on:
            a = x.numpy()[:, :, :, ::-1] + rng.normal(0, 0.1, x.shape)
            a = np.clip(a * rng.uniform(0.8, 1.2), -3, 3)
            x = torch.from_numpy(a.astype(np.float32))
        loss = nn.functional.cross_entropy(model(x), Y[i : i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.process_time() - t0


def ema(every: int) -> float:
    torch.manual_seed(0)

    def block(d: int) -> nn.Module:
        return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    model = nn.Sequential(*[block(64) for _ in range(12)], nn.Linear(64, 10))
    averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    X = torch.randn(32 * 60, 64)
    Y = torch.randint(0, 10, (32 * 60,))
    t0 = time.process_time()
    for step, i in enumerate(range(0, len(X), 32)):
        loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if every and step % every == 0:
            averaged.update_parameters(model)
    return time.process_time() - t0


VARIANTS = {
    "tokenise in loop": lambda: tokenise(False),
    "tokenised once": lambda: tokenise(True),
    "numpy augment in loop": lambda: augment(True),
    "no augment": lambda: augment(False),
    "ema every step": lambda: ema(1),
    "ema every 10": lambda: ema(10),
    "no ema": lambda: ema(0),
}


def main(rounds: int) -> None:
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    for _ in range(rounds):
        for name, run in VARIANTS.items():
            times[name].append(run())
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:24s} median {med[k]:.3f} s  runs {', '.join(f'{t:.3f}' for t in v)}")
    for with_, without in [
        ("tokenise in loop", "tokenised once"),
        ("numpy augment in loop", "no augment"),
        ("ema every step", "no ema"),
        ("ema every step", "ema every 10"),
    ]:
        share = 1 - med[without] / med[with_]
        print(f"{with_} vs {without}: share {share:.0%}, {med[with_] / med[without]:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
