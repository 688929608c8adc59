"""A cell with a SyntaxError: the same error, and no (empty) report of ours."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
""",
    """
for step in range(3)
    loss = model(torch.randn(8, 4)).sum()
""",
]
MEASURED = 1
REPORT = "none"
