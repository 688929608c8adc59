"""The cell (and a later one) start subprocesses: they must see the same environment (no
KINETO_* or other variables of ours leaking into them)."""

CELLS = [
    """
import random, subprocess, sys, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
CHILD = 'import os; print(sorted(k for k in os.environ if "KINETO" in k or "GPU" in k or "TORCH" in k))'
""",
    """
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True).stdout)
""",
    """
print(subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True).stdout)
""",
]
MEASURED = 1
