"""No optimizer object: manual SGD (p.data.add_ and no_grad p -= lr * grad), checkpointing the
whole model with torch.save inside the loop, past the profiler window (> 70 steps)."""

CELLS = [
    """
import random, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
X = torch.randn(64, 8); Y = X[:, :1] * 2
lr = 0.05
""",
    """
for step in range(90):
    loss = (model(X) - Y).pow(2).mean()
    model.zero_grad()
    loss.backward()
    if step % 2:
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    else:
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    if step % 30 == 29:
        torch.save(model, f"ckpt_{step}.pt")
        print("saved", step, round(loss.item(), 6))
""",
    """
reloaded = torch.load("ckpt_89.pt", weights_only=False)
print(type(reloaded).__name__, torch.equal(reloaded[0].weight, model[0].weight))
""",
]
MEASURED = 1
