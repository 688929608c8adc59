"""The legacy autograd profiler, then emit_itt, started by the cell in the middle of its training
loop (while our window would record): neither may fail with "Profiler is already enabled", and
the legacy one records the ops of the steps it spans."""

CELLS = [
    """
import collections, random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 8)
""",
    """
counts = None
for step in range(14):
    if step == 3:
        with torch.autograd.profiler_legacy.profile() as prof:
            for _ in range(2):
                loss = model(X).pow(2).mean()
                opt.zero_grad(); loss.backward(); opt.step()
        counts = collections.Counter(e.name for e in prof.function_events)
    if step == 8:
        with torch.autograd.profiler.emit_itt():
            loss = model(X).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
    loss = model(X).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print(counts["aten::addmm"], counts["aten::mm"] > 0, round(loss.item(), 6))
""",
]
MEASURED = 1
OPTIONS = "-w 2 -s 4"
