"""Lightning with ``log_every_n_steps=1``, a CSVLogger and ``self.log_dict`` of six tensors with
``on_step=True, prog_bar=True, sync_dist=True`` every step (unseen, helper fwunseen), the bar
off (``enable_progress_bar=False``).

Class: Lightning's logging on every step with the logger writing every step: both the calls'
bookkeeping (every step whatever the setting) and the CSV writes (every step because of
``log_every_n_steps=1``). ``sync_dist=True`` on one process reduces nothing. A practitioner
knows: ``Trainer(log_every_n_steps=50)`` (the writes) and fewer/gated ``self.log`` calls (the
bookkeeping). The product should name the log_dict line with its share, say
``log_every_n_steps=1`` now and point at the Trainer keyword; its bound should cover what the
two fixes remove.

Seen 2026-12-06 (helper fwunseen; by hand, CPU clock, load 20-26: log_every_n_steps=50 1.09x,
log_dict removed 3.20x). The product (before and after 7ee9426): "[high] ... self.log on every
step (line 44, 19-21%) ... gate; Trainer(log_every_n_steps=50) (log_every_n_steps=1 now)":
knobs right, share low (--lines all at load 15 read 61%): the sparse sampler under load, open
(benchmarks/README.md).
"""

import tempfile

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        loss = nn.functional.cross_entropy(out, y)
        probs = out.softmax(1)
        metrics = {
            "loss": loss,
            "acc": (out.argmax(1) == y).float().mean(),
            "p_max": probs.max(1).values.mean(),
            "entropy": -(probs * probs.clamp_min(1e-8).log()).sum(1).mean(),
            "out_std": out.std(),
            "w_norm": self.net[0].weight.norm(),
        }
        self.log_dict(metrics, on_step=True, prog_bar=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


ds = TensorDataset(torch.randn(16384, 32), torch.randint(0, 4, (16384,)))
trainer = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    logger=CSVLogger(tempfile.mkdtemp(prefix="csv_every_step_")),
    log_every_n_steps=1,
    enable_checkpointing=False,
    enable_model_summary=False,
    enable_progress_bar=False,
)
trainer.fit(Net(), DataLoader(ds, batch_size=32, shuffle=True))
