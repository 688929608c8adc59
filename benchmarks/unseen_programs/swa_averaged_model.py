"""``torch.optim.swa_utils.AveragedModel`` as an EMA updated every step (unseen round 19).

Class: the library's own averaging (``AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(
0.999))``, ``ema.update_parameters(model)`` after each optimizer step), not a hand loop. A
12-block MLP (LayerNorm + two Linears a block), batch 32. Written before the first run: the
update is foreach-based (a few calls a step) and small against the step; a tool should not call
it a per-parameter Python loop; updating every k steps is the only cut, worth a few percent.

Seen 2026-12-07 (main dfe5334, load 12): HOST-BOUND (medium), 300 steps (right), fused AdamW
(1.27x-1.46x), compile at info; the window's "other" 6.4% (the update after opt.step) and no
word of the EMA. By hand (the loop's process CPU, medians of 3, load 12-17): with the
update 3.82 s, without 3.33 s: the update 13% of the loop, more than my premise's "a few
percent". Open: a library EMA's update (``AveragedModel.update_parameters``, timm's
``ModelEmaV3.update``, ema_pytorch's ``update_every``) is not read as per-step work.
"""

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

torch.set_num_threads(1)
torch.manual_seed(0)


def block(d: int) -> nn.Module:
    return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))


model = nn.Sequential(*[block(64) for _ in range(12)], nn.Linear(64, 10))
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
X = torch.randn(32 * 60, 64)
Y = torch.randint(0, 10, (32 * 60,))
for epoch in range(5):
    for i in range(0, len(X), 32):
        loss = nn.functional.cross_entropy(model(X[i : i + 32]), Y[i : i + 32])
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
    with torch.no_grad():
        ema_loss = nn.functional.cross_entropy(ema(X[:256]), Y[:256])
    print(f"epoch {epoch} loss {loss.item():.3f} ema {ema_loss.item():.3f}")
