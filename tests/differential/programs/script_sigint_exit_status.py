"""Ctrl-C in the middle of training: an uncaught KeyboardInterrupt. Python prints the
traceback, runs atexit, and ends by SIGINT itself (status -2; a shell loop stops): the same
measured, after our report of the steps that ran."""
import atexit
import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
atexit.register(print, "atexit ran")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()

from tests.differential.probe import dump  # noqa: E402

dump(globals())
raise KeyboardInterrupt
