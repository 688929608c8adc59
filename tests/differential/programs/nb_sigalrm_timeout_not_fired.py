"""The cell's own SIGALRM timeout (signal.signal + setitimer) around training: it must NOT fire."""

CELLS = [
    """
import random, signal, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
X = torch.randn(256, 16); Y = torch.randn(256, 1)
""",
    """
fired = []
def on_timeout(signum, frame):
    fired.append(signum)
    raise TimeoutError("training took more than 60 s")
old = signal.signal(signal.SIGALRM, on_timeout)
signal.setitimer(signal.ITIMER_REAL, 60)
for step in range(200):
    loss = torch.nn.functional.mse_loss(model(X), Y)
    opt.zero_grad(); loss.backward(); opt.step()
signal.setitimer(signal.ITIMER_REAL, 0)
signal.alarm(0)
print("fired", fired, round(loss.item(), 5))
""",
]
MEASURED = 1
