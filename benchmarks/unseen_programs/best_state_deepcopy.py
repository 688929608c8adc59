"""Keep-the-best snapshot every step (unseen round 11): after each step, if the batch loss is
the best so far, ``best_state = copy.deepcopy(model.state_dict())``; a second copy goes to an
in-memory ``io.BytesIO`` via ``torch.save`` every step for a "last good" rollback. The batch loss
is noisy and falling, so the copy runs on most steps early and on many later.

Class: per-step host copies of the whole model outside the step's phases (a checkpoint-like
save, not to disk). Written before the first run: a practitioner sees a 4M-parameter MLP whose
step is dominated by copying it twice. The product should name the deepcopy and the torch.save
lines, and offer keeping the best by validation every N steps (or copying on the boundary
only); never torch.compile or fused Adam as the main fix. The ``loss.item()`` comparison is a
real per-step read (CPU: free), not the cost.

Seen on main e78d0f4 (load 16-24): the BytesIO torch.save named "saves a checkpoint on every
step" (its words say "writes it to disk": it is memory here); --try-fixes: save every 10 steps
verified 1.28x (1.17x-1.39x) in up to 1.69x. The deepcopy never named. The ``if loss.item() <
best_loss:`` read was "[low] a value it needs every step (a stop condition)", told to compute
``stop = loss.detach() < threshold`` and ``break`` every 10 steps: wrong, the loop never stops
on it. Fixed (cell/syncs: a needed read's branch stops only where it breaks, returns, raises,
or is a while/assert test): "[info] The loop branches on a device value every step", decide it
on fewer steps or on the validation loss once an epoch.
The deepcopy is now named (cell.syncs.state_copies, rules/checkpoint_saves: any copy of the
whole state in the step, deepcopy, {k: v.clone()}, .cpu() of every parameter): "The loop copies
the model's whole state on the steps a batch's value picks", its line and own sampled share,
advice to keep the best by the validation loss every N steps, no patch (gating the copy alone
would keep a stale best); a copy taken every step is gated by the every-N fix. At load 25
(01:06 UTC): its own sampled share 0% (the copy runs on the steps that beat the best only),
range 1.00x-1.23x, said [low] at its own share's level.
"""

import copy
import io

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

model = nn.Sequential(
    nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 1024), nn.ReLU(), nn.Linear(1024, 10)
)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
X = torch.randn(8192, 512)
Y = (X[:, :10].argmax(1) + (X[:, 10] > 1).long()) % 10
best_loss = float("inf")
best_state = None
last_good = io.BytesIO()
for step in range(100):  # noqa: B007 (the loop as measured)
    idx = torch.randint(0, 8192, (32,))
    loss = nn.functional.cross_entropy(model(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    if loss.item() < best_loss:
        best_loss = loss.item()
        best_state = copy.deepcopy(model.state_dict())
    last_good.seek(0)
    torch.save(model.state_dict(), last_good)
model.load_state_dict(best_state)
print(best_loss)
