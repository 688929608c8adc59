"""A checkpoint written every step (unseen round 8): torch.save of the model's and Adam's
state_dicts inside the loop. The step is a small MLP; the save is about half of it.

Class: per-step host work outside the model that autograd numbers (state_dict's detach). The
product should name the save and offer saving every N steps, never torch.compile. Seen on main
2026-12-05: forward 57.6% (the save read as forward), host-bound "the ops are too small",
torch_compile offered up to 2.53x (8.12x in a second run). Fixed: the forward starts at the
backward graph's first node, torch.save is per-step work (rules/checkpoint_saves, the every-N
gate of log_every_n), and the verdict says the cell's own Python sets the pace; --try-fixes: save
every 10 steps 1.64x (1.46x-1.82x) against 1.10x-1.78x, verified, inside its range."""

import os
import tempfile

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

model = nn.Sequential(
    nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 10)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
ckpt = os.path.join(tempfile.gettempdir(), "u8_save_every_step.pt")
X = torch.randn(64, 512)
Y = torch.randint(0, 10, (64,))
for step in range(120):
    x = X + 0.01 * torch.randn_like(X)
    loss = nn.functional.cross_entropy(model(x), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt)
print(loss.item())
