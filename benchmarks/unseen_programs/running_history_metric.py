"""A hand-written loop with a running metric and a smoothed loss every step (unseen round 13):
the batch moved to the device twice (``x, y = x.to(device), y.to(device)`` and again in a
``forward_step`` helper), the accuracy by ``.cpu().numpy()`` every step, the loss history kept
as Python floats (``loss.item()``) and smoothed by ``torch.tensor(history).mean()`` over the
whole history every step, step timing by ``time.time()`` with ``torch.cuda.synchronize()``
guarded by ``is_available``.

Class: per-step host work that grows with the step count (the history), beside per-step reads.
Written before the first run: on a GPU every step waits for the GPU four times (``loss.item()``,
two ``.cpu().numpy()``, the guarded synchronize); the product should count them all, though on
this CPU ``.cpu().numpy()`` records no operator. The history's smoothing is O(steps).

Seen 2026-12-06 (load 20-22, 95% wait): HOST-BOUND (high); "[info] The loop reads device values
on the host every step (up to 1.00x)"; the smoothing line unnamed. By hand (running sum instead
of ``torch.tensor(history).mean()``, interleaved, CPU time after imports): 11.24/11.94 s as is,
13.36/11.92 s with the sum: no measurable effect at 256 steps (my premise wrong at this length:
the history is 256 floats). The GPU estimate on main counted reads from the trace alone, so a
loop whose only reads were ``.cpu().numpy()`` read "the host runs ahead of the GPU"; fixed in
round 13 (``cell.syncs.reads_no_cpu_trace_records``): here "4.0 read(s) ... (1 of them under the
script's test for CUDA, which this CPU run skipped; 1 by .cpu()/.numpy()/.tolist() ...)".
"""

import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def forward_step(model, x, y):
    x, y = x.to(device), y.to(device)
    out = model(x)
    return nn.functional.cross_entropy(out, y), out


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(4096, 64)
    y = (x[:, :8].sum(1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    history: list[float] = []
    correct = seen = 0
    step_times: list[float] = []
    for epoch in range(2):
        for xb, yb in loader:
            t0 = time.time()
            xb, yb = xb.to(device), yb.to(device)
            loss, out = forward_step(model, xb, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            history.append(loss.item())
            smooth = torch.tensor(history).mean().item()
            pred = out.argmax(1).cpu().numpy()
            correct += int(np.sum(pred == yb.cpu().numpy()))
            seen += len(pred)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            step_times.append(time.time() - t0)
        print(
            f"epoch {epoch} smooth {smooth:.3f} acc {correct / seen:.3f} "
            f"step {1000 * np.median(step_times):.2f} ms"
        )
