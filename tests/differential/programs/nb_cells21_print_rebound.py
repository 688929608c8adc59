"""The cell rebinds print (in its namespace, and builtins.print for a logger) to prefix lines; the
report must still come and the user's print must stay the user's after the cell."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import builtins
_real_print = builtins.print
''',
    '''
def print(*args, **kw):
    _real_print("[log]", *args, **kw)
builtins.print = print
for i, (x, y) in enumerate(data):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if i % 10 == 0:
        print(i, round(loss.item(), 5))
''',
    '''
_real_print(builtins.print is print, print.__name__)
builtins.print = _real_print
del print
''',
]
MEASURED = 1
REPORT = "kept"
