"""A DataLoader with two spawn workers (multiprocessing_context="spawn")."""

CELLS = [
    """
import random, numpy as np, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0); random.seed(0); np.random.seed(0)
dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
loader = DataLoader(dataset, batch_size=32, num_workers=2, multiprocessing_context="spawn",
                    generator=torch.Generator().manual_seed(1), shuffle=True)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
""",
    """
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    print(epoch, round(loss.item(), 6))
""",
]
MEASURED = 1
TIMEOUT_S = 180
