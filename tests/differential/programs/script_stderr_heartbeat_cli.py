"""A heartbeat thread writes to the process's stderr (fd 2) every 0.5 ms while the script trains:
every line must come through, also those written while the profiler starts and stops. Training
waits for the heartbeat's count (20 lines a step), so the profiler's start and stop always fall
inside the stream and both runs write the same 800 lines."""
import os
import random
import threading
import time

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
LINES = 800
_count = [0]


def heartbeat():
    for k in range(LINES):
        os.write(2, b"hb %d\n" % k)
        _count[0] = k + 1
        time.sleep(0.0005)


beat = threading.Thread(target=heartbeat, name="heartbeat")
beat.start()
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
X = torch.randn(32, 16)
for step in range(30):
    while _count[0] < 20 * step:
        time.sleep(0.0002)
    loss = model(X).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
beat.join()
print("trained", round(loss.item(), 6))

from tests.differential.probe import dump  # noqa: E402

dump(globals())
