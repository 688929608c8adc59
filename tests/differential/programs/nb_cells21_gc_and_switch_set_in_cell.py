"""The cell turns the garbage collector off and freezes it, sets its own thread switch interval
and recursion limit, then trains under CPU autocast (bfloat16): all of it as the cell left it."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import gc, sys
''',
    '''
gc.disable(); gc.freeze()
sys.setswitchinterval(0.002)
sys.setrecursionlimit(5000)
for x, y in data:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    loss = nn.functional.cross_entropy(out.float(), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 4), torch.is_autocast_cpu_enabled())
''',
    '''
print(gc.isenabled(), gc.get_freeze_count() > 0, sys.getswitchinterval(), sys.getrecursionlimit())
gc.unfreeze(); gc.enable(); sys.setswitchinterval(0.005); sys.setrecursionlimit(3000)
''',
]
MEASURED = 1
REPORT = "kept"
