"""A small MLP (20 -> 64 -> 64 -> 1) on a TensorDataset at batch 32, Adam, MSE (helper headsfix,
2026-12-06): the bigger batch's second program beside heads_modulelist, shaped differently (no
per-head loop, 6 parameter tensors, one regression output).

Class: tiny CPU ops whose per-op cost a bigger batch shares out; at batch x8 (256) its
64-wide activations (16k elements) stay under torch's parallel grain, at x16 they cross it.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
X = torch.randn(32768, 20)
Y = X[:, :1] * 0.5 + torch.randn(32768, 1) * 0.1
loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(1):  # noqa: B007 - as users write it
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
print(f"loss {loss.item():.3f}")
