"""Lightning with manual optimization (``automatic_optimization = False``) and two optimizers
(unseen round 13): an autoencoder whose encoder/decoder and a latent classifier head are
stepped by two Adams in one ``training_step`` (``self.optimizers()``, ``self.manual_backward``,
``opt.zero_grad()/step()`` twice, a StepLR per optimizer stepped by hand at epoch end).

Class: a framework loop whose optimizer steps are the user's, two a batch. Written before the
first run: the product should count 32 steps (one a batch, not 64), and a fused-optimizer fix
must reach both Adams in ``configure_optimizers``.

Seen 2026-12-06 (main bce4bf9, load 21, 95% wait): UNKNOWN (too busy); 33 steps for 32 batches
(64 optimizer events, 32 loader events: one batch split in two, a 0.06 s "step"); "[low] The
Adam step updates each parameter tensor separately (0.54x-1.18x, uncertain)" whose patch sets
``fused=True`` on both Adams (right) though its evidence names only ``opt_ae`` and counts its 8
tensors of the 12. By hand (fused=True on both, interleaved, process CPU time after imports):
see benchmarks/README round 13.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AEWithHead(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.enc = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 32))
        self.dec = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256))
        self.head = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        opt_ae, opt_head = self.optimizers()
        z = self.enc(x)
        rec = nn.functional.mse_loss(self.dec(z), x)
        opt_ae.zero_grad()
        self.manual_backward(rec)
        opt_ae.step()
        logits = self.head(z.detach())
        cls = nn.functional.cross_entropy(logits, y)
        opt_head.zero_grad()
        self.manual_backward(cls)
        opt_head.step()
        self.log_dict({"rec": rec, "cls": cls}, prog_bar=True)

    def on_train_epoch_end(self):
        for s in self.lr_schedulers():
            s.step()

    def configure_optimizers(self):
        opt_ae = torch.optim.Adam(
            list(self.enc.parameters()) + list(self.dec.parameters()), lr=1e-3
        )
        opt_head = torch.optim.Adam(self.head.parameters(), lr=3e-3)
        return [opt_ae, opt_head], [
            torch.optim.lr_scheduler.StepLR(opt_ae, 1, 0.9),
            torch.optim.lr_scheduler.StepLR(opt_head, 1, 0.9),
        ]


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(2048, 256)
    y = torch.randint(0, 10, (2048,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(AEWithHead(), loader)
