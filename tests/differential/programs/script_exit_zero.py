"""A plain training script that exits 0 and writes a checkpoint into its working directory."""
import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    x = torch.randn(16, 8)
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print(f"final loss {loss.item():.6f}")
torch.save(model.state_dict(), "model.pt")

from tests.differential.probe import dump  # noqa: E402

dump(globals())
