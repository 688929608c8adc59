"""A warmup loop (lr ramp, 5 steps) then the training loop in the same cell; a bare name ends it."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
''',
    '''
for i, (x, y) in enumerate(data[:5]):
    for g in opt.param_groups: g["lr"] = 0.01 * (i + 1)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print("warm", round(loss.item(), 5))
for epoch in range(2):
    for x, y in data[5:]:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    print("epoch", epoch, round(loss.item(), 5))
opt
''',
]
MEASURED = 1
REPORT = "kept"
