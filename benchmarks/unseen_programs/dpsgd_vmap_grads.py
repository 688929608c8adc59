"""DP-SGD by hand (unseen round 17): per-sample gradients with ``torch.func`` (``vmap(grad(...))``
over ``functional_call``), each sample's gradient clipped to norm 1, summed, Gaussian noise
added, the parameters (a dict of detached tensors) updated by assignment: no optimizer, no
``.backward()``. A 3-layer tanh MLP, TensorDataset, batch 128, 192 steps.

Class: a step with neither optimizer nor backward (steps counted at the DataLoader), its
gradients from function transforms. Written before the first run: 192 steps found, the
per-sample gradients the work (cpu-only), no optimizer advice (there is none to fuse).

Seen 2026-12-06 (main 91071ec, load 6, the steps waiting 65% for a core): UNKNOWN, too busy to
judge (right where it says so), 192 steps at the loader (right), backward 40% for the vmapped
grad, no fused-optimizer word (right); in-memory batches [low] up to 1.11x. The GPU estimate
"not faster (0.70x): host 11.80 ms" for a 9.16 ms step here (the loaded estimate of round 14:
host time read from op times the wait for a core inflated).
"""

import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
torch.manual_seed(0)
X = torch.randn(6144, 40)
Y = (X[:, :5].sum(1) > 0).long()
loader = DataLoader(TensorDataset(X, Y), batch_size=128, shuffle=True, drop_last=True)
model = nn.Sequential(
    nn.Linear(40, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 2)
)
params = {k: v.detach() for k, v in model.named_parameters()}
CLIP, SIGMA, LR = 1.0, 0.8, 0.5


def sample_loss(p, x, y):
    out = functional_call(model, p, (x.unsqueeze(0),))
    return nn.functional.cross_entropy(out, y.unsqueeze(0))


per_sample_grads = vmap(grad(sample_loss), in_dims=(None, 0, 0))
for epoch in range(4):
    for x, y in loader:
        g = per_sample_grads(params, x, y)
        norms = torch.stack([v.flatten(1).norm(dim=1) for v in g.values()]).norm(dim=0)
        factor = (CLIP / (norms + 1e-6)).clamp(max=1.0)
        for k in params:
            clipped = (g[k] * factor.view(-1, *[1] * (g[k].dim() - 1))).sum(0)
            noisy = clipped + SIGMA * CLIP * torch.randn_like(clipped)
            params[k] = params[k] - LR * noisy / x.shape[0]
    with torch.no_grad():
        acc = (functional_call(model, params, (X,)).argmax(1) == Y).float().mean()
    print(f"epoch {epoch} acc {acc:.3f}")
