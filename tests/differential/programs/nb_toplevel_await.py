"""Top-level await in the measured cell (IPython's autoawait), inside the training loop."""

CELLS = [
    """
import asyncio, random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    """
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    await asyncio.sleep(0)
round(loss.item(), 6)
""",
]
MEASURED = 1
