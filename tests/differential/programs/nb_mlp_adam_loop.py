"""An MLP trained with Adam over a DataLoader: the everyday loop."""

CELLS = [
    """
import torch, random, numpy as np
torch.manual_seed(0); random.seed(0); np.random.seed(0)
from torch.utils.data import DataLoader, TensorDataset
X = torch.randn(512, 16); Y = (X.sum(1, keepdim=True) > 0).float()
dataset = TensorDataset(X, Y)
loader = DataLoader(dataset, batch_size=32, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = torch.nn.BCEWithLogitsLoss()
""",
    """
losses = []
for epoch in range(3):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    losses.append(round(loss.item(), 6))
    print(f"epoch {epoch} loss {loss.item():.6f}")
losses[-1]
""",
]
MEASURED = 1
