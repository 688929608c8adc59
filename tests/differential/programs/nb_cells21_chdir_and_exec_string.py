"""The cell moves into a new folder (os.chdir), runs its training loop from a string with exec()
and saves a checkpoint by a relative path; the cwd stays where the cell left it."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import os, tempfile
_home_c21 = os.getcwd()
''',
    '''
os.chdir(tempfile.mkdtemp(prefix="run"))
src = """
for x, y in data:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""
exec(compile(src, "<train-src>", "exec"), globals())
torch.save(model.state_dict(), "ckpt.pt")
print(sorted(os.listdir(".")), round(loss.item(), 5))
''',
    '''
print(sorted(os.listdir(".")), os.getcwd() != _home_c21)
os.chdir(_home_c21)
''',
]
MEASURED = 1
REPORT = "kept"
