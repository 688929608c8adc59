"""A progress display refreshed with clear_output(wait=True): same outputs, and our report must
survive in the saved notebook."""

CELLS = [
    """
import random, numpy as np, torch
from IPython.display import clear_output
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    """
for epoch in range(4):
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    clear_output(wait=True)
    print(f"epoch {epoch}: loss {loss.item():.5f}")
""",
]
MEASURED = 1
REPORT = "kept"
