"""Lightning with ``configure_optimizers`` returning a scheduler dict (``interval: "step"``)
and an ``on_train_batch_end`` hook that moves the step's loss and predictions to the CPU
(unseen round 15): a small MLP regressor, OneCycleLR stepped per batch by Lightning, the hook
appends ``outputs["loss"].detach().cpu()`` and the batch's predictions (``.cpu().numpy()``) to
lists for an end-of-epoch summary. 2 epochs of 60 batches of 32.

Class: a per-step device read in a Lightning hook (not in ``training_step``), and a
scheduler the framework steps. Written before the first run: on a GPU the two ``.cpu()``
calls wait for the device every step (the host cannot run ahead); on this CPU they cost a copy.
The product should count 120 steps, name the hook's lines (``on_train_batch_end``), offer to
keep the values on the device (or read them every N steps), and say nothing about the
scheduler (Lightning steps it per batch as asked).

Seen 2026-12-06 (main 525b292, load 14): HOST-BOUND (high), 120 steps (right), no scheduler
word (right); "[medium] ops too small" and "[medium] fused AdamW" (both uncertain). The two
``.cpu()`` reads of ``on_train_batch_end`` record no operator on the CPU and the GPU estimate
said "assumes: the host runs ahead of the GPU (no per-step read of device values)": **wrong**.
Fixed (c52157c, cell/syncs.hook_reads): the reads in the methods a framework calls every step (a
LightningModule's or Callback's per-step hooks, an HF TrainerCallback's ``on_step_*``, a
Trainer subclass's ``compute_loss``) count in the estimate; after (load 18-25): "GPU compute
21.00 ms (after the host: reads every step)"; and a finding names them: "[info]
`Regressor.on_train_batch_end` reads device values every step: No patch ... keep the values on
the device ... or read them every 10 steps" (lines 51, 52 as run; load 19-22).
11 s of user CPU plain.
"""

import warnings

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(32, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 1)
        )
        self.losses: list = []
        self.preds: list = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        pred = self.net(x)
        loss = nn.functional.mse_loss(pred, y)
        return {"loss": loss, "pred": pred.detach()}

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].detach().cpu())
        self.preds.append(outputs["pred"].cpu().numpy())

    def on_train_epoch_end(self):
        preds = np.concatenate(self.preds)
        print(
            f"epoch {self.current_epoch}: loss {torch.stack(self.losses).mean():.4f} "
            f"pred std {preds.std():.3f}"
        )
        self.losses.clear()
        self.preds.clear()

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=120)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


if __name__ == "__main__":
    torch.manual_seed(0)
    X = torch.randn(1920, 32)
    Y = (X[:, :4].sum(1, keepdim=True) * 0.5).tanh()
    loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="auto",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Regressor(), loader)
