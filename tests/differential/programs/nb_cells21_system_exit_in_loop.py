"""raise SystemExit(0) inside the loop once the loss is low enough: IPython's own one-line
'To exit: use exit' note as without the magic, the kernel lives on, the next cell runs."""

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
for i, (x, y) in enumerate(data):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if i == 20:
        print("done early", i)
        raise SystemExit(0)
''',
    '''
import sys
print("alive", i, getattr(sys, "last_type", None))
''',
]
MEASURED = 1
