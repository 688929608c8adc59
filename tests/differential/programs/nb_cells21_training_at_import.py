"""The measured cell imports a module whose import trains (module-level loop, as quick scripts
are written), then reloads it with importlib.reload: both runs train; the module's state after
as without the magic."""

CELLS = [
    '''
import random, numpy as np, torch, sys, os, importlib
torch.manual_seed(0); random.seed(0); np.random.seed(0)
import textwrap
os.makedirs("pkg_c21", exist_ok=True)
with open("pkg_c21/__init__.py", "w") as f:
    f.write("")
with open("pkg_c21/quicktrain.py", "w") as f:
    f.write(textwrap.dedent("""
        import torch
        from torch import nn
        model = nn.Linear(16, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(20):
            x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
        final = round(loss.item(), 5)
        print("trained at import", final)
    """))
sys.path.insert(0, os.getcwd())
''',
    '''
import pkg_c21.quicktrain as qt
qt = importlib.reload(qt)
qt.final
''',
    '''
print(qt.final, qt.step, sys.modules["pkg_c21.quicktrain"] is qt)
sys.path.remove(os.getcwd())
''',
]
MEASURED = 1
REPORT = "kept"
