"""Lightning with ``self.log(..., on_step=True, sync_dist=True)`` twice in ``training_step`` and a
hand-written progress callback (unseen round 17): ``PrintProgress.on_train_batch_end`` reads
``trainer.callback_metrics`` (``.item()`` of two tensors) and prints a ``\r`` line with the
it/s every step (``flush=True``), the bar off. A 3-layer MLP, SGD, 2 epochs, 256 steps.

Class: a Callback that redraws its own progress line on every step, beside per-step
``self.log``. Written before the first run: host-bound (small MLP, Lightning's per-step calls),
the callback's reads and its per-step print named, self.log named.

Seen 2026-12-06 (main 91071ec, load 6, 67% waiting over 6 steps): HOST-BOUND (high), batch x2
1.32x-1.81x, in-memory batches up to 1.12x, "[info] `PrintProgress.on_train_batch_end` reads
device values every step" (right), the self.log lines named (right, share not measured). The
callback's print every step is not named as a redraw.
"""

import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        self.log("train_acc", acc, on_step=True, on_epoch=False, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


class PrintProgress(L.Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        m = trainer.callback_metrics
        rate = (batch_idx + 1) / (time.perf_counter() - self.start)
        print(
            f"\repoch {trainer.current_epoch} step {batch_idx + 1}/{trainer.num_training_batches} "
            f"loss {m['train_loss_step'].item():.3f} acc {m['train_acc'].item():.2f} {rate:.1f} it/s",
            end="",
            flush=True,
        )


torch.manual_seed(0)
X = torch.randn(8192, 64)
Y = (X[:, :10] * torch.arange(10)).argmax(1)
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
trainer = L.Trainer(
    max_epochs=2,
    accelerator="cpu",
    enable_progress_bar=False,
    logger=False,
    enable_checkpointing=False,
    enable_model_summary=False,
    callbacks=[PrintProgress()],
)
trainer.fit(Net(), loader)
print()
