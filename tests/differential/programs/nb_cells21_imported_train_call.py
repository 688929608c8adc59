"""The measured cell is one call of a training function imported from a module file the notebook
wrote into a folder of its own (sys.path), returning a dict: the cell's Out[] shows it, the
steps are the imported function's."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import os, sys, tempfile, textwrap
_mod_dir = tempfile.mkdtemp(prefix="usermods")
with open(os.path.join(_mod_dir, "trainlib_c21.py"), "w") as f:
    f.write(textwrap.dedent("""
        import torch
        def train(model, loader, opt, epochs=1):
            hist = []
            for epoch in range(epochs):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad(); loss.backward(); opt.step()
                    hist.append(round(loss.item(), 5))
            return {"steps": len(hist), "last": hist[-1]}
    """))
sys.path.insert(0, _mod_dir)
from trainlib_c21 import train
''',
    '''
train(model, data, opt, epochs=2)
''',
    '''
print(_, Out[max(Out)] == _ if Out else None)
sys.path.remove(_mod_dir)
''',
]
MEASURED = 1
REPORT = "kept"
# The steps are found in the imported function (80 optimizer steps: 40 batches, 2 epochs). Its
# file's name shows only where the stack sampler caught a step (80 steps in ~30 ms: under load,
# none at all), so it is not asked for.
REPORT_HAS = [r"Steps: 80 "]
