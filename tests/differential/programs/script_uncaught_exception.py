"""An uncaught exception with Python's default hook: the same traceback on stderr, exit 1."""
import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)


def train():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    return model(torch.randn(8, 5))  # wrong width: raises


train()
