"""Lightning ``Trainer(detect_anomaly=True)`` left on for the training run (unseen round 22): a
small conv net on 32x32 images in memory, batch 64, SGD, one epoch of 40 steps.

Class: a framework keyword that turns on autograd's anomaly detection for every step. Lightning
wraps ``fit`` in ``torch.autograd.set_detect_anomaly(True)``: each forward operator records its
Python traceback, each backward output is checked for NaN. Added while chasing a NaN and never
removed. The fix: ``detect_anomaly=False`` (the default). The product knows the literal
``torch.autograd.set_detect_anomaly(True)``; here no line of the cell calls it.
Seen 2026-12-07 on main 343a714: CPU-ONLY (medium); anomaly detection named from the live
reading but "set outside this script", no line, no fix. By hand detect_anomaly=False 1.35x
(CPU clock, medians of 3 pairs). Fixed in 5e2a990: the keyword's line and the patch.
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
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 10),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


X = torch.randn(2560, 3, 32, 32)
Y = torch.randint(0, 10, (2560,))
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
trainer = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    detect_anomaly=True,
)
trainer.fit(Conv(), loader)
