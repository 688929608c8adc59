"""A script that trains inside its scratch folder and removes that folder while still in it
(the process's cwd is then gone): exit 0, and our relative --json and --trace are written
where the run started."""
import os
import random
import shutil

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
top = os.getcwd()
scratch = os.path.join(top, "scratch")
os.makedirs(scratch)
os.chdir(scratch)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", round(loss.item(), 6))
os.chdir(top)  # the probe reads the cwd: from the top folder, then back into the scratch one

from tests.differential.probe import dump  # noqa: E402

dump(globals())
os.chdir(scratch)
shutil.rmtree(scratch)
top = scratch = None  # paths of the run's own folder: per-run values, not behaviour

OPTIONS = ["--json", "r.json", "--trace", "t.json.gz"]
