"""signal.pause() woken by the cell's own 0.5 s alarm, under %%gpucheck --lines all: the pause must
last until that alarm (the handler runs once; no other signal wakes it)."""

CELLS = [
    """
import random, signal, time, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(32, 8); Y = torch.randn(32, 1)
""",
    """
for step in range(20):
    loss = torch.nn.functional.mse_loss(model(X), Y)
    opt.zero_grad(); loss.backward(); opt.step()
woken = []
signal.signal(signal.SIGALRM, lambda signum, frame: woken.append(signum))
signal.setitimer(signal.ITIMER_REAL, 0.5)
_start = time.monotonic()
signal.pause()
paused_long_enough = time.monotonic() - _start >= 0.45
print("woken by", woken, "paused until the alarm:", paused_long_enough)
""",
]
MEASURED = 1
OPTIONS = "--lines all"
