"""The cell runs another cell through get_ipython().run_cell(...) and then raises: the kernel's
reply must be an error (Run All / nbclient must stop), with the same traceback."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    """
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
get_ipython().run_cell("helper_value = 41 + 1")
raise ValueError(f"stop here, helper_value={helper_value}")
""",
    """
print("after", helper_value)
""",
]
MEASURED = 1
