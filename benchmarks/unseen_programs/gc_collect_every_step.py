"""``gc.collect()`` after every step "to free memory" (unseen round 19).

Class: a whole-heap garbage collection in the step loop. Users add ``del loss, out;
gc.collect()`` at the end of each step after an out-of-memory scare; with torch imported the
heap holds hundreds of thousands of objects and each full collection walks them all. Written
before the first run: a small MLP on batch 64, 150 steps; the collection is most of the step
(several ms against ~1 ms of math). The product should name the ``gc.collect()`` line and its
share, not only offer a bigger batch.

Seen 2026-12-07 (main dfe5334, load 2-12): HOST-BOUND (high), "Python and per-operator
overhead set the pace ... bigger batch, torch.compile", unattributed 98% of the step, hot line
``gc.collect()`` 99% of the samples, and no finding naming it. By hand (process CPU, whole
script, import included): 25.5 s with the collection, 3.3 s without (the loop ~97% collection).
Since (branch unseen19): "[high] The loop collects garbage on every step" at its line, gated
every 10 steps by the log_every_n patch (``housekeeping.every_step``).
"""

import gc

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(64 * 50, 64)
Y = torch.randint(0, 4, (64 * 50,))
loader = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
history = []
for epoch in range(3):
    for x, y in loader:
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(float(loss))
        del out, loss
        gc.collect()
    print(f"epoch {epoch} loss {sum(history[-50:]) / 50:.4f}")
