"""Lightning with ``val_check_interval=20`` and ``self.log(..., prog_bar=True)`` in both
``training_step`` and ``validation_step`` (unseen round 14): a small 1-d conv classifier over
sequences (batch 32), 80 training batches in one epoch, a validation loader of 24 batches of
64, so three validations of 24 batches run inside the epoch (a fourth at its end); accuracy
logged per val batch.

Class: validation run often inside the epoch by a framework keyword. Written before the first
run: each validation is 24 no-grad forwards of 2x the batch (about 1/3 of a training step's
work each), so the four take about 40% as long as the 80 training steps. The product should not
count validation batches as training steps, should say how much of the cell the validation
took, and point at ``val_check_interval`` (or ``limit_val_batches``), not at the training step.

Seen 2026-12-06 (main 278266d, load 23-25, 95% waiting): UNKNOWN, too busy to judge (right), 80
steps (right: validation batches are not steps). The three validations inside the epoch (steps
20, 40, 60: 17-20 s each against ~2 s steps; a fourth after the last step) read "stalls: 2
step(s), e.g. 20, 60; 26% of the run's time" with no finding: nothing named
``val_check_interval``. Fixed (c77e87f): a Lightning ``Trainer(val_check_interval=N)`` is a
periodic validation block set by a framework keyword, as HF's eval_steps is; after (load
15-20): "[high] Every 20 steps a step stalls (validation) (up to 1.48x): Make validation rarer:
`val_check_interval=200` on line 61 ... (a count over an epoch's batches needs
check_val_every_n_epoch=None); or cheaper: a smaller validation set (limit_val_batches)".
Open: on the first run the stall at step 40 was not counted (stalls 20 and 60 only, no period),
which would leave the block unmatched. 34 s of user CPU plain.
"""

import warnings

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")


class SeqNet(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(8, 64, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2),
            nn.ReLU(),
            nn.AdaptiveMaxPool1d(1),
            nn.Flatten(),
            nn.Linear(64, 5),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, 128, generator=g)
    return TensorDataset(x, (x[:, 0].mean(1) * 10).long().clamp(-2, 2) + 2)


if __name__ == "__main__":
    torch.manual_seed(0)
    train = DataLoader(data(32 * 80, 0), batch_size=32, shuffle=True)
    val = DataLoader(data(64 * 24, 1), batch_size=64)
    trainer = L.Trainer(
        max_epochs=1,
        val_check_interval=20,
        num_sanity_val_steps=0,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    trainer.fit(SeqNet(), train, val)
