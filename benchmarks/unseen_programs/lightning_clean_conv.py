"""A clean Lightning control (unseen round 21, frameworks): a small conv net on 32x32 images in
memory, batch 128, fp32, ``num_workers=0``, one epoch of 24 steps, ``log_every_n_steps`` default,
no callbacks.

Class: control. Compute (conv forward/backward) holds the step; the loader indexes tensors in
memory. The product should call it compute-bound on the CPU with no data/logging/sync finding
(a bigger batch or fused optimizer at most, low).

Seen 2026-12-07 on main f90c6ff (load 17): CPU-ONLY (medium), forward/backward 48/47%, no
finding but the imports and the busy machine: right.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Conv(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


X = torch.randn(3072, 3, 32, 32)
Y = torch.randint(0, 10, (3072,))
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)
trainer = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Conv(), loader)
