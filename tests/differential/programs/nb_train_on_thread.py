"""The cell trains on a worker thread it starts and joins (the cell's own thread only waits):
the steps are the thread's, and nothing about the thread or the training may change."""

CELLS = [
    """
import random, threading, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(32, 8); Y = torch.randint(0, 2, (32,))
""",
    """
losses = []
def train():
    for step in range(25):
        loss = torch.nn.functional.cross_entropy(model(X), Y)
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(round(loss.item(), 6))
worker = threading.Thread(target=train, name="trainer")
worker.start(); worker.join()
print(len(losses), losses[-1], worker.is_alive(), [t.name for t in threading.enumerate()])
""",
]
MEASURED = 1
REPORT = "kept"
