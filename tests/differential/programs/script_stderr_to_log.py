"""A script that points fd 2 at its own log (as a logging setup does) and writes to it, from
Python and from a subprocess: the log holds its lines only; our report goes to the terminal's
stderr as it was when the run started. The descriptors it opens get the numbers they get without
us (a descriptor we keep open while the script runs is numbered high: capture/fds)."""
import os
import random
import subprocess
import sys

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
fd = os.open("train.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(fd, 2)
os.close(fd)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step}", file=sys.stderr, flush=True)
    if step == 5:  # a file opened between steps gets the number it gets without us
        mid_fd = os.open("mid.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(mid_fd)
subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child says hi\\n')"], check=True)
print("done")

from tests.differential.probe import dump  # noqa: E402

dump(globals())
