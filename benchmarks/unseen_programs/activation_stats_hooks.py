"""Forward hooks on every layer that log activation statistics on every step (unseen round 21).

Class: monitoring left on: ``register_forward_hook`` on each Linear/LayerNorm/GELU of a
residual MLP, each hook computing ``out.mean()``, ``out.std()`` and the fraction of zeros and
reading them with ``.item()`` into a dict of running lists, so every forward makes a few small
reductions and host reads per layer, and the dict is printed once per epoch. The cut: gate the
hooks to the logging steps (a flag the hook checks, set every 50 steps), or remove them.
"""

import collections

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


model = nn.Sequential(nn.Linear(32, 128), *[Block(128) for _ in range(6)], nn.Linear(128, 10))
stats = collections.defaultdict(list)


def make_hook(name):
    def hook(module, inputs, out):
        o = out.detach()
        stats[name + ".mean"].append(o.mean().item())
        stats[name + ".std"].append(o.std().item())
        stats[name + ".zeros"].append((o == 0).float().mean().item())

    return hook


for name, m in model.named_modules():
    if isinstance(m, (nn.Linear, nn.LayerNorm, nn.GELU)):
        m.register_forward_hook(make_hook(name))

x_all = torch.randn(64 * 150, 32)
y_all = torch.randint(0, 10, (len(x_all),))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(3):
    for i in range(0, len(x_all), 64):
        loss = nn.functional.cross_entropy(model(x_all[i : i + 64]), y_all[i : i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(epoch, loss.item(), {k: sum(v[-10:]) / 10 for k, v in list(stats.items())[:3]})
