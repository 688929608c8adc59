"""Lightning with ``num_workers=2`` and no ``persistent_workers`` over short epochs (unseen round
21, frameworks): ``limit_train_batches=6``, ``max_epochs=20``, an in-memory TensorDataset, a small
MLP, batch 64.

Class: the framework re-enters the same DataLoader every epoch; with ``persistent_workers=False``
each epoch starts two worker processes again (Lightning even warns). The loader is built once
(in ``train_dataloader``), so ``persistent_workers=True`` there is the fix (or ``num_workers=0``:
the data is already in memory). The product should say the workers restart every epoch and
patch the DataLoader call inside ``train_dataloader``.

Seen 2026-12-07 on main f90c6ff (load 17): HOST-BOUND (high), "[high] Every 6 steps a step
stalls (up to 4.03x)" with no cause and no fix. Fixed (rules/restarted_workers):
"[high] The loader's 2 workers start again at every epoch (2.23x-5.97x)", patch
``persistent_workers=True`` in ``train_dataloader``; tried 7.61x on the steps' own time,
VERIFIED. By hand the fit's wall 1.14x (~60 ms a restart beside Lightning's per-epoch work).
"""

import warnings

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")
torch.manual_seed(0)
torch.set_num_threads(1)


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4))
        self.x = torch.randn(4096, 64)
        self.y = torch.randint(0, 4, (4096,))

    def train_dataloader(self):
        return DataLoader(TensorDataset(self.x, self.y), batch_size=64, shuffle=True, num_workers=2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    trainer = L.Trainer(
        max_epochs=20,
        limit_train_batches=6,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Net())
