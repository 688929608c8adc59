"""`%%time` stacked above `%%gpucheck`: its timing lines, then the cell's value as Out[N], in
that order, as for the same cell under `%%time` alone (the value is %%time's to show)."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(32, 8); Y = torch.randint(0, 2, (32,))
""",
    """
for step in range(12):
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(); loss.backward(); opt.step()
print("trained")
round(loss.item(), 6)
""",
]
MEASURED = 1
OUTER = "%%time"
# %%time's own figures differ from run to run; its lines and where they stand are compared.
NORMALISE = [(r"^CPU times: .*$", "CPU times: <t>"), (r"^Wall time: .*$", "Wall time: <t>")]
