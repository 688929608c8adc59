"""The cell installs its own SIGINT handler (a 'stop after this step' flag, as training scripts
do) and the loop signals itself at step 12: the handler runs, the loop breaks cleanly, no
KeyboardInterrupt; the user's handler is still installed after the cell."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
import os, signal
''',
    '''
stop_c21 = {"flag": False}
def on_sigint_c21(signum, frame):
    stop_c21["flag"] = True
signal.signal(signal.SIGINT, on_sigint_c21)
for i, (x, y) in enumerate(data):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if i == 12:
        os.kill(os.getpid(), signal.SIGINT)
    if stop_c21["flag"]:
        print("stopping gracefully at", i)
        break
''',
    '''
print(signal.getsignal(signal.SIGINT) is on_sigint_c21)
signal.signal(signal.SIGINT, signal.default_int_handler)
''',
]
MEASURED = 1
REPORT = "kept"
