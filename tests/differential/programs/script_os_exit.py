"""A script that ends with os._exit(0) (no interpreter shutdown): nothing of ours left behind
in the temp folder, the same output."""
import os
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
print("bye", round(loss.item(), 6))
sys.stdout.flush()
os._exit(0)

REPORTS = 0  # os._exit skips every exit handler: no report can be printed
