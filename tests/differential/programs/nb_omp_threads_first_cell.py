"""OMP_NUM_THREADS and torch.set_num_threads chosen in the first cell, before torch is imported:
torch must honour them as it does without the magic."""

CELLS = [
    """
import os
os.environ["OMP_NUM_THREADS"] = "1"
import random, numpy as np
random.seed(0); np.random.seed(0)
""",
    """
import torch
torch.manual_seed(0)
print("threads", torch.get_num_threads())
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("threads", torch.get_num_threads())
""",
]
MEASURED = 1
