"""A step function from an earlier cell raises after 12 steps (a shape error of torch's):
traceback text, sys.last_traceback's frames (what %debug walks) as without the magic."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
def train_step_c21(i, x, y):
    if i == 12:
        x = x[:, :15]
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss
''',
    '''
for i, (x, y) in enumerate(data):
    loss = train_step_c21(i, x, y)
''',
    '''
import sys, os, traceback
print(sys.last_type.__name__, i)
print([(os.path.basename(f.f_code.co_filename).split("_")[0], f.f_code.co_name)
       for f, _ in traceback.walk_tb(sys.last_traceback)])
print(sys.last_traceback.tb_frame.f_code.co_name, sys.last_traceback.tb_next.tb_frame.f_code.co_filename.startswith("/tmp"))
''',
]
MEASURED = 1
# the cell files are named after a hash of their code (the measured body is other code)
NORMALISE = [(r"\b[0-9]{6,}\.py\b", "<cell>.py")]
REPORT = "kept"
