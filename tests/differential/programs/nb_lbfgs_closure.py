"""A closure optimizer: LBFGS calls the closure (forward + backward) several times per step."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(6, 1)
X = torch.randn(128, 6); Y = X @ torch.arange(6.).unsqueeze(1) + 0.5
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=5)
calls = 0
""",
    """
def closure():
    global calls
    calls += 1
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(X), Y)
    loss.backward()
    return loss

for step in range(12):
    loss = opt.step(closure)
print("calls", calls, "loss", round(loss.item(), 6))
""",
]
MEASURED = 1
