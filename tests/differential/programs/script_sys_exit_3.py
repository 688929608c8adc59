"""A script that trains, then ends with sys.exit(3): exit code 3 either way."""
import random
import sys

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", round(loss.item(), 6))

from tests.differential.probe import dump  # noqa: E402

dump(globals())
sys.exit(3)
