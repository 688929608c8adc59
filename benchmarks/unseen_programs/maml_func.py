"""MAML on sine regression with torch.func.functional_call (unseen round 8): per meta-step four
tasks sampled in numpy, three inner SGD steps each by torch.autograd.grad(create_graph=True)
on a dict of fast weights, the query losses summed, one Adam step.

Class: many torch.autograd.grad calls inside one optimizer step: the step clock counts at
backward until the first optimizer step ends, so the profiler window is done inside the first
meta-step ("within-step"). The product should still say host-bound (ops of a few us on a
10x64 batch). Seen on main 2026-12-05: cpu-only, "a GPU would help: its time goes to
compute" (no host figures from a within-step window); fixed by reading the window's calls
(analysis.analyze.within_step_host): host-bound."""

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)

net = nn.Sequential(nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
meta_opt = torch.optim.Adam(net.parameters(), lr=1e-3)
params = dict(net.named_parameters())


def sample_task(k=10):
    amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)
    x = rng.uniform(-5, 5, (2 * k, 1)).astype(np.float32)
    y = (amp * np.sin(x + phase)).astype(np.float32)
    return (
        torch.from_numpy(x[:k]),
        torch.from_numpy(y[:k]),
        torch.from_numpy(x[k:]),
        torch.from_numpy(y[k:]),
    )


for it in range(300):
    meta_loss = 0.0
    for _ in range(4):
        xs, ys, xq, yq = sample_task()
        fast = dict(params)
        for _ in range(3):
            inner = nn.functional.mse_loss(functional_call(net, fast, (xs,)), ys)
            grads = torch.autograd.grad(inner, list(fast.values()), create_graph=True)
            fast = {n: w - 0.01 * g for (n, w), g in zip(fast.items(), grads, strict=True)}
        meta_loss = meta_loss + nn.functional.mse_loss(functional_call(net, fast, (xq,)), yq)
    meta_opt.zero_grad()
    (meta_loss / 4).backward()
    meta_opt.step()
    if it % 100 == 0:
        print(it, float(meta_loss) / 4)
