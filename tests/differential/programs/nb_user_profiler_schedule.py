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
# torch's profiler logs its start/stop on stderr (Kineto's USDT lines, fd 2: a prefix with the
# time and the process/thread ids, then the message, written apart), and torch warns once per
# process "Profiler clears events at the end of each cycle" through sys.stderr. ipykernel merges
# the two streams by their flush timing, in plain runs too: a CI under load (3 spinning loops)
# read a line cut after its prefix ("...cpp:52] " and a new line). So it is compared as words: the
# prefixes become "USDT", the warning and its source line go, whitespace is one space. What
# stays compared: every start and stop the user's profiler logged, in order, and nothing else.
NORMALISE = [
    (r"USDT:\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] ", "USDT "),
    (r"\S*torch/profiler/profiler\.py:\d+: UserWarning: Warning: Profiler clears events[^\n]*", ""),
    (r"_warn_once\(", ""),
    (r"\s+", " "),
]
