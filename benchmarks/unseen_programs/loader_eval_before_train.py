"""An evaluation over a DataLoader before training (and again after it) in one script.

Class of problem: the step clock counts the evaluation's DataLoader reads as steps until an
optimizer appears; past 64 of them it went lean and dropped the optimizer's hook, so the
training's optimizer never took the steps over: the report's "steps" were the evaluations'
1200 reads and the training's 40 steps together, its window profiled three evaluation batches,
and the evaluations' time was weighed as steps.

What the product should say: 40 steps counted at the optimizer; the evaluation before them is
the cell's time before the first step (named: `print(validate())`), the one after them its time
after the last; the window that recorded evaluation reads is said as work before training; the
phases are the optimizer steps' own (hook timings).
"""

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
val = DataLoader(
    TensorDataset(torch.randn(600 * 64, 256), torch.randint(0, 10, (600 * 64,))), batch_size=64
)
train = DataLoader(
    TensorDataset(torch.randn(40 * 64, 256), torch.randint(0, 10, (40 * 64,))), batch_size=64
)


def validate():
    model.eval()
    with torch.no_grad():
        n = sum((model(x).argmax(1) == y).sum().item() for x, y in val)
    model.train()
    return n


print(validate())
for x, y in train:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(validate())
