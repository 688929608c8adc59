"""The legacy torch.autograd.profiler.profile with record_function blocks."""

CELLS = [
    """
import random, collections, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 8)
""",
    """
with torch.autograd.profiler.profile() as prof:
    for step in range(6):
        with torch.autograd.profiler.record_function("forward_block"):
            loss = model(X).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
counts = collections.Counter(e.name for e in prof.function_events)
print(counts["forward_block"], counts["aten::addmm"])
""",
]
MEASURED = 1
# torch's profiler logs its start/stop on stderr with a timestamp and the process/thread ids
# (Kineto's USDT lines): those three fields are replaced, the lines themselves are compared.
NORMALISE = [(r"^USDT:\S+ \S+ \d+:\d+ ", "USDT:<time> <pid>:<tid> ")]
