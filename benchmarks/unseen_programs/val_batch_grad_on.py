"""One batch of a validation loader read once an epoch with autograd on (unseen round 18):
``xb, yb = next(iter(val_loader))`` after each epoch's 16 steps, its loss computed without
``torch.no_grad()`` and printed; a small conv net on 1x28x28 inputs, SGD with momentum.

Class: a second loader's batch read outside the step loop once an epoch (a fresh iterator each
time), its forward recording a graph nobody backs through. Written before the first run:
6 epochs x 16 steps = 96 steps of batch 64 (the validation batch not a step), conv forward and
backward bound; the validation forward without ``no_grad`` named (info: a graph kept).

Seen 2026-12-06 (main c63e0fa, load 2.8): CPU-ONLY (high), 96 steps of batch 64 (right), conv
forward/backward; "[medium] Every 16 steps a step stalls (up to 1.22x)" with no line and no
cause. By hand (the process CPU clock, 6 epochs, load 3.6): the epoch-end batch 45 ms against
220 ms of training an epoch (17%: the stall's 18% was right); under ``torch.no_grad()`` 53 ms
(no gain: my premise's autograd naming was wrong on speed). Since (branch unseen18s): "Every 16
steps a step stalls (validation)" with "line 36: `val_loss = ...` runs validation once an
epoch (every 16 steps here)" (cell/blocks: a model call once an epoch outside any loop).
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(1024, 1, 28, 28)
Y = torch.randint(0, 10, (1024,))
train_loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(X[:256], Y[:256]), batch_size=256)
model = nn.Sequential(
    nn.Conv2d(1, 16, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(32 * 7 * 7, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(6):
    model.train()
    for x, y in train_loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    model.eval()
    xb, yb = next(iter(val_loader))
    val_loss = nn.functional.cross_entropy(model(xb), yb)
    print(f"epoch {epoch} train {loss.item():.3f} val {val_loss.item():.3f}")
