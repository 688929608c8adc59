"""A script that joins every other thread before it ends (a common shutdown idiom): it must
not hang on a thread of ours."""
import random
import threading

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
for t in threading.enumerate():
    if t is not threading.main_thread():
        t.join()
print("all threads joined", round(loss.item(), 6))

from tests.differential.probe import dump  # noqa: E402

dump(globals())
