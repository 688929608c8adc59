"""OMP_NUM_THREADS set at the top of the script, before torch is imported: honoured."""
import os

os.environ["OMP_NUM_THREADS"] = "1"

import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
print("threads", torch.get_num_threads())
model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    loss = model(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()

from tests.differential.probe import dump  # noqa: E402

dump(globals())
