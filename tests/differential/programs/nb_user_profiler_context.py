"""The user's own torch.profiler.profile() context around the loop: same ops recorded."""

CELLS = [
    """
import random, collections, numpy as np, torch
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 8)
""",
    """
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for step in range(8):
        loss = model(X).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
counts = collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))
print(len(counts) > 0, counts["aten::addmm"], counts["aten::mm"])
""",
]
MEASURED = 1
# torch's profiler logs its start/stop on stderr with a timestamp and the process/thread ids
# (Kineto's USDT lines): those three fields are replaced, the lines themselves are compared.
NORMALISE = [(r"^USDT:\S+ \S+ \d+:\d+ ", "USDT:<time> <pid>:<tid> ")]
