"""Lightning with a custom Callback doing heavy host work in ``on_train_batch_end`` every step
(unseen, helper fwunseen): no log call at all. ``WeightStats`` copies every parameter to a
CPU snapshot dict (``p.detach().clone()``) and computes a 64-bin ``torch.histc`` and the
quantiles of each, every batch, to keep a "last good weights" copy and weight statistics.

Class: per-step work in a user Callback that the framework's loop calls (Lightning's
``_call_callback_hooks``), not Lightning's own logging. A practitioner knows: do it every N
steps (``if trainer.global_step % 50 == 0:`` in the hook) or in ``on_train_epoch_end``. The
product should name the hook (``WeightStats.on_train_batch_end``, its line and share), offer
the every-N gate in the hook, and never call it Lightning's logging nor tell
``log_every_n_steps`` (the run logs nothing: ``logger=False``).

Seen 2026-12-06 (helper fwunseen; by hand, CPU clock: removing the callback 4.10x, 3.99-4.45,
load 14-24). On main bce4bf9: no framework word, "[high] reads device values every step" (the
CPU float() is no sync). Since 7ee9426 (load 22): "[high] Lightning: your callback's hook runs
its work on every step (58%: WeightStats.on_train_batch_end (line 28, 58%)) ... `if
trainer.global_step % 50 == 0:`", up to 2.14x: the share low (76% by hand), open. Since 9bc6c84
(helper cbgate) the gate is a patch: --try-fixes 30 (load 23-27) 3.54x, verified (predicted
1.85x-2.38x: above the range, the share low).
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class WeightStats(L.Callback):
    def __init__(self) -> None:
        self.snapshot: dict[str, torch.Tensor] = {}
        self.stats: list[dict[str, float]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        row = {}
        for name, p in pl_module.named_parameters():
            w = p.detach()
            self.snapshot[name] = w.clone()
            row[name + "/hist_max"] = float(torch.histc(w, bins=64).max())
            row[name + "/q90"] = float(torch.quantile(w.flatten(), 0.9))
        self.stats.append(row)


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        layers = []
        for _ in range(4):
            layers += [nn.Linear(128, 128), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(128, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


ds = TensorDataset(torch.randn(8192, 128), torch.randint(0, 10, (8192,)))
trainer = L.Trainer(
    max_epochs=2,
    accelerator="cpu",
    callbacks=[WeightStats()],
    logger=False,
    enable_checkpointing=False,
    enable_model_summary=False,
    enable_progress_bar=False,
)
trainer.fit(Net(), DataLoader(ds, batch_size=64, shuffle=True))
