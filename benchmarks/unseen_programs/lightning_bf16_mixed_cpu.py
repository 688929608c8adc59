"""Lightning with ``precision="bf16-mixed"`` on a CPU (unseen round 21, frameworks): a 3-layer
MLP (784-1024-1024-10) on an in-memory dataset, batch 128, one epoch of 40 steps.

Class: mixed precision chosen through a framework keyword where the hardware has no bf16 matmul
units: Lightning wraps the step in ``torch.autocast("cpu", dtype=torch.bfloat16)``; on a CPU
without AMX/avx512_bf16 each matmul casts and runs slower than fp32. The product should name the
autocast/bf16 cost and point at ``precision="bf16-mixed"`` in the Trainer call (fix: "32-true").

Seen 2026-12-07 on main f90c6ff (load 12-18): UNKNOWN (too busy, 81% waiting); fused SGD [low];
nothing on the autocast (the trace's aten::copy_ casts 51 ms beside aten::mm 134 ms). By hand
``precision="32-true"`` 1.60x (fit 2.96 s against 4.74 s, 3 pairs). Open (benchmarks/README,
round 21): precision.cpu_float16 reads only a literal float16 torch.autocast.
"""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
PRECISION = "bf16-mixed"


class MLP(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


X = torch.randn(5120, 784)
Y = torch.randint(0, 10, (5120,))
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True)
trainer = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    precision=PRECISION,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(MLP(), loader)
