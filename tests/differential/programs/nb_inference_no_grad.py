"""Inference only: eval mode under torch.no_grad (no backward, no optimizer), 100 batches."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Dropout(0.1), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4)).eval()
batches = [torch.randn(32, 16) for _ in range(100)]
""",
    """
preds = []
with torch.no_grad():
    for xb in batches:
        preds.append(model(xb).argmax(1))
preds = torch.cat(preds)
print(preds.bincount(minlength=4).tolist())
""",
]
MEASURED = 1
