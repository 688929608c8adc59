"""torch.jit.script and torch.jit.trace of the model inside the training cell."""

CELLS = [
    """
import random, numpy as np, torch, warnings
torch.manual_seed(0); random.seed(0); np.random.seed(0)
warnings.filterwarnings("ignore", category=DeprecationWarning)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(16, 4); Y = torch.randint(0, 2, (16,))
""",
    """
for step in range(10):
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(); loss.backward(); opt.step()
scripted = torch.jit.script(model)
traced = torch.jit.trace(model, X)
print(torch.allclose(scripted(X), model(X)), torch.allclose(traced(X), model(X)))
""",
]
MEASURED = 1
