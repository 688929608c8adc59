"""while True: with an iterator fetched by next() and a break on StopIteration / step budget."""

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
it = iter(data)
step_c21 = 0
while True:
    try:
        x, y = next(it)
    except StopIteration:
        break
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    step_c21 += 1
    if step_c21 >= 35:
        break
step_c21, round(loss.item(), 5)
''',
]
MEASURED = 1
REPORT = "kept"
