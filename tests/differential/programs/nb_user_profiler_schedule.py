"""The user's torch.profiler with schedule= and prof.step() inside the cell: it must not crash
("Profiler is already enabled") and must record its active steps."""

CELLS = [
    """
import random, collections, numpy as np, torch
from torch.profiler import profile, schedule, ProfilerActivity
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 8)
traces = []
""",
    """
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3),
             on_trace_ready=lambda p: traces.append(len(p.events()) > 0)) as prof:
    for step in range(8):
        loss = model(X).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        prof.step()
counts = collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))
print(traces, counts["aten::addmm"])
""",
]
MEASURED = 1
# torch's profiler logs its start/stop on stderr with a timestamp and the process/thread ids
# (Kineto's USDT lines): those three fields are replaced, the lines themselves are compared.
NORMALISE = [(r"^USDT:\S+ \S+ \d+:\d+ ", "USDT:<time> <pid>:<tid> ")]
# torch's once-per-process "Profiler clears events at the end of each cycle" UserWarning goes
# through sys.stderr while Kineto's lines go through fd 2: where it lands among them depends on
# two streams' flush timing, in plain runs too. It is taken out of both runs' text.
NORMALISE += [(r"\S*torch/profiler/profiler\.py:\d+: UserWarning: Warning: Profiler clears events[^\n]*\n?(  _warn_once\([^\n]*\n?)?", "")]
