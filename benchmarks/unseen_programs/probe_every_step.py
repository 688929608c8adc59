"""A probe evaluation every step: ``model.eval()``, a no-grad forward over 1024 held-out
samples, the accuracy printed to a list, ``model.train()`` (unseen round 10).

Class: evaluation inside every step. The probe's forward is over 16x the training batch, so it
is most of the step, and its output never reaches the loss. A practitioner knows: evaluate
every N steps (or once an epoch); toggling train()/eval() itself is cheap. The product should
name the probe (the no-grad block, its share) and offer running it every N steps, not a bigger
batch or torch.compile for the training forward.

Seen 2026-12-05 (unseen round 10, load 14-16): "[high] Validation runs inside every training
step (up to 1.79x)": right, named with its line; no patch, so --try-fixes had nothing to try.
Since ``eba7b9e``: the patch ``validate_every_n`` gates the block and the append that uses it;
--try-fixes 30 measured 1.59x (1.37x-1.86x) against up to 1.83x, verified (load 8-9).
"""

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

model = nn.Sequential(
    nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10)
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
X = torch.randn(8192, 64)
Y = torch.randint(0, 10, (8192,))
Xv = torch.randn(1024, 64)
Yv = torch.randint(0, 10, (1024,))
history = []
for step in range(800):
    i = (step * 64) % 8192
    model.train()
    loss = nn.functional.cross_entropy(model(X[i : i + 64]), Y[i : i + 64])
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(Xv).argmax(1) == Yv).float().mean()
    history.append(float(acc))
print(history[-1])
