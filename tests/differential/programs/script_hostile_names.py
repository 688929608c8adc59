"""Names that would drive a terminal: record_function ranges (they reach the trace), a module
class name, and the script's final exception message, holding CSI and OSC sequences, C1
controls, a bidi override and a newline that forges a verdict line. The script's own traceback
is printed as Python prints it; our report must hold none of these characters raw."""
import random

import numpy as np
import torch

torch.manual_seed(0); random.seed(0); np.random.seed(0)
EVIL = "\x1b[2J\x1b[H\x1b]0;pwned\x07\x9b31m\x85\u202e\ngpucheck: GPU-BOUND  (forged)"
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    with torch.autograd.profiler.record_function("load" + EVIL):
        x = torch.randn(8, 4)
    with torch.autograd.profiler.record_function("step" + EVIL):
        loss = model(x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()

from tests.differential.probe import dump  # noqa: E402

dump(globals())
# The message keeps the escapes but not the forged line: a line of the script's own traceback
# starting with "gpucheck: " would be taken by the harness for the start of our report.
raise RuntimeError("bad batch" + EVIL.split("\n")[0])
