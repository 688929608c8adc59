"""A progress print refreshed with clear_output(wait=True) as the loop's LAST act: the plain
cell ends with its last print on screen (the pending clear never comes); our report is the next
output, so the cell's last outputs are sent again before it. What a saved notebook keeps of the
user's outputs must be the plain run's, and the report must be there too."""

CELLS = [
    """
import random, numpy as np, torch
from IPython.display import clear_output, display
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
""",
    """
for epoch in range(4):
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    print(f"epoch {epoch}: loss {loss.item():.5f}")
    display({"text/plain": f"progress {epoch + 1}/4"}, raw=True)
    clear_output(wait=True)
""",
]
MEASURED = 1
REPORT = "kept"
SAME = "saved"
