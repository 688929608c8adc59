"""torch.multiprocessing.spawn of two trainer processes (their function in a module of the
cell's folder, as spawn needs), then an evaluation loop in the parent: the children's results
and the parent's state as without the tool, and the report names each child's optimizer steps
(counted in the children through multiprocessing's preparation data)."""

CELLS = [
    '''
import pathlib, random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
pathlib.Path("spawned_trainer.py").write_text("""
import torch
def train(rank, out):
    torch.manual_seed(rank)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10 + rank):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    out[rank] = round(loss.item(), 6)
    if rank == 0:
        print("rank", rank, "done", flush=True)
""")
import spawned_trainer
model = torch.nn.Linear(4, 1)
X = torch.randn(64, 4)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X), batch_size=8)
''',
    """
import torch.multiprocessing as mp
out = mp.Manager().dict()
mp.spawn(spawned_trainer.train, args=(out,), nprocs=2, join=True)
with torch.no_grad():
    total = sum(float(model(x).sum()) for (x,) in loader)
print(sorted(out.items()), round(total, 5))
""",
]
MEASURED = 1
TIMEOUT_S = 240
REPORT = "kept"
REPORT_HAS = [
    r"21 optimizer step\(s\) ran in 2 child process\(es\) the cell started by spawn",
    r"pid \d+: 10 in [0-9.]+ s \([0-9.]+ ms a step; [a-z ]+ \d+%, .*: bound by ",
    r"The training ran in 2 child process\(es\)",
    r"pid \d+: 11 in ",
]
