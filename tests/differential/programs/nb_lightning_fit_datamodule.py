"""PyTorch Lightning: Trainer.fit with a LightningDataModule, accumulate_grad_batches=2 and
Lightning's own "simple" profiler writing its report to a file, which the cell reads back (the
actions it timed, sorted: the table itself is ordered by wall-clock time) and deletes.
"""

CELLS = [
    """
import random, numpy as np, torch
import glob, os
import lightning as L
from lightning.pytorch.profilers import SimpleProfiler
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); random.seed(0); np.random.seed(0)

class Data(L.LightningDataModule):
    def setup(self, stage=None):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(192, 8, generator=g)
        self.train_set = TensorDataset(x, x.sum(1, keepdim=True))
    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=16, shuffle=True,
                          generator=torch.Generator().manual_seed(1))

class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.losses = []
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(round(loss.item(), 6))
        return loss
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)

dm = Data()
model = Regressor()
trainer = L.Trainer(max_steps=10, accumulate_grad_batches=2, profiler=SimpleProfiler(dirpath=".", filename="perf"),
                    accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, deterministic=True)
""",
    """
trainer.fit(model, datamodule=dm)
print(trainer.global_step, model.losses[-3:])
for _path in sorted(glob.glob("*perf*.txt")):
    with open(_path) as fh:
        actions = sorted({line.split("|")[1].strip() for line in fh if line.startswith("|")})
    print(_path, actions)
    os.remove(_path)
""",
]
MEASURED = 1
TIMEOUT_S = 240
