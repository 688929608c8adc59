"""A heartbeat thread writes to the process's stderr (fd 2, which ipykernel forwards into the
cell) every 0.5 ms while the cell trains: every line must reach the cell's output, those written
while our profiler starts and stops included. Training waits for the heartbeat's count (20 lines
a step), so both runs write the same 800 lines with the profiler's start and stop among them."""

CELLS = [
    """
import os, random, threading, time, numpy as np, torch
torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(32, 16)
""",
    """
_count = [0]
def heartbeat():
    for k in range(800):
        os.write(2, b"hb %d\\n" % k)
        _count[0] = k + 1
        time.sleep(0.0005)
beat = threading.Thread(target=heartbeat, name="heartbeat")
beat.start()
for step in range(30):
    while _count[0] < 20 * step:
        time.sleep(0.0002)
    loss = model(X).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
beat.join()
time.sleep(0.2)  # ipykernel forwards fd 2 from a thread of its own: let it catch up
print("trained", round(loss.item(), 6))
""",
]
MEASURED = 1
