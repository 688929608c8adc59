"""torch.compile of a whole training step, then of opt.step alone: Dynamo's frame, graph and
graph-break counts must be the plain program's, in the measured cell and in the next one
(a guard on our optimizer hooks would recompile there)."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 8); Y = torch.randint(0, 2, (16,))
def train_step(x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss
step = torch.compile(train_step, backend="eager")
opt_step = torch.compile(opt.step, backend="eager")
from torch._dynamo.utils import counters
def seen():
    return (dict(counters["frames"]), sum(counters["graph_break"].values()),
            counters["stats"].get("unique_graphs"))
""",
    """
for _ in range(6):
    loss = step(X, Y)
print("train step", seen())
for _ in range(6):
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(); loss.backward(); opt_step()
print("opt.step", seen(), round(loss.item(), 6))
""",
    """
for _ in range(3):
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(); loss.backward(); opt_step()
    loss = step(X, Y)
print("next cell", seen(), round(loss.item(), 6))
""",
]
MEASURED = 1
TIMEOUT_S = 240
# Dynamo's own log lines (the record_function it ignores) carry a timestamp and the pid.
NORMALISE = [(r"^([WIE])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ", r"\1<time> <pid> ")]
