"""Script arguments passed through untouched (sys.argv), with --json and --html written by us
beside the script's own output file."""
import json
import random
import sys

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
steps = int(sys.argv[1])
out_path = sys.argv[2]
print("argv", sys.argv)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(steps):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
with open(out_path, "w") as fh:
    json.dump({"loss": round(loss.item(), 6), "steps": steps}, fh)

from tests.differential.probe import dump  # noqa: E402

dump(globals())

ARGS = ["12", "metrics.json"]
OPTIONS = ["--json", "report.json", "--html", "report.html"]
