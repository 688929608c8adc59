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
# time, the process/thread ids and the source line that logs it, then the message, written
# apart), and torch warns once per process "Profiler clears events at the end of each cycle"
# through sys.stderr. ipykernel merges the two streams by their flush timing, in plain runs too:
# a CI under load read a line cut after its prefix ("...cpp:52] " and a new line), and a
# both-cores-busy CI's *plain* run lost one message word ("USDT profiler_start USDT USDT ...":
# the fd-2 tail arrived after the cell). So each line is read by its prefix alone, which names
# the start (SyncActivityProfilerHandler.cpp:52) or the stop (:59) by its source line; the
# message words, the warning and its source line go, whitespace is one space. What stays
# compared: every start and stop the user's profiler logged, in order, and nothing else.
NORMALISE = [
    (r"USDT:\S+ \S+ \d+:\d+ \S+\.cpp:(\d+)\] ", r"USDT\1 "),
    (r"\bprofiler_(start|stop)\b", ""),
    (r"\S*torch/profiler/profiler\.py:\d+: UserWarning: Warning: Profiler clears events[^\n]*", ""),
    (r"_warn_once\(", ""),
    (r"\s+", " "),
]
