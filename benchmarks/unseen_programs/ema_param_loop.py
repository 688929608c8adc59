"""An EMA of the weights kept by a Python loop over the parameters every step (unseen round 10).

Class: per-parameter Python work in the step loop. A mean-teacher / EMA copy of a 12-block MLP
(LayerNorm + two Linears a block: 74 tensors) is updated after every optimizer step by
``for e, p in zip(ema.parameters(), model.parameters()): e.mul_(d).add_(p.detach(), alpha=1-d)``:
148 tiny in-place ops launched from Python a step, about as many as the whole Adam update. A
practitioner knows: one ``torch._foreach_lerp_`` (or ``_foreach_mul_`` + ``_foreach_add_``) over
the two parameter lists does it in a few calls (``torch.optim.swa_utils`` does it this way with
``get_ema_multi_avg_fn``), or update the EMA every few steps. The product should say host-bound
and name the EMA loop (line and share), offering the foreach form, not only a bigger batch.

Seen 2026-12-05 (unseen round 10, load 10-20): host-bound, no word of the loop; torch.compile
and fused Adam offered (neither reaches it). Since rules/param_loops: "A Python loop over the
parameters runs every step" (bound 1.02x-1.16x over three runs). Its foreach patch measured
0.86x (0.79x-0.93x, undecided, --try-fixes 300 s, load 8-12): on the CPU a foreach call still
runs its op tensor by tensor (perf_counter: 1.2-2.0 ms looped, 0.8-1.5 ms foreach, 0.4-0.7 ms
one _foreach_lerp_), so without a GPU the finding is info with no patch; on a GPU the patch
stays (not checked there yet).
"""

import copy

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def block() -> nn.Module:
    return nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))


model = nn.Sequential(*[block() for _ in range(12)], nn.Linear(64, 10))
ema = copy.deepcopy(model).requires_grad_(False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
decay = 0.999
X = torch.randn(4096, 64)
Y = torch.randint(0, 10, (4096,))
for step in range(600):
    i = (step * 32) % 4096
    x, y = X[i : i + 32], Y[i : i + 32]
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):  # noqa: B905 - as users write it
            e.mul_(decay).add_(p.detach(), alpha=1 - decay)
print(loss.item())
