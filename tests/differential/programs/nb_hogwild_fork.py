"""Hogwild with fork: a model in shared memory trained by fork-started processes (one after the
other, so the result is deterministic), then an evaluation loop in the parent. The children
inherit the step clock's hooks and count their steps into memory shared with the parent: their
results, exit codes and the parent's state must be as without the tool."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
model.share_memory()
X = torch.randn(64, 4)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X), batch_size=8)
def train(rank):
    torch.manual_seed(rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10 + rank):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
""",
    """
import multiprocessing as mp
codes = []
for rank in range(2):
    p = mp.get_context("fork").Process(target=train, args=(rank,))
    p.start(); p.join(); codes.append(p.exitcode)
with torch.no_grad():
    total = sum(float(model(x).sum()) for (x,) in loader)
print(codes, round(total, 5), [round(v, 6) for v in model.weight.detach().flatten().tolist()])
""",
]
MEASURED = 1
TIMEOUT_S = 240
