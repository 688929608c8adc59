"""The loop's prints go into a StringIO through contextlib.redirect_stdout; the cell prints the
captured log's size after; sys.stdout after the cell is the kernel's as without the magic."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import contextlib, io, sys
''',
    '''
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    for i, (x, y) in enumerate(data):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(i, round(loss.item(), 5))
print("captured lines", len(buf.getvalue().splitlines()), type(sys.stdout).__name__)
buf.getvalue().splitlines()[-1]
''',
    '''
print(type(sys.stdout).__name__, sys.stdout is sys.__stdout__)
''',
]
MEASURED = 1
REPORT = "kept"
