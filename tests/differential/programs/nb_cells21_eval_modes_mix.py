"""Training with an eval under torch.no_grad() every 10 steps and a metric under
torch.inference_mode(): grad mode and inference mode after the cell as without the magic; the
cell's last expression is a tuple shown as Out[]."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
val = (torch.randn(32, 16), torch.randint(0, 4, (32,)))
''',
    '''
accs = []
for i, (x, y) in enumerate(data):
    model.train()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if i % 10 == 9:
        model.eval()
        with torch.no_grad():
            vloss = nn.functional.cross_entropy(model(val[0]), val[1]).item()
        with torch.inference_mode():
            acc = (model(val[0]).argmax(1) == val[1]).float().mean().item()
        accs.append((round(vloss, 5), round(acc, 4)))
print(accs)
torch.is_grad_enabled(), torch.is_inference_mode_enabled(), model.training
''',
]
MEASURED = 1
REPORT = "kept"
