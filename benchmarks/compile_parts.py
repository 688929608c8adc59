"""Where torch.compile's time goes on the CPU, part by part of a nanoGPT-shaped step (issue 26).

The ledger's nanogpt_shaped compile fix measured 0.92x near-quiet against "up to 2.49x" (and
1.96x at load 20). This times each part of the step on the loop thread's CPU clock, eager and
compiled, interleaved: the model call, the next batch made between the model call and backward
(nanoGPT prefetches it there, inside the step clock's "forward"), backward, the optimizer. Prints
the medians (us a step) and the compiled/eager ratio of each part.

    python benchmarks/compile_parts.py [--rounds 2] [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

BLOCK, BATCH, VOCAB, ACCUM, SKIP = 32, 8, 64, 2, 50


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 64)
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
        self.head = nn.Linear(64, VOCAB)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.head(self.mlp(self.emb(x)))
        return logits, nn.functional.cross_entropy(logits.view(-1, VOCAB), y.view(-1))


def run(compiled: bool, steps: int, data: torch.Tensor) -> dict[str, float]:
    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - BLOCK, (BATCH,))
        x = torch.stack([data[i : i + BLOCK] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + BLOCK] for i in ix])
        return x, y

    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    call = torch.compile(model) if compiled else model
    x, y = get_batch()
    parts: dict[str, list[float]] = {k: [] for k in ("model", "batch", "backward", "opt", "step")}
    clock = time.thread_time_ns
    for it in range(steps):
        t0 = clock()
        spent = {"model": 0, "batch": 0, "backward": 0}
        for _ in range(ACCUM):
            a = clock()
            _, loss = call(x, y)
            loss = loss / ACCUM
            b = clock()
            x, y = get_batch()
            c = clock()
            loss.backward()
            d = clock()
            spent["model"] += b - a
            spent["batch"] += c - b
            spent["backward"] += d - c
        a = clock()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        b = clock()
        if it >= SKIP:
            for k, v in (*spent.items(), ("opt", b - a), ("step", b - t0)):
                parts[k].append(v / 1e3)
    return {k: statistics.median(v) for k, v in parts.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = torch.randint(0, VOCAB, (20_000,))
    eager: list[dict[str, float]] = []
    compiled: list[dict[str, float]] = []
    for _ in range(args.rounds):
        eager.append(run(False, args.steps, data))
        compiled.append(run(True, args.steps, data))
    for name in ("model", "batch", "backward", "opt", "step"):
        e = statistics.median(r[name] for r in eager)
        c = statistics.median(r[name] for r in compiled)
        print(f"{name:9s} eager {e:8.1f} us  compiled {c:8.1f} us  compiled/eager {c / e:5.2f}")


if __name__ == "__main__":
    main()
