"""A TorchScript function that calls torch.autograd.backward, scripted inside the measured cell
(TorchScript looks builtins up by identity: a wrapper in their place fails to compile)."""

CELLS = [
    """
import random, numpy as np, torch, warnings
warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated")
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(6, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
X = torch.randn(32, 6); Y = torch.randn(32, 1)
""",
    """
@torch.jit.script
def backward_of(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    loss = ((pred - target) ** 2).mean()
    torch.autograd.backward([loss])
    return loss.detach()

for step in range(12):
    opt.zero_grad()
    loss = backward_of(model(X), Y)
    opt.step()
print(round(loss.item(), 6), backward_of.graph.findNode("aten::backward") is not None)
""",
]
MEASURED = 1
