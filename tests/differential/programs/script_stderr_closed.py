"""A script that closes stderr (a daemon-style script) and ends normally: exit 0 either way;
our report goes to the private copy of stderr taken before the script ran."""
import os
import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", round(loss.item(), 6), flush=True)

from tests.differential.probe import dump  # noqa: E402

dump(globals())
os.close(2)
