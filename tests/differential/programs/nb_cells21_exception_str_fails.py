"""The loop raises an exception of the user's whose __str__ fails (it reads an attribute its
__init__ never set): the kernel's error reply and traceback are the user's exception's, as
without the magic (our report's failure sentence once called str() on it and failed the cell
with that AttributeError, through our code)."""

CELLS = [
    '''
import random, numpy as np, torch
from torch import nn
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
class DivergedC21(Exception):
    def __init__(self, step):
        self.step = step
    def __str__(self):
        return f"diverged at {self.step} with loss {self.loss:.3f}"
''',
    '''
for i in range(30):
    loss = nn.functional.cross_entropy(model(torch.randn(8, 16)), torch.randint(0, 4, (8,)))
    opt.zero_grad(); loss.backward(); opt.step()
    if i == 20:
        raise DivergedC21(i)
''',
    '''
import sys
print(sys.last_type.__name__, i)
''',
]
MEASURED = 1
REPORT = "kept"
REPORT_HAS = [r"DivergedC21: <exception str\(\) failed>"]
