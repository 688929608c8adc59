"""A script that moves into its data folder and writes its own report.html and r.json there:
ours (--html report.html --json r.json, relative) land in the folder the run started in, and
the script's own files stay its own."""
import json
import os
import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
os.makedirs("data", exist_ok=True)
os.chdir("data")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
with open("report.html", "w") as fh:
    fh.write("<p>my own report</p>")
with open("r.json", "w") as fh:
    json.dump({"loss": round(loss.item(), 6)}, fh)
print("cwd ends in", os.path.basename(os.getcwd()))

from tests.differential.probe import dump  # noqa: E402

dump(globals())

OPTIONS = ["--json", "r.json", "--html", "report.html"]
# The probe's view of cwd is data/ (the script's); the harness checks our r.json at the top.
