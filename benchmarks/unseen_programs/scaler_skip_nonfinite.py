"""GradScaler on a CPU with fp16 autocast and a per-step non-finite guard (unseen round 18):
``if not torch.isfinite(loss): continue`` before backward, ``scaler.unscale_`` then
``clip_grad_norm_`` whose returned norm is checked with ``.item()`` and logged to a list;
a GRU sequence classifier.

Class: mixed-precision plumbing copied from a GPU recipe onto a CPU (fp16 autocast on a CPU,
a GradScaler, two host reads a step for the guards). Written before the first run: 80 steps of
batch 32, the GRU forward/backward bound; the two per-step reads named (info on a CPU); fp16
autocast on a CPU said slower than fp32 or bf16 (by hand to check).

Seen 2026-12-06 (main c63e0fa, load 5-6): CPU-ONLY (medium), 80 steps of batch 32 (right),
the reads at info (right); nothing on float16. By hand (the loop's CPU clock, 3 rounds
interleaved, load 5.6): float16 autocast 63.8 ms a step, float32 13.2 ms (4.8x faster),
bfloat16 16.7 ms. Since (branch unseen18s): "[medium] float16 autocast on a CPU: a GPU recipe
that slows the CPU down" at line 40 (rules/precision.cpu_float16), no bound.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(2560, 40, 24)
Y = (X[:, :, 0].mean(1) > 0).long()
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)


class GRUClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(24, 96, batch_first=True)
        self.head = nn.Linear(96, 2)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


model = GRUClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
norms = []
for x, y in loader:
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    if not torch.isfinite(loss):
        continue
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    norms.append(norm.item())
    scaler.step(opt)
    scaler.update()
print(f"loss {loss.item():.3f} mean norm {sum(norms) / len(norms):.3f}")
