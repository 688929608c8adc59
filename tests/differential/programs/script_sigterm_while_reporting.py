"""SIGTERM reaches the process after its training, as torchrun's reaches a rank still building
its report when another rank failed. An audit hook asks for it when gpucheck opens its window's
trace (synchronously, in the main thread, while gpucheck's private folder exists); the plain
run asks at the same point of its life, its end. Both end by SIGTERM (-15), and nothing is left
in the temp folder."""
import os
import random
import signal
import sys

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)


def _hook(event, args):
    if event == "open" and str(args[0]).endswith("trace.json") and args[1] in ("r", "rb"):
        os.kill(os.getpid(), signal.SIGTERM)


sys.addaudithook(_hook)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", round(loss.item(), 6), flush=True)

from tests.differential.probe import dump  # noqa: E402

dump(globals())
if "gpu_notebook" not in sys.modules:
    os.kill(os.getpid(), signal.SIGTERM)  # plain: nothing of ours will open a trace

REPORTS = 0  # the process ends by SIGTERM before any report
