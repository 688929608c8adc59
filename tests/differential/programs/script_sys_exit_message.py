"""A script ending with sys.exit("message"): the message on stderr, exit code 1."""
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
sys.exit(f"diverged? final loss {loss.item():.6f}")
