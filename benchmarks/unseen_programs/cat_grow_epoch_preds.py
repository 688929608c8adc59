"""An epoch's predictions kept by growing one tensor with ``torch.cat`` every step (unseen round
23): ``all_logits = torch.cat([all_logits, logits.detach()])`` and the same for the labels, so
that accuracy and top-5 over the whole epoch can be printed at its end; a 128-256-100 MLP on
in-memory tensors, batch 256, 3 epochs of 400 steps.

Class: a tensor re-bound to itself plus the step's rows (``x = torch.cat([x, new])``) in the
loop: each step copies everything kept so far into a fresh buffer, so an epoch copies
O(steps^2) rows (the last step alone 40 MiB). The fix: append each step's rows to a list and
``torch.cat`` once at the epoch's end (same tensor).
Seen 2026-12-07 on main e9b71ba: UNKNOWN (too busy, 84%); the cat lines only as "the loop body's
own work after the update" [low] 1.00x-3.04x, no cause. By hand the list and one cat 3.04x (CPU
clock, medians of 3). Fixed in rules/grown_cat_u23: host.grown_by_cat [medium] at line 35.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)

X = torch.randn(256 * 400, 128)
Y = (X[:, :100] + 0.5 * torch.randn(256 * 400, 100)).argmax(1)
loader = DataLoader(TensorDataset(X, Y), batch_size=256, shuffle=True)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 100))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for epoch in range(3):
    all_logits = torch.empty(0, 100)
    all_labels = torch.empty(0, dtype=torch.long)
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        all_logits = torch.cat([all_logits, logits.detach()])
        all_labels = torch.cat([all_labels, y])
    acc = (all_logits.argmax(1) == all_labels).float().mean()
    top5 = (all_logits.topk(5, 1).indices == all_labels[:, None]).any(1).float().mean()
    print(f"epoch {epoch} acc {acc:.3f} top5 {top5:.3f}")
