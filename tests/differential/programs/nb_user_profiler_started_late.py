"""The user's profiler started by hand after a few steps (prof.start()/prof.stop()), then a
record_function block: it must record the steps it spans (not 0 events)."""

CELLS = [
    """
import random, collections, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 8)
prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
""",
    """
for step in range(12):
    if step == 5:
        prof.start()
    with torch.profiler.record_function("my_step"):
        loss = model(X).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    if step == 8:
        prof.stop()
counts = collections.Counter(e.name for e in prof.events())
print(counts["my_step"], counts["aten::addmm"])
""",
]
MEASURED = 1
# torch's profiler logs its start/stop on stderr with a timestamp and the process/thread ids
# (Kineto's USDT lines): those three fields are replaced, the lines themselves are compared.
NORMALISE = [(r"^USDT:\S+ \S+ \d+:\d+ ", "USDT:<time> <pid>:<tid> ")]
