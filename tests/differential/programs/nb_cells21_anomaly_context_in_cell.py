"""The cell's loop runs inside 'with torch.autograd.set_detect_anomaly(True):' (the context form):
anomaly mode off after it as without the magic; torch's warning about anomaly detection shown
once as plain."""

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
with torch.autograd.set_detect_anomaly(True):
    for x, y in data[:20]:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
print(round(loss.item(), 6), torch.is_anomaly_enabled())
''',
]
MEASURED = 1
REPORT = "kept"
