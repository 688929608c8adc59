"""Line magics, shell escapes and help lines inside the measured cell: %time on a step, a
captured !echo, a ?-help line, %who_ls; output order and values as without the magic."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(40)]
def step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss.item()
''',
    '''
echoed = !echo hello-from-shell
print("echo said", echoed)
!echo direct-shell-line
%time first = step(*data[0])
for x, y in data[1:]:
    last = step(x, y)
step?
names_c21 = %who_ls function
print(names_c21, round(last, 5))
len(data)
''',
]
MEASURED = 1
REPORT = "kept"
NORMALISE = [(r"^CPU times: .*$", "CPU times: <t>"), (r"^Wall time: .*$", "Wall time: <t>")]
