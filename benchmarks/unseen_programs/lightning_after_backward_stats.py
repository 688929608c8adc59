"""Lightning with a Callback that keeps gradient statistics in ``on_after_backward`` on every step
(helper cbgate, a second shape for the callback gate): ``GradStats`` takes each gradient's
quantiles and a histogram and keeps the last ones per parameter; the hook names its arguments
``tr, module`` (not ``trainer, pl_module``); ``accumulate_grad_batches=2``.

Class: per-step work in a user Callback's hook that Lightning's ``_call_callback_hooks`` calls.
A practitioner knows: compute the statistics every N steps (``if tr.global_step % 50 == 0``).
The product should name the hook with its share and offer the gate read from the hook's own
first argument (``tr.global_step``), and verify it with ``--try-fixes``.

Seen 2026-12-06 (helper cbgate, 9bc6c84, load 25-27): "[high] ... GradStats.on_after_backward
(line 25, 60%)", the patch `if tr.global_step % 50 != 0: return`; --try-fixes 30: predicted
1.51x-2.16x, measured 4.07x (rounds 4.12x, 3.36x, 4.07x), verified (above the range: the share
reads low under load). Since 2bd2f23 the advice says `if tr.global_step % 50 == 0:` too.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class GradStats(L.Callback):
    def __init__(self) -> None:
        self.last: dict[str, tuple[float, float]] = {}

    def on_after_backward(self, tr, module):
        for name, p in module.named_parameters():
            g = p.grad.detach().flatten()
            q = torch.quantile(g, torch.tensor([0.05, 0.95]))
            self.last[name] = (float(q[0]), float(torch.histc(g, bins=32).argmax()))


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                                 nn.Linear(128, 8))  # fmt: skip

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


ds = TensorDataset(torch.randn(12800, 64), torch.randint(0, 8, (12800,)))
trainer = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    accumulate_grad_batches=2,
    callbacks=[GradStats()],
    logger=False,
    enable_checkpointing=False,
    enable_model_summary=False,
    enable_progress_bar=False,
)
trainer.fit(Net(), DataLoader(ds, batch_size=32, shuffle=True))
