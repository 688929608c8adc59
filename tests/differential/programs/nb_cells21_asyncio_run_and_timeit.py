"""The cell times its step with %timeit (the statement runs in timeit's own function, many
times), then calls asyncio.run() for an async evaluation: in a kernel that raises 'cannot be
called from a running event loop' without the magic, and must raise the same under it."""

CELLS = [
    '''
import random, asyncio, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
X, Y = torch.randn(8, 16), torch.randint(0, 4, (8,))
def step():
    loss = nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss
async def evaluate():
    await asyncio.sleep(0)
    return round(nn.functional.cross_entropy(model(X), Y).item(), 5)
''',
    '''
%timeit -n 10 -r 2 step()
for _ in range(10):
    step()
try:
    print("eval", asyncio.run(evaluate()))
except RuntimeError as exc:
    print("asyncio.run:", exc)
print(asyncio.get_event_loop().is_running())
''',
]
MEASURED = 1
REPORT = "kept"
# %timeit's own figures differ from run to run; its line and where it stands are compared (its
# "The slowest run took N times longer" note comes or not with the machine's load).
NORMALISE = [
    (r"^The slowest run took .*\n", ""),
    (r"^.* per loop \(mean .*\)$", "<timeit line>"),
]
