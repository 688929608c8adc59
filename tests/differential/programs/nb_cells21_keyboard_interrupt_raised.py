"""The loop raises KeyboardInterrupt itself after 15 steps (a user's 'stop' as code): the
interrupt reaches the kernel as without the magic (error reply, same traceback), a report of
the steps that ran comes, and the next cell sees the same state and sys.last_* values."""

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
    if i == 15:
        raise KeyboardInterrupt
''',
    '''
import sys, traceback
print(i, sys.last_type.__name__ if hasattr(sys, "last_type") else None)
print([f.f_code.co_name for f, _ in traceback.walk_tb(sys.last_traceback)][-1:])
''',
]
MEASURED = 1
REPORT = "kept"
