"""The cell starts its own threads (inference in two named threads) beside its training loop."""

CELLS = [
    """
import random, threading, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(64, 8); Y = torch.randint(0, 2, (64,))
""",
    """
results = {}
def evaluate(name, xs):
    with torch.no_grad():
        results[name] = round(model(xs).sum().item(), 4)
for step in range(20):
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 9:
        ts = [threading.Thread(target=evaluate, args=(f"eval{step}-{k}", X[k::2]), name=f"eval-{k}")
              for k in range(2)]
        for t in ts: t.start()
        for t in ts: t.join()
print(sorted(results.items()))
""",
]
MEASURED = 1
