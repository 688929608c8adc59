"""The measured cell changes torch's global state for the rest of the session itself: float64
default dtype, one intra-op thread, anomaly detection on, grad mode off at its end. All of it
must stay as the cell left it (ours may not undo or override the user's own changes)."""

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
torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)
torch.autograd.set_detect_anomaly(True)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for x, y in data:
    loss = nn.functional.cross_entropy(model(x.double()), y)
    opt.zero_grad(); loss.backward(); opt.step()
torch.set_grad_enabled(False)
print(round(loss.item(), 6))
''',
    '''
print(torch.get_default_dtype(), torch.get_num_threads(), torch.is_anomaly_enabled(),
      torch.is_grad_enabled(), torch.is_anomaly_check_nan_enabled())
torch.set_grad_enabled(True); torch.autograd.set_detect_anomaly(False)
torch.set_default_dtype(torch.float32)
''',
]
MEASURED = 1
REPORT = "kept"
