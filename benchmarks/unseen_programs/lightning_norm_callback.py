"""Lightning with ``self.log(..., on_step=True, prog_bar=True)`` for three metrics and a custom
Callback that logs every parameter's gradient norm after every batch (unseen round 10).

Class: per-step work in a user Callback inside the framework's loop. ``GradNormLogger`` loops
over the model's 14 parameters in ``on_before_optimizer_step`` and calls
``pl_module.log(f"grad/{name}", p.grad.norm())`` for each, every step: 14 norms plus 14 logger
calls (Lightning's log validates and stores each value) beside three ``self.log`` calls in
``training_step``. A practitioner knows: log the norms every N steps (``trainer.global_step %
50``), or use ``lightning.pytorch.utilities.grad_norm`` once; ``log_every_n_steps`` does not
stop the ``self.log`` bookkeeping. The product should name the callback's hook (user code, its
share) and the per-step logging, and offer an every-N gate, not workers for a TensorDataset.

Seen 2026-12-05 (unseen round 10, load 15-17): "[high] The framework logs ... on every step (up
to 2.22x-2.28x)" naming training_step's self.log (line 43); the callback's pl_module.log (line
27, 30-66% of the samples) is not named. --try-fixes: a bigger batch x4 4.04x per sample
(predicted 2.02x-4.0x), verified; fused Adam skipped (budget).
Since ``eba7b9e`` (load 11-17): the finding names line 32 first ("GradNormLogger.
on_before_optimizer_step, 55%", its gate ``if trainer.global_step % 50 == 0:``), then the
three self.log lines with their shares (benchmarks/README, branch cbklog).
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class GradNormLogger(L.Callback):
    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        for name, p in pl_module.named_parameters():
            if p.grad is not None:
                pl_module.log(f"grad/{name}", p.grad.norm(), on_step=True, on_epoch=False)


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        layers = []
        for _ in range(6):
            layers += [nn.Linear(64, 64), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(64, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.net(x)
        loss = nn.functional.cross_entropy(out, y)
        acc = (out.argmax(1) == y).float().mean()
        self.log("train/loss", loss, on_step=True, prog_bar=True)
        self.log("train/acc", acc, on_step=True, prog_bar=True)
        self.log("train/out_std", out.std(), on_step=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


ds = TensorDataset(torch.randn(4096, 64), torch.randint(0, 4, (4096,)))
trainer = L.Trainer(
    max_epochs=3,
    accelerator="cpu",
    callbacks=[GradNormLogger()],
    logger=False,
    enable_checkpointing=False,
    enable_model_summary=False,
)
trainer.fit(Net(), DataLoader(ds, batch_size=32, shuffle=True))
