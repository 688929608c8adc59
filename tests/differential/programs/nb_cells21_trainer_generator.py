"""Training steps are a generator's (for loss in trainer_gen(): ...) defined in an earlier cell;
the cell breaks out early, which closes the generator (its finally prints)."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
def trainer_gen():
    try:
        for x, y in data:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            yield loss.item()
    finally:
        print("generator closed")
''',
    '''
seen = []
for loss_v in trainer_gen():
    seen.append(round(loss_v, 5))
    if len(seen) == 30:
        break
print(len(seen), seen[-1])
''',
]
MEASURED = 1
REPORT = "kept"
