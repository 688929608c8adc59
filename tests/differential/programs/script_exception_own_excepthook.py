"""An uncaught exception with the script's own sys.excepthook: the hook is called (it writes a
file and a line on stderr), exit code 1."""
import random
import sys

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)


def my_hook(exc_type, exc, tb):
    with open("crash.txt", "w") as fh:
        fh.write(f"{exc_type.__name__}: {exc}\n")
    print(f"my excepthook: {exc_type.__name__}: {exc}", file=sys.stderr)


sys.excepthook = my_hook
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
raise RuntimeError(f"out of patience at loss {loss.item():.6f}")
