"""The user's own hooks: a module forward hook, a global module forward hook, and wrappers the
cell installs around torch.autograd.backward and a DataLoader iterator's __next__: all still
called during the cell and still installed after it, exactly as without the magic."""

CELLS = [
    """
import random, numpy as np, torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data import dataloader as dl
torch.manual_seed(0); random.seed(0); np.random.seed(0)
dataset = TensorDataset(torch.randn(96, 4), torch.randn(96, 1))
loader = DataLoader(dataset, batch_size=8)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
calls = {"fwd": 0, "global_fwd": 0, "backward": 0, "next": 0}
""",
    """
def count_fwd(module, args, out): calls["fwd"] += 1
def count_global(module, args, out): calls["global_fwd"] += 1
handle = model[0].register_forward_hook(count_fwd)
global_handle = torch.nn.modules.module.register_module_forward_hook(count_global)

original_backward = torch.autograd.backward
def my_backward(*args, **kwargs):
    calls["backward"] += 1
    return original_backward(*args, **kwargs)
torch.autograd.backward = my_backward

original_next = dl._SingleProcessDataLoaderIter.__next__
def my_next(self):
    calls["next"] += 1
    return original_next(self)
dl._SingleProcessDataLoaderIter.__next__ = my_next

for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print(calls)
print(torch.autograd.backward is my_backward, dl._SingleProcessDataLoaderIter.__next__ is my_next)
""",
    """
print(torch.autograd.backward is my_backward, dl._SingleProcessDataLoaderIter.__next__ is my_next)
global_handle.remove()
""",
]
MEASURED = 1
