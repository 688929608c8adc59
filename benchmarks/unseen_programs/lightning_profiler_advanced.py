"""Lightning ``Trainer(profiler="advanced")`` left on after a profiling session (unseen round
23): a residual MLP of 12 small blocks (LayerNorm, Linear, GELU, Linear), batch 64, AdamW, one
epoch of 150 steps, its summary printed at the end.

Class: a framework's own profiler kept on for the real run. Lightning's ``AdvancedProfiler``
runs ``cProfile`` around every hook and step action (``run_training_batch``,
``training_step``, ``backward``, ``optimizer_step`` and each callback hook), so every Python
call of the model's forward and the optimizer's loop is traced; at the end it sorts and prints
the stats of every action. The fix: drop the keyword (``profiler=None``, the default).
Seen 2026-12-07 on main e9b71ba: HOST-BOUND (medium), "ops too small" and "logs every step";
nothing on the profiler. By hand profiler=None 1.38x (CPU clock, medians of 3 pairs). Fixed in
rules/profiler_on_u23: debug.profiler_on [medium] at line 60, patch profiler=None.
"""

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, h):
        return h + self.fc2(F.gelu(self.fc1(self.norm(h))))


class ResMLP(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(32, 96)
        self.blocks = nn.Sequential(*[Block(96) for _ in range(12)])
        self.out = nn.Linear(96, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.out(self.blocks(self.inp(x))), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


X = torch.randn(64 * 150, 32)
Y = X[:, :4].sum(1, keepdim=True).tanh()
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
trainer = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    profiler="advanced",
)
trainer.fit(ResMLP(), loader)
