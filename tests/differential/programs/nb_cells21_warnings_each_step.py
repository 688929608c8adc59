"""Each step warns: a UserWarning of the user's (warnings.warn) and torch's own broadcast warning of
mse_loss; shown once each as without the magic, and the warning filters after the cell as plain."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import warnings
reg = nn.Linear(16, 1)
ropt = torch.optim.SGD(reg.parameters(), lr=0.01)
''',
    '''
for i, (x, y) in enumerate(data[:25]):
    loss = nn.functional.mse_loss(reg(x), y.float())  # (8,1) vs (8,): torch warns
    ropt.zero_grad(); loss.backward(); ropt.step()
    warnings.warn(f"step is slow-ish")
print(round(loss.item(), 5), len(warnings.filters))
''',
    '''
print(len(warnings.filters), warnings.filters[:3])
''',
]
MEASURED = 1
REPORT = "kept"
