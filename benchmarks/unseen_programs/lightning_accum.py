"""Lightning with ``accumulate_grad_batches=8`` over micro-batches of 8 (unseen round 12): a small
MLP on an in-memory dataset, 1024 samples, one epoch, 16 optimizer steps of 8 micro-batches.

Class: gradient accumulation set by a framework keyword other than accelerate's/HF's
``gradient_accumulation_steps``. The step is the optimizer step (8 micro-batches, 64 samples):
the product should count 16 steps of batch 64, and where it offers a bigger batch (host-bound, a
quiet machine) fold the micro-batches (micro-batch x k, ``accumulate_grad_batches`` 8 -> 8/k, the
learning rate kept), never scale the learning rate while each optimizer step sees k x the samples.

Seen 2026-12-06 (load 12-26): 16 steps, batch 64 (right); too busy to judge (92% of the steps'
time waiting for a core), so no batch finding on this run. On main the bigger-batch patch read
only ``gradient_accumulation_steps``: with Lightning's keyword it said "batch size x4 (learning
rate x4)". Fixed (cell/words.ACCUMULATION_KEYS; tests/test_fix_bounds, a Lightning cell):
"micro-batch size x4, accumulate_grad_batches 8 -> 2". Left: the profiler window falls inside the
first optimizer step ("within-step": 3 micro-batches), so the phases are the step clock's.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 128, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = DataLoader(Rows(1024), batch_size=8, shuffle=True)
    trainer = L.Trainer(
        max_epochs=1,
        accumulate_grad_batches=8,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Net(), loader)
