"""accelerate with ``gradient_accumulation_steps=4`` and ``with accelerator.accumulate(model):``
(unseen round 12): a 2-layer TransformerEncoder classifier, grad clipping on sync steps only,
``opt.step()``/``sched.step()``/``opt.zero_grad()`` every micro-batch (accelerate skips them off
the sync steps), ~24 optimizer steps.

Class: accumulation through accelerate's context manager. The product should count the optimizer
steps (4 micro-batches each, batch 64), and its bigger-batch fix (if any) fold the accumulation
(tests/test_fix_bounds covers the patch). Seen 2026-12-06 (load 15-17): too busy to judge (96% of
the steps' time waiting for a core), 22 steps; "[medium] The profiled window does not represent
the run: its steps take 376.5 ms, the run's median is 975.5 ms": the window's steps are not whole
optimizer steps alike (open: check on a quiet machine whether the window spans whole
accumulation cycles).
"""

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 2000, (n, 16), generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return {"ids": self.x[i], "label": self.y[i]}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(2000, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(64, 4)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(1))


def main() -> None:
    torch.manual_seed(0)
    accelerator = Accelerator(gradient_accumulation_steps=4, cpu=True)
    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.1, total_iters=200)
    loader = DataLoader(Tokens(4096), batch_size=16, shuffle=True)
    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    model.train()
    for step, batch in enumerate(loader):
        with accelerator.accumulate(model):
            loss = nn.functional.cross_entropy(model(batch["ids"]), batch["label"])
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
        if step >= 24 * 4:
            break
    accelerator.print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
