"""A script that forks a child which trains a little and exits: one report, from the parent,
and --json written once by the parent."""
import os
import random
import sys

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
sys.stdout.flush()
_pid = os.fork()
if _pid == 0:
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    with open("child.txt", "w") as fh:
        fh.write("child done\n")
    sys.exit(0)
_, status = os.waitpid(_pid, 0)
print("child exit status", os.waitstatus_to_exitcode(status))

from tests.differential.probe import dump  # noqa: E402

dump(globals())

OPTIONS = ["--json", "report.json"]
