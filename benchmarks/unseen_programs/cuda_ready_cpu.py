"""GPU-ready code run on the CPU (unseen round 11): ``device = "cuda" if available else "cpu"``,
``torch.backends.cudnn.deterministic = True`` and ``benchmark = False`` set for reproducibility,
the batch moved with ``.to(device, non_blocking=True)``, and a per-step
``if torch.cuda.is_available(): torch.cuda.synchronize()`` before a perf_counter step timer.
A small conv net on 32x32 images; the run here is CPU-only.

Class: correct or inert code on this machine. Written before the first run: on the CPU none of
these lines costs anything (the guard is False, non_blocking is a no-op, the cuDNN flags are not
read). The product must not report a per-step device sync as a measured cost of a CPU run, nor
the cuDNN flags, nor non_blocking; at most a note that on a GPU the guarded synchronize would
wait every step (the timer needs it only for the timed steps). Its real verdict here: the
convolutions' own time (GPU-bound's CPU analogue: compute), with nothing big to fix.

Seen on main e78d0f4 (load 15-17, 91% wait): no false finding (no sync, cuDNN or non_blocking
word). "Would a GPU help?" read 61.5x ("step 120.18 ms here") in the run with two profiled
windows and 7.4x ("11.98 ms") in the one-window run: the two windows' combination scaled their
own-time split to the wall mean step. Fixed (run_trend.combine_windows on own time): 3.6x and
5.2x ("15.98 / 14.26 ms here"), two-window runs at load 22-26. Then: that estimate
assumes "the host runs ahead of the GPU" though the guarded synchronize runs every step there:
fixed (SourceLine.cuda_only): "1.0 read(s) of device values per step ... under the cell's test
for CUDA", 1.1x.
"""

import time

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(32, 10),
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
X = torch.randn(2048, 3, 32, 32)
Y = torch.randint(0, 10, (2048,))
times = []
for step in range(100):  # noqa: B007 (the loop as measured)
    idx = torch.randint(0, 2048, (32,))
    x = X[idx].to(device, non_blocking=True)
    y = Y[idx].to(device, non_blocking=True)
    t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
print(f"median step {sorted(times)[len(times) // 2] * 1e3:.2f} ms")
