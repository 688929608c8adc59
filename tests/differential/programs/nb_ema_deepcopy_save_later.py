"""Best-checkpoint via copy.deepcopy(model) mid-loop (no optimizer object, > 70 steps), then
torch.save(best) and torch.jit.script(best) in a LATER cell."""

CELLS = [
    """
import copy, random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
X = torch.randn(64, 8); Y = X[:, :1] - X[:, 1:2]
best, best_loss = None, float("inf")
""",
    """
for step in range(100):
    loss = (model(X) - Y).pow(2).mean()
    model.zero_grad(); loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.02 * p.grad
    if step >= 75 and loss.item() < best_loss:
        best_loss, best = loss.item(), copy.deepcopy(model)
print(round(best_loss, 6))
""",
    """
torch.save(best, "best.pt")
scripted_best = torch.jit.script(best)
print("saved best", sorted(best.state_dict()))
""",
]
MEASURED = 1
