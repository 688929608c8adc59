"""Lightning: a DataModule whose loader has no workers over a slow dataset."""

import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Slow(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(32), torch.randn(1)


class DM(L.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(Slow(), batch_size=8)


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))

    def training_step(self, batch, i):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


trainer = L.Trainer(
    max_steps=120,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Lit(), datamodule=DM())
