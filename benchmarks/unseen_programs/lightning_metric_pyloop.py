"""Lightning with a training accuracy counted by a Python loop over the batch (unseen round
23): ``for i in range(len(y)): correct += int(preds[i] == y[i])`` in ``training_step``, the
result ``self.log``ged; a 64-256-256-10 MLP on in-memory tensors, batch 512, 2 epochs of 60
steps.

Class: a per-sample Python loop over a batch's tensors in the step (a metric, not the model):
each ``preds[i]``, ``y[i]``, ``==`` and ``int()`` is a separate tensor operation (and a read),
512 of each a step. The fix: ``correct = int((preds == y).sum())`` (one comparison, one read),
or ``(preds == y).float().mean()`` logged as a tensor.
Seen 2026-12-07 on main e9b71ba: UNKNOWN (too busy, 94%); the loop's reads only as
``training_step`` "reads device values every step" [info]. By hand the batched count 1.20x of
the fit (CPU clock, medians of 3), 1.91x of the plain steps alone. Fixed in
rules/element_loop_u23: host.element_loop [high] 1.38x-2.10x.
"""

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        preds = logits.argmax(1)
        correct = 0
        for i in range(len(y)):
            correct += int(preds[i] == y[i])
        self.log("train_acc", correct / len(y))
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


X = torch.randn(512 * 60, 64)
Y = (X[:, :10] * 2 + torch.randn(512 * 60, 10)).argmax(1)
loader = DataLoader(TensorDataset(X, Y), batch_size=512, shuffle=True)
trainer = L.Trainer(
    max_epochs=2,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Classifier(), loader)
